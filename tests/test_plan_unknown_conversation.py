"""A plan for a conversation no turn was ever written to — a typo, one deleted since — is
the empty plan at revision 0 (the Store contract: an unknown conversation reads as empty),
and the store registers nothing for it. Before, it registered the plan and, planned again,
wrote a `failed`/`abandoned` record: `stats().summaries` counted records of a conversation
that `conversations` (0) and `conversation_ids()` did not know."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import ledgerfold as lf

PV = "plan-unknown-v1"


def _rows(path: Path) -> tuple[int, int, int]:
    with sqlite3.connect(path) as conn:
        plans, active, records = (
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("plans", "active_plans", "summaries")
        )
    return plans, active, records


def test_a_plan_for_an_unknown_conversation_is_empty_and_records_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "plans.db"
    with lf.SQLiteStore(path) as store:
        store.append_many("known", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
        for _ in range(2):  # the second abandoned the first: a `failed` record
            plan = store.start_plan("nobody", 2, PV)
            assert plan.is_empty and plan.source_revision == 0
        stats = store.stats()
        assert store.summary_history("nobody") == []
    assert stats.conversations == 1
    assert sum(stats.summaries.values()) == 0
    assert _rows(path) == (0, 0, 0)


def test_a_deleted_conversation_is_unknown_and_a_known_one_still_registers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deleted.db"
    with lf.SQLiteStore(path) as store:
        for cid in ("kept", "gone"):
            store.append_many(cid, [{"role": "user", "body": f"turn {n}"} for n in range(6)])
        store.delete_conversation("gone")
        assert store.start_plan("gone", 2, PV).is_empty
        assert _rows(path) == (0, 0, 0)
        store.start_plan("kept", 2, PV)
        store.start_plan("kept", 2, PV)  # the first is abandoned: one `failed` record
        # A conversation whose every turn was retracted is known: its plans register.
        for turn in store.load("kept").turns:
            store.retract("kept", turn.id)
        assert store.start_plan("kept", 2, PV).is_empty
        assert store.stats().summaries["failed"] == 2
    assert _rows(path) == (3, 1, 2)
