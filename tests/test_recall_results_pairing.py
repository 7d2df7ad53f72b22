"""Paths other than an append that make a stored result answer a recall_history call
(SPEC §16.5, §17.2, §17.7): a purge that takes its call, an edit of its group's call; the
result leaves the search index. And a summary splitting an early result from its call in a
file written before the store marked that: the next compaction rebases."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore
from tool_call_meta import calls

C = "c"


def hits(store: SQLiteStore) -> set[str]:
    return {h.turn_id for h in store.search(C, "pelican", scope="all", limit=100)}


def reused_id_ledger(store: SQLiteStore) -> None:
    """call_0 made by a plain tool call, answered, then made again by recall_history."""
    store.append(C, "system", "sys", id="s")
    store.append(C, "user", "hi", id="u0")
    store.append(C, "assistant", "", id="a1", meta=calls("call_0"))
    store.append(C, "tool", "pelican", id="r2", meta={"tool_call_id": "call_0"})
    store.append(C, "assistant", "", id="a3", meta=calls("call_0", name="recall_history"))
    assert hits(store) == {"r2"}


def test_a_forced_purge_of_a_call_leaves_its_result_answering_a_later_recall_call(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "l.db") as store:
        reused_id_ledger(store)
        store.purge_through(C, 3, "r", force=True)
        assert [t.id for t in store.load(C).turns] == ["r2", "a3"]
        # §17.2 over the live turns: r2 has no call of its ID before it, so it answers a3.
        assert lf._recall_stand_in.recall_result_ids(store.load(C).turns) == {"r2"}
        assert hits(store) == set()
    with SQLiteStore(tmp_path / "l.db") as store:
        assert hits(store) == set()


def test_a_purge_under_the_summary_stops_before_the_call_and_its_result(
    tmp_path: Path,
) -> None:
    """Without `force` a purge splits no unit, even one the sealed summary covers whole
    (SPEC §17.2, §17.7): r2 keeps answering a1 and stays indexed."""
    with SQLiteStore(tmp_path / "l.db") as store:
        reused_id_ledger(store)
        lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=1, min_new_turns=1)).compact(
            C, force=True
        )
        assert store.purge_through(C, 3, "r").through_sequence == 2
        assert [t.id for t in store.load(C).turns] == ["s", "a1", "r2", "a3"]
        assert lf._recall_stand_in.recall_result_ids(store.load(C).turns) == set()
        assert hits(store) == {"r2"}


def test_an_edit_that_makes_a_grouped_call_recall_history_unindexes_its_group_results(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "l.db") as store:
        store.append(C, "assistant", "", id="a0", group="g", meta=calls("x"))
        store.append(C, "tool", "pelican", id="r1", group="g")
        assert hits(store) == {"r1"}
        store.edit(C, "a0", meta=calls("x", name="recall_history"))
        assert lf._recall_stand_in.recall_result_ids(store.load(C).turns) == {"r1"}
        assert hits(store) == set()


def test_a_split_early_result_summary_in_an_older_database_does_not_stay_split(
    tmp_path: Path,
) -> None:
    """A database written before 5f3d923: the call of a summarised early result arrived and
    nothing marked the summary (SPEC §17.2: stale also in a database written before). The
    next compaction must not extend it into another summary splitting the pair (the context
    then stays raw until a revalidation)."""
    import sqlite3

    db = tmp_path / "old.db"
    with SQLiteStore(db) as store:
        store.append(C, "user", "q", id="u0")
        store.append(C, "tool", "out", id="r", meta={"tool_call_id": "x"})
        for n in range(4):
            store.append(C, "user", f"more {n}", id=f"m{n}")
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert lf.Compactor(store, policy).compact(C, force=True).summary is not None
        store.append(C, "assistant", "", id="a", meta=calls("x"))
    with sqlite3.connect(db) as conn:  # as the version before 5f3d923 left it
        conn.execute(
            "UPDATE summaries SET status = 'current', reason = NULL WHERE status = 'stale'"
        )
    with SQLiteStore(db) as store:
        for n in range(3):
            store.append(C, "user", f"later {n}", id=f"l{n}")
        outcome = lf.Compactor(store, policy).compact(C, force=True)
        assert outcome.status == "accepted"
        current = store.current_summary(C)
        assert current is not None and current.parent_id is None  # a rebase
        check = lf.check_summary(current, store.load(C), "v1")
        assert check.current, (check.reason, check.turn_id)
        assert store.context(C, "v1").fallback is None
