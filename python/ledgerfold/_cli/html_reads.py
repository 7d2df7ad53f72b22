"""The inspector page's reads that go on past rows changed outside ledgerfold (`html_data`
gathers the page): the live ledger with each turn the store cannot read back left out and
named (`load_marking_damage`), the context or why it cannot be assembled, and the roles a
plan preserves (the default when another tool left them unreadable). Every read goes
through a read-only connection (`read_only`) or the store's own reads."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerfold._cli.main import damaged_row, key_text
from ledgerfold._context import AssembledContext
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._model import Conversation
from ledgerfold._policy import CompactionPolicy
from ledgerfold._summary import SummaryEnvelope
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._paths import connect_reading
from ledgerfold.store._plan_roles import damaged_roles, plan_roles
from ledgerfold.store._protocol import SummaryRecord
from ledgerfold.store._rows import SUMMARY_COLUMNS, TURN_COLUMNS
from ledgerfold.store._schema import TURN_LIVE
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.store._summaries import readable_record

__all__ = [
    "DamagedTurn",
    "context_or_damage",
    "load_marking_damage",
    "preserve_roles",
    "read_only",
    "stored_versions",
    "summaries_marking_damage",
    "unreadable_plan",
]


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    # Never `mode=ro` alone: it would leave a WAL and -shm behind (SPEC §15.7).
    with closing(connect_reading(str(path.resolve()), factory=sqlite3.Connection)) as conn:
        yield conn


@dataclass(frozen=True, slots=True)
class DamagedTurn:
    """A live turn row the store cannot read back (changed outside ledgerfold): its
    sequence (-1 when that is what cannot be read), its ID as text (bad bytes replaced) and
    the column the store refused. Never its content."""

    sequence: int
    turn_id: str
    column: str


#: The store's names of the fields `Conversation._from_rows` refuses, as `turns` columns.
_COLUMNS = {"group": "grp", "meta_json": "meta"}


#: How the store's error for a damaged `conversations` row begins.
_CONVERSATION_ROW = "damaged row in table conversations,"


def load_marking_damage(
    store: SQLiteStore, path: Path, conversation_id: str
) -> tuple[Conversation, tuple[DamagedTurn, ...]]:
    """`store.load()`, or, when a live row cannot be read back (`damaged_row`), the ledger
    of the rows that can and each one that cannot, in sequence order: the page shows the
    conversation and marks the damaged turns, where `load()` raises."""
    try:
        return store.load(conversation_id), ()
    except StoreError as error:
        # A damaged conversations row (its revision) makes no ledger to mark turns on.
        if damaged_row(error) is None or str(error).startswith(_CONVERSATION_ROW):
            raise
    with read_only(path) as conn:
        found = conn.execute(
            "SELECT revision FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        rows = lenient_rows(
            conn,
            f"SELECT {TURN_COLUMNS}, digest FROM turns"
            " WHERE conversation_id = ? AND state = ? ORDER BY sequence",
            (conversation_id, TURN_LIVE),
        )
    revision = found[0] if found is not None else 0
    damaged: list[DamagedTurn] = []
    while True:
        try:
            conversation = Conversation._from_rows(conversation_id, revision, rows)
        except InvalidInput as err:
            refused = re.match(r"rows\[(\d+)\]\.", str(err))
            if refused is None or int(refused.group(1)) >= len(rows):
                raise
            row = rows.pop(int(refused.group(1)))
            sequence = row[1] if type(row[1]) is int else -1
            column = _COLUMNS.get(str(err.field), str(err.field))
            damaged.append(DamagedTurn(sequence, key_text(row[0]), column))
            continue
        return conversation, tuple(sorted(damaged, key=lambda turn: turn.sequence))


def context_or_damage(
    store: SQLiteStore, conversation_id: str, policy_version: str, damaged: bool
) -> tuple[AssembledContext | None, str | None]:
    """The context, or None and why it cannot be assembled when a row of the conversation
    was changed outside ledgerfold (`damaged`: a live turn is known to be; the store's
    error names the row)."""
    try:
        return store.context(conversation_id, policy_version), None
    except StoreError as error:
        if not damaged:
            raise
        return None, str(error)


def preserve_roles(conn: sqlite3.Connection, plan_id: str | None, conversation_id: str) -> Any:
    """The preserve_roles of the summary's plan (else the newest plan, else the default, as
    for roles another tool left unreadable: not a JSON list of strings)."""
    rows = []
    if plan_id is not None:
        rows = lenient_rows(conn, "SELECT preserve_roles FROM plans WHERE id = ?", (plan_id,))
    rows = rows or lenient_rows(
        conn,
        "SELECT preserve_roles FROM plans WHERE conversation_id = ? ORDER BY pk DESC LIMIT 1",
        (conversation_id,),
    )
    try:
        roles = json.loads(rows[0][0]) if rows else None
    except (TypeError, ValueError, RecursionError):
        roles = None
    if isinstance(roles, list) and all(isinstance(role, str) for role in roles):
        return tuple(roles)
    return CompactionPolicy("-").preserve_roles


def summaries_marking_damage(
    store: SQLiteStore, conversation_id: str
) -> tuple[SummaryEnvelope | None, list[SummaryRecord] | None, str | None]:
    """The current summary and the summary history as the store reads them; when a record
    or its sources cannot be read back (changed outside ledgerfold), None for what failed
    and the store's error naming the record (`stored_versions` lists them as stored)."""
    damage = None
    try:
        current = store.current_summary(conversation_id)
    except StoreError as error:
        if damaged_row(error) is None:
            raise
        current, damage = None, str(error)
    try:
        return current, store.summary_history(conversation_id), damage
    except StoreError as error:
        if damaged_row(error) is None:
            raise
        return current, None, damage or str(error)


def stored_versions(path: Path, conversation_id: str) -> list[tuple[Any, ...]]:
    """Each summary record of the conversation as stored, oldest first: `(id, plan_id,
    status, reason, created_at, sources, fingerprint, parent_id, policy_version, damaged)`,
    text that is not UTF-8 as `?` (an ID, reason, fingerprint or version as None), and
    whether the store cannot read the record (`readable_record`, its sources aside)."""
    with read_only(path) as conn:
        rows = lenient_rows(
            conn,
            f"SELECT {SUMMARY_COLUMNS}, source_count FROM summaries"
            " WHERE conversation_id = ? ORDER BY pk",
            (conversation_id,),
        )

    def text(value: object, default: str | None = None) -> Any:
        return value if isinstance(value, str) else default

    return [
        (
            text(row[1]),
            text(row[3], "?"),
            text(row[4], "?"),
            text(row[5]),
            text(row[6], "?"),
            row[14] if type(row[14]) is int else 0,
            text(row[8]),
            text(row[13]),
            text(row[9]),
            not readable_record(row[:14]),
        )
        for row in rows
    ]


def unreadable_plan(
    path: Path, current: SummaryEnvelope | None, damage: str | None
) -> tuple[SummaryEnvelope | None, str | None, str | None]:
    """The current summary, the ID of the one whose plan's `preserve_roles` cannot be read
    back (another tool's write, `_plan_roles`) and the summary damage to show, `damage`
    else the store's error naming that plan. The context then falls back
    (`stale-summary:damaged-record`): the page shows the record as damaged and no summary
    in use, as the context has it, never its layout judged by roles it does not know."""
    if current is None:
        return None, None, damage
    with read_only(path) as conn:
        roles = plan_roles(conn, current.plan_id)
    if roles is not None:
        return current, None, damage
    return None, current.id, damage or str(damaged_roles(current.plan_id, current.id))
