"""What one compaction costs the store: whole-conversation loads are counted, not timed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, create_summary_envelope
from ledgerfold._model import Conversation
from ledgerfold.store import _ledger as ledger

TURNS = 10_000


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every whole-conversation load the store makes, by conversation ID."""
    seen: list[str] = []
    real_load = ledger.load

    def counting_load(conn: object, conversation_id: str) -> Conversation:
        seen.append(conversation_id)
        return real_load(conn, conversation_id)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger, "load", counting_load)
    return seen


def _ledger(path: Path) -> SQLiteStore:
    store = SQLiteStore(path)
    store.append_many(
        "c",
        [
            {"role": "user" if i % 2 == 0 else "assistant", "body": f"turn {i} " + "x" * 40}
            for i in range(TURNS)
        ],
    )
    return store


@pytest.mark.parametrize("trigger_tokens", [None, 1_000])
def test_one_compaction_of_a_10k_turn_conversation_loads_it_at_most_twice(
    tmp_path: Path, loads: list[str], trigger_tokens: int | None
) -> None:
    with _ledger(tmp_path / "ledger.db") as store:
        compactor = Compactor(store, CompactionPolicy("v1", trigger_tokens=trigger_tokens))
        loads.clear()
        assert compactor.compact("c").status == "accepted"
        first = len(loads)
        store.append_many(
            "c",
            [{"role": "user", "body": f"new {i}"} for i in range(20)],
        )
        loads.clear()
        assert compactor.compact("c").status == "accepted"
        second = len(loads)
    assert first <= 2, first
    assert second <= 2, second


def test_a_call_below_the_trigger_plans_only_when_something_is_due_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below `trigger_tokens` only a rebase (coverage would shrink) or the rest of a folded
    backlog is due (SPEC §15.8): the store answers that from the current summary alone and
    plans nothing otherwise, so the common not-due call stays cheap."""
    from ledgerfold.store import _compaction as compaction

    planned: list[str] = []
    real_plan_view = compaction.plan_view

    def counting_plan_view(*args: object, **kwargs: object) -> object:
        planned.append("plan")
        return real_plan_view(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compaction, "plan_view", counting_plan_view)
    with _ledger(tmp_path / "ledger.db") as store:
        narrow = CompactionPolicy("v1", keep_tail=2, max_input_tokens=10**9)
        assert Compactor(store, narrow).compact("c").status == "accepted"
        wide = CompactionPolicy("v1", keep_tail=2, trigger_tokens=10**9)
        planned.clear()
        for _ in range(3):
            assert Compactor(store, wide).compact("c").reason == "not-due"
        assert planned == []
        grown = CompactionPolicy("v1", keep_tail=8, trigger_tokens=10**9)
        assert Compactor(store, grown).compact("c").status == "accepted"  # a rebase, at once
        assert planned == ["plan"]


@pytest.mark.parametrize("ending", ["accepted", "abandoned"])
def test_an_ended_plan_keeps_no_copy_of_its_ids(tmp_path: Path, ending: str) -> None:
    """A plan's added IDs serve its commit only; once it has a record they are dropped, so
    a context read of the plan's row (its `preserve_roles`) does not grow with the ledger."""
    path = tmp_path / "ledger.db"
    with _ledger(path) as store:
        plan = store.start_plan("c", 4, "v1")
        assert len(plan.compacted_ids) > 9_000
        if ending == "accepted":
            envelope = create_summary_envelope(plan, store.load("c"), "s1", "v1", "summary")
            assert envelope is not None and store.commit_summary(envelope).accepted
        else:
            store.start_plan("c", 2, "v1")  # abandons the first
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, ended, compacted_ids FROM plans ORDER BY pk").fetchall()
    finally:
        conn.close()
    assert rows[0][:2] == (plan.plan_id, 1)
    assert all(compacted is None for _, ended, compacted in rows if ended)
    if ending == "abandoned":
        assert rows[-1][1] == 0 and rows[-1][2] is not None  # the active plan keeps its IDs
