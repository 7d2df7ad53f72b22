"""The roles a plan kept raw (`plans.preserve_roles`, SPEC §15.8 "Planning inputs", §17.3),
read leniently: text another tool left unreadable (not UTF-8, not JSON, not a list of role
names) is damage, as a damaged summary record is. The store's context then falls back
(`stale-summary:damaged-record`): the layout of a summary whose plan's roles are unknown
cannot be checked; a compaction treats the summary as one it cannot extend (a rebase, due at
once) and a commit under such a plan is refused (`plan-mismatch`). The IDs an active plan
adds (`plans.compacted_ids`, `planned_ids`) are read so too: left unreadable between the
plan and its commit, the commit is refused alike (whether its sources are the plan's
cannot be checked, SPEC §15.4)."""

from __future__ import annotations

import json
import sqlite3

from ledgerfold._model import ROLES
from ledgerfold.store._rows import DamagedSummary, Version
from ledgerfold.store._schema import TURN_RETRACTED
from ledgerfold.store._sqlite_errors import quotes_stored_data

__all__ = [
    "ROLES_DAMAGED_SQL",
    "DamagedPlan",
    "damaged_roles",
    "missing_preserved",
    "plan_roles",
    "planned_ids",
]

#: SQL: whether the roles plan row `l` kept raw cannot be read back (`plan_roles` gives
#: None): not text (a blob, a number; NULL is no role), not JSON, not a JSON list, or holding
#: what is not a role name (text that is not UTF-8 names no role). For the callers that
#: list records without reading each (`stats()`, deep revalidation's listing).
ROLES_DAMAGED_SQL = (
    "CASE WHEN l.preserve_roles IS NULL OR l.preserve_roles = '[]' THEN 0"
    " WHEN typeof(l.preserve_roles) <> 'text' THEN 1"
    " WHEN NOT json_valid(l.preserve_roles) THEN 1"
    " WHEN json_type(l.preserve_roles) != 'array' THEN 1"
    " ELSE EXISTS (SELECT 1 FROM json_each(l.preserve_roles) r WHERE r.type != 'text'"
    f" OR r.value NOT IN ({', '.join(repr(role) for role in ROLES)})) END"
)


class _Damaged(Exception):
    pass


class DamagedPlan(Exception):
    """An active plan whose added IDs (or base) another tool left unreadable (`planned_ids`)."""


def _parse(text: object) -> tuple[str, ...]:
    if text is None:  # the column's default is '[]'; a NULL is no role
        return ()
    if not isinstance(text, str):
        raise _Damaged
    try:
        roles = json.loads(text)
    except (ValueError, RecursionError):
        raise _Damaged from None
    if not isinstance(roles, list) or any(
        not isinstance(role, str) or role not in ROLES for role in roles
    ):
        raise _Damaged
    return tuple(roles)


def plan_roles(conn: sqlite3.Connection, plan_id: str) -> tuple[str, ...] | None:
    """The roles plan `plan_id` preserved, as stored (`()` when there is no such plan, as
    for a plan from before v1.1); None when its `preserve_roles` cannot be read back."""
    try:
        row = conn.execute("SELECT preserve_roles FROM plans WHERE id = ?", (plan_id,)).fetchone()
    except sqlite3.OperationalError as error:
        if not quotes_stored_data(error):
            raise
        return None  # text that is not UTF-8
    if row is None:
        return ()
    try:
        return _parse(row[0])
    except _Damaged:
        return None


def planned_ids(
    conn: sqlite3.Connection, plan_id: str
) -> tuple[int | None, set[str], tuple[str, ...]] | None:
    """A registered plan's base summary pk, the IDs it adds to the base's sources and the
    roles it kept raw; None for a plan without IDs (from before v1.1, or one that ended:
    never active, so never asked). `DamagedPlan` when they cannot be read back: IDs that
    are not UTF-8 text, not JSON, not a JSON list of IDs (a blob, a number), or a base that
    is no row number."""
    try:
        row = conn.execute(
            "SELECT base_summary_pk, compacted_ids FROM plans WHERE id = ?", (plan_id,)
        ).fetchone()
    except sqlite3.OperationalError as error:
        if not quotes_stored_data(error):
            raise
        raise DamagedPlan from None  # text that is not UTF-8
    if row is None or row[1] is None:
        return None
    base, text = row
    if not isinstance(text, str) or (base is not None and type(base) is not int):
        raise DamagedPlan
    try:
        ids = json.loads(text)
    except (ValueError, RecursionError):
        raise DamagedPlan from None
    if not isinstance(ids, list) or not all(isinstance(turn_id, str) for turn_id in ids):
        raise DamagedPlan
    roles = plan_roles(conn, plan_id)  # None: refused by the commit first
    return base, set(ids), roles or ()


def damaged_roles(plan_id: str, summary_id: str) -> DamagedSummary:
    """The damage of a summary whose plan's roles cannot be read (names, never content)."""
    return DamagedSummary(
        f"damaged row in table plans, column preserve_roles: plan {plan_id!r} (of summary"
        f" {summary_id!r}); the database was changed outside ledgerfold",
        summary_id=summary_id,
    )


def missing_preserved(conn: sqlite3.Connection, used: Version) -> str | None:
    """SPEC §17.3: the ID of a turn kept raw below the summary's slot because it was
    protected or of a role its plan preserved, and retracted since; None when there is none.
    (A purged one is not missing: its boundary is disclosed.) Its plan's roles unreadable:
    `DamagedSummary` (whether a retracted turn was preserved cannot be told)."""
    envelope = used.envelope
    roles = plan_roles(conn, envelope.plan_id)
    if roles is None:
        raise damaged_roles(envelope.plan_id, envelope.id)
    hit = conn.execute(
        "SELECT t.id FROM summary_kept k JOIN turns t ON t.pk = k.turn_pk"
        " WHERE k.summary_pk = ? AND t.state = ?"
        " AND (t.protected OR t.role IN (SELECT value FROM json_each(?)))"
        " ORDER BY t.sequence LIMIT 1",
        (used.pk, TURN_RETRACTED, json.dumps(list(roles))),
    ).fetchone()
    return None if hit is None else str(hit[0])
