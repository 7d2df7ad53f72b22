"""An active plan whose added IDs (`plans.compacted_ids`) another tool left unreadable
between the plan and its commit (text that is not UTF-8, not JSON, not a list of IDs, a blob,
a number): the commit raised (`JSONDecodeError`, `TypeError`, SQLite's decode error) or took
the damage for IDs. It is now judged as a plan whose roles are damaged is: the commit is
refused (`invalid-summary`, `plan-mismatch`: whether its sources are the plan's cannot be
checked), nothing is written, and the next compaction plans again and is accepted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, create_summary_envelope

PV = "v1"
CID = "c"
POLICY = CompactionPolicy(PV, keep_tail=2, min_new_turns=50)
DAMAGE = {
    "not-utf8": "CAST(X'5b227431ff225d' AS TEXT)",  # ["t1\xff"]
    "not-json": "'not json'",
    "not-a-list": "'{\"t1\": 1}'",
    "a-string": "'\"t1\"'",
    "not-ids": "'[1, 2]'",
    "nested": "'[[\"t1\"]]'",
    "a-blob": "X'5b5d'",  # the bytes of '[]'
    "a-number": "7",
    "too-deep": "'" + "[" * 100_000 + "]" * 100_000 + "'",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_commit_under_a_plan_with_damaged_ids_is_refused(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        for n in range(8):
            store.append(CID, "user" if n % 2 == 0 else "assistant", f"turn {n}")
        plan = store.start_plan(CID, 2, PV)
    with sqlite3.connect(db) as conn:  # another tool's write, after the plan
        conn.execute(f"UPDATE plans SET compacted_ids = {DAMAGE[damage]}")
    conn.close()
    with SQLiteStore(db) as store:
        made = create_summary_envelope(plan, store.load(CID), "s1", PV, "summary text")
        assert made is not None
        write = store.commit_summary(made)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "invalid-summary",
            "plan-mismatch",
        )
        assert store.context(CID, PV).fallback == "no-summary"
        assert [r.status for r in store.summary_history(CID)] == ["rejected"]
        outcome = Compactor(store, POLICY).compact(CID, force=True)
        assert outcome.accepted
        assert store.context(CID, PV).fallback is None


def test_a_sound_plan_is_committed(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        for n in range(8):
            store.append(CID, "user" if n % 2 == 0 else "assistant", f"turn {n}")
        plan = store.start_plan(CID, 2, PV)
        made = create_summary_envelope(plan, store.load(CID), "s1", PV, "summary text")
        assert made is not None
        assert store.commit_summary(made).accepted
