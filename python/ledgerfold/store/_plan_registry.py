"""Registering a compaction's plan as its conversation's active one, and marking a plan
ended once it has a record (SPEC §15.4, §15.8 "Abandoned"). Split from `_compaction`, which
plans; `_compaction` re-exports both names."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

from ledgerfold._errors import InvalidInput
from ledgerfold.store._database import now
from ledgerfold.store._schema import FAILED

if TYPE_CHECKING:
    from ledgerfold.store._compaction import Planned

__all__ = ["mark_ended", "register"]


def register(
    conn: sqlite3.Connection,
    planned: Planned,
    policy_version: str,
    preserve_roles: tuple[str, ...],
) -> None:
    """Make the plan the conversation's active one. An earlier active plan that ended
    without any record (its process died, or it was given up) gets `failed`/`abandoned`."""
    plan = planned.plan
    if conn.execute("SELECT 1 FROM plans WHERE id = ?", (plan.plan_id,)).fetchone():
        raise InvalidInput(
            f"plan_id: plan {plan.plan_id!r} already exists", field="plan_id", problem="duplicate"
        )
    previous = conn.execute(
        "SELECT p.id, p.ended FROM active_plans a JOIN plans p ON p.pk = a.plan_pk"
        " WHERE a.conversation_id = ?",
        (plan.conversation_id,),
    ).fetchone()
    # `ended` is set with a plan's first record, so a record pruned since does not make the
    # plan look abandoned; plans of a v1 database have records but no flag.
    if (
        previous is not None
        and not previous[1]
        and not conn.execute(
            "SELECT 1 FROM summaries WHERE conversation_id = ? AND plan_id = ? LIMIT 1",
            (plan.conversation_id, previous[0]),
        ).fetchone()
    ):
        conn.execute(
            "INSERT INTO summaries (conversation_id, plan_id, status, reason, created_at)"
            f" VALUES (?, ?, '{FAILED}', 'abandoned', ?)",
            (plan.conversation_id, previous[0], now()),
        )
        mark_ended(conn, plan.conversation_id, previous[0])
    if previous is not None:  # replaced: its IDs are never read again (`mark_ended`)
        conn.execute(
            "UPDATE plans SET compacted_ids = NULL WHERE id = ? AND conversation_id = ?",
            (previous[0], plan.conversation_id),
        )
    base = planned.base
    added = tuple(turn.id for turn in planned.new_turns)
    plan_pk = conn.execute(
        "INSERT INTO plans (id, conversation_id, policy_version, source_revision,"
        " through_sequence, compacted_count, created_at, base_summary_pk, compacted_ids,"
        " preserve_roles) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            plan.plan_id,
            plan.conversation_id,
            policy_version,
            plan.source_revision,
            plan.through_sequence,
            len(plan.compacted_ids),
            now(),
            None if base is None else base.pk,
            json.dumps(added, ensure_ascii=False),
            json.dumps(preserve_roles),
        ),
    ).lastrowid
    conn.execute(
        "INSERT INTO active_plans (conversation_id, plan_pk) VALUES (?, ?)"
        " ON CONFLICT (conversation_id) DO UPDATE SET plan_pk = excluded.plan_pk",
        (plan.conversation_id, plan_pk),
    )


def mark_ended(conn: sqlite3.Connection, conversation_id: str, plan_id: str) -> None:
    """The conversation's plan has a record (accepted, rejected, failed or abandoned). Its
    added IDs were read by the commit only (`_plan_roles.planned_ids`, for the active plan)
    and are dropped once it is no longer the active plan: the row stays small, and a context read
    of its `preserve_roles` no longer walks a list as long as the plan (3 MB of overflow
    pages, 0.5 ms, for a first summary of 300k turns). A plan still active after a refused
    result keeps them: a second commit under it is held to them as the first was (SPEC
    §15.4, §17.1); `register` drops them when the next plan replaces it. A plan of another
    conversation (an envelope naming it) is left alone."""
    conn.execute(
        "UPDATE plans SET ended = 1, compacted_ids = CASE WHEN pk IN"
        " (SELECT plan_pk FROM active_plans WHERE conversation_id = ?)"
        " THEN compacted_ids END WHERE id = ? AND conversation_id = ?",
        (conversation_id, plan_id, conversation_id),
    )
