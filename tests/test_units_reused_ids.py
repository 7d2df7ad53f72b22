"""A call ID used again (SPEC §17.2): models that number their calls `call_0`, `call_1`, … in
every response. A result answers the nearest call of its ID before it, as a chat request
pairs them, so each exchange is its own compaction unit: old exchanges compact, a pending
call made again stays raw, and no path (planning, commit, append, context, retraction,
revalidation) joins an exchange to an earlier one of the same ID."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
import reference as ref
from ledgerfold import SQLiteStore
from ledgerfold._summary import extended_fingerprint
from ledgerfold._toolcalls import open_call_turns, unit_roots
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store._unit_splits import split_by_links
from tool_call_meta import answer, calls, policy

C = "c"


def first_exchange(store: SQLiteStore) -> lf.SummaryEnvelope:
    """`call_0` made and answered, then chat; summarised (the exchange among the sources)."""
    store.append(C, "user", "look it up", id="u1")
    store.append(C, "assistant", "", id="a1", meta=calls("call_0"))
    store.append(C, "tool", "found", id="r1", meta=answer("call_0"))
    for n in range(4):
        store.append(C, "user", f"more {n}", id=f"m{n}")
    summary = lf.Compactor(store, policy()).compact(C).summary
    assert summary is not None and {"a1", "r1"} <= set(summary.source_ids)
    return summary


def test_each_result_joins_the_nearest_call_of_its_id_before_it() -> None:
    turns = [
        lf.Turn("a1", 1, "assistant", "", meta=calls("call_0")),
        lf.Turn("r1", 2, "tool", "one", meta=answer("call_0")),
        lf.Turn("a2", 3, "assistant", "", meta=calls("call_0")),
        lf.Turn("r2", 4, "tool", "two", meta=answer("call_0")),
        lf.Turn("a3", 5, "assistant", "", meta=calls("call_0")),  # pending
    ]
    assert unit_roots(turns) == [0, 0, 2, 2, 4]
    assert open_call_turns(turns) == {"a3"}


def test_planning_compacts_old_exchanges_and_keeps_a_pending_call_made_again_raw() -> None:
    # The confirmation asked for with `call_0` again is pending while chat goes on: it must
    # not be summarised away because an earlier `call_0` was answered.
    turns = [
        lf.Turn("a1", 1, "assistant", "", meta=calls("call_0")),
        lf.Turn("r1", 2, "tool", "one", meta=answer("call_0")),
        lf.Turn("a2", 3, "assistant", "Confirm the transfer?", meta=calls("call_0")),
        *(lf.Turn(f"m{n}", 4 + n, "user", f"chat {n}") for n in range(5)),
    ]
    plan = lf.plan_compaction(lf.Conversation(C, 1, tuple(turns)), 2, "p")
    assert "a2" in plan.preserved_ids
    assert {"a1", "r1"} <= set(plan.compacted_ids)


def test_a_new_exchange_of_the_same_id_leaves_the_summary_current() -> None:
    with SQLiteStore() as store:
        summary = first_exchange(store)
        store.append(C, "assistant", "", id="a2", meta=calls("call_0"))
        store.append(C, "tool", "found again", id="r2", meta=answer("call_0"))
        context = store.context(C, "v1")
        assert context.fallback is None and context.summary is not None
        assert context.summary.id == summary.id
        check = lf.check_summary(summary, store.load(C), "v1")
        assert (check.current, check.reason) == (True, None)


def test_a_pending_call_made_again_does_not_make_the_context_fall_back() -> None:
    with SQLiteStore() as store:
        first_exchange(store)
        store.append(C, "assistant", "Confirm?", id="a2", meta=calls("call_0"))
        context = store.context(C, "v1")
        assert context.fallback is None
        assert "a2" in context.ids


def test_an_older_database_with_ids_made_again_is_current_for_context_and_revalidation(
    tmp_path: Path,
) -> None:
    # The context's own check (for databases written before appends marked splits) pairs
    # calls as the core does: neither a new exchange nor a pending call splits the summary.
    db = tmp_path / "old.db"
    with SQLiteStore(db) as store:
        first_exchange(store)
        store.append(C, "assistant", "", id="a2", meta=calls("call_0"))
        store.append(C, "tool", "two", id="r2", meta=answer("call_0"))
        store.append(C, "assistant", "Confirm?", id="a3", meta=calls("call_0"))
    with SQLiteStore(db) as store:
        assert store.context(C, "v1").fallback is None
    report = revalidate_database(db, workers=1)
    assert list(report.stale_summaries) == []


def test_a_result_of_a_summarised_call_is_still_a_split_in_an_older_database(
    tmp_path: Path,
) -> None:
    # A second result of `call_0` with no new call before it answers the summarised call.
    db = tmp_path / "old.db"
    with SQLiteStore(db) as store:
        first_exchange(store)
        store.append(C, "tool", "found again", id="r2", meta=answer("call_0"))
        assert store.summary_history(C)[-1].reason == "group-split"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE summaries SET status = 'current', reason = NULL WHERE status = 'stale'"
        )
    with SQLiteStore(db) as store:
        context = store.context(C, "v1")
        assert (context.fallback, context.fallback_id) == ("stale-summary:group-split", "r2")
    report = revalidate_database(db, workers=1)
    assert [(s.reason, s.turn_id) for s in report.stale_summaries] == [("group-split", "r2")]


def test_compaction_covers_an_exchange_while_the_same_id_is_in_the_tail() -> None:
    with SQLiteStore() as store:
        store.append(C, "user", "look it up", id="u1")
        store.append(C, "assistant", "", id="a1", meta=calls("call_0"))
        store.append(C, "tool", "found", id="r1", meta=answer("call_0"))
        store.append(C, "user", "and again", id="u2")
        store.append(C, "assistant", "", id="a2", meta=calls("call_0"))
        store.append(C, "tool", "found again", id="r2", meta=answer("call_0"))
        result = lf.Compactor(store, policy(keep_tail=2)).compact(C)
        assert result.summary is not None, result
        assert set(result.summary.source_ids) == {"u1", "a1", "r1", "u2"}
        # A later compaction extends it over the second exchange.
        for n in range(3):
            store.append(C, "user", f"more {n}", id=f"m{n}")
        result = lf.Compactor(store, policy(keep_tail=2)).compact(C)
        assert result.summary is not None, result
        assert {"a2", "r2"} <= set(result.summary.source_ids)
        assert store.context(C, "v1").fallback is None


def test_an_extension_that_separates_a_call_made_again_from_its_result_is_refused() -> None:
    # The commit's own check (`calls_split`) pairs the covered call with the result after
    # it, not with the summarised exchange of the same ID.
    with SQLiteStore() as store:
        first_exchange(store)
        store.append(C, "assistant", "", id="a2", meta=calls("call_0"))
        store.append(C, "tool", "two", id="r2", meta=answer("call_0"))
        for n in range(2):
            store.append(C, "user", f"tail {n}", id=f"t{n}")
        work = store.begin_compaction(C, 2, "v1")
        assert work.plan is not None and work.parent is not None
        assert work.plan.compacted_ids[-2:] == ("a2", "r2")
        for sources, accepted in ((work.plan.compacted_ids[:-1], False), (None, True)):
            new = [t for t in work.new_turns if sources is None or t.id in sources]
            envelope = lf.SummaryEnvelope(
                id=f"s-{accepted}",
                plan_id=work.plan.plan_id,
                conversation_id=C,
                source_revision=work.plan.source_revision,
                source_ids=work.plan.compacted_ids if sources is None else sources,
                source_fingerprint=extended_fingerprint(work.parent_digests, new),
                policy_version="v1",
                text="summary",
                parent_id=work.parent.id,
            )
            write = store.commit_summary(envelope)
            assert (write.accepted, write.detail) == (
                (True, None) if accepted else (False, "group-split")
            )
            if not accepted:
                work = store.begin_compaction(C, 2, "v1")
                assert work.plan is not None and work.parent is not None


def test_retracting_a_call_takes_only_its_own_results() -> None:
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a1", meta=calls("call_0"))
        store.append(C, "tool", "one", id="r1", meta=answer("call_0"))
        store.append(C, "assistant", "", id="a2", meta=calls("call_0"))
        store.append(C, "tool", "two", id="r2", meta=answer("call_0"))
        store.retract(C, "a1")
        assert [t.id for t in store.load(C).turns] == ["a2", "r2"]
        store.retract(C, "a2")
        assert store.load(C).turns == ()


def test_a_raw_result_before_a_call_made_again_is_paired_with_the_summarised_call(
    tmp_path: Path,
) -> None:
    # The context's check over raw turns (`split_by_links`, for databases written before
    # units): a raw result with no call of its ID before it among the raw turns is not the
    # later raw call's; the summarised call before it is its own, so the summary splits.
    db = tmp_path / "old.db"
    with SQLiteStore(db) as store:
        first_exchange(store)  # sources: u1, a1 (seq 2), r1 (seq 3), ...
    with sqlite3.connect(db) as conn:
        (pk,) = conn.execute("SELECT pk FROM summaries WHERE status = 'current'").fetchone()
        raw = [
            ("r9", 4, "tool", answer("call_0")),
            ("a9", 20, "assistant", calls("call_0")),
        ]
        assert split_by_links(conn, C, pk, raw) == "r9"
        # After the later call, the same result is that call's: no split.
        later = [raw[1], ("r9", 21, "tool", answer("call_0"))]
        assert split_by_links(conn, C, pk, later) is None


def test_editing_a_call_away_repairs_its_result_with_the_summarised_call() -> None:
    # The edit takes `call_0` from b: its result rb now answers s1, which the summary
    # covers without rb, so the summary splits a unit and goes stale (review finding).
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a0", meta=calls("call_0"))  # open: stays raw
        store.append(C, "assistant", "", id="s1", meta=calls("call_0"))
        store.append(C, "tool", "r", id="rs1", meta=answer("call_0"))
        for n in range(4):
            store.append(C, "user", f"u{n}", id=f"u{n}")
        summary = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert summary is not None and {"s1", "rs1"} <= set(summary.source_ids)
        store.append(C, "assistant", "", id="b", meta=calls("call_0"))
        store.append(C, "tool", "r", id="rb", meta=answer("call_0"))
        store.append(C, "user", "x", id="ux")
        assert store.context(C, "v1").fallback is None
        store.edit(C, "b", meta=calls("call_9"))
        check = lf.check_summary(summary, store.load(C), "v1")
        assert (check.current, check.reason, check.turn_id) == (False, "group-split", "rb")
        assert store.context(C, "v1").fallback == "stale-summary:group-split"
        assert store.summary_history(C)[-1].reason == "group-split"


def test_editing_a_recall_call_into_a_lookup_indexes_its_result() -> None:
    recall = {"tool_calls": json.dumps([{"id": "call_0", "function": {"name": "recall_history"}}])}
    lookup = {"tool_calls": json.dumps([{"id": "call_0", "function": {"name": "lookup"}}])}
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a", meta=recall)
        store.append(C, "tool", "booking pelican", id="r", meta=answer("call_0"))
        assert store.search(C, "pelican", scope="all") == []
        store.edit(C, "a", meta=lookup)
        assert [hit.turn_id for hit in store.search(C, "pelican", scope="all")] == ["r"]
        store.edit(C, "a", meta=recall)
        assert store.search(C, "pelican", scope="all") == []


def test_a_call_id_spelled_with_json_escapes_is_still_found() -> None:
    # The stored `tool_calls` text may escape the ID's characters (`\u0063` is `c`): the
    # reads that pass over rows not holding the ID's text must not pass over these.
    escaped = {"tool_calls": '[{"id": "\\u0063all_0", "type": "function"}]'}
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a1", meta=escaped)
        store.append(C, "tool", "one", id="r1", meta=answer("call_0"))
        store.append(C, "assistant", "", id="a2", meta=escaped)
        store.append(C, "tool", "two", id="r2", meta=answer("call_0"))
        store.retract(C, "a2")
        assert [t.id for t in store.load(C).turns] == ["a1", "r1"]


def test_a_turn_edited_into_a_call_takes_its_result_out_of_recall() -> None:
    # r answered the recall call a; b, edited into a lookup of the same ID between them, is
    # now r's call: r is a fact again and is indexed.
    recall = {"tool_calls": json.dumps([{"id": "call_0", "function": {"name": "recall_history"}}])}
    lookup = {"tool_calls": json.dumps([{"id": "call_0", "function": {"name": "lookup"}}])}
    with SQLiteStore() as store:
        store.append(C, "assistant", "", id="a", meta=recall)
        store.append(C, "assistant", "thinking", id="b")
        store.append(C, "tool", "booking pelican", id="r", meta=answer("call_0"))
        assert store.search(C, "pelican", scope="all") == []
        store.edit(C, "b", meta=lookup)
        assert [hit.turn_id for hit in store.search(C, "pelican", scope="all")] == ["r"]


# ------------------------------------- property: retraction takes exactly the paired results

PAIRING_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.just("")),
        st.tuples(st.just("call"), st.sampled_from(["call_0", "call_1", "x"])),
        st.tuples(st.just("result"), st.sampled_from(["call_0", "call_1", "x"])),
        st.tuples(st.just("retract"), st.integers(0, 40)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PAIRING_OPS, st.integers(0, 40))
def test_retracting_a_call_takes_the_results_the_reference_pairs_with_it(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]], pick: int
) -> None:
    """Results stored before their call, IDs made again, calls retracted between: the store
    retracts with a call exactly the live results §17.2's rule, written out by brute force in
    `tests/reference.py`, pairs with it among the live turns."""
    path = tmp_path_factory.mktemp("pairing") / "ledger.db"
    with SQLiteStore(path) as store:
        for n, (kind, value) in enumerate(ops):
            if kind == "user":
                store.append(C, "user", "hi", id=f"u{n}")
            elif kind == "call":
                store.append(C, "assistant", "", id=f"a{n}", meta=calls(value))
            elif kind == "result":
                store.append(C, "tool", "out", id=f"r{n}", meta=answer(value))
            else:
                now = store.load(C).turns
                if now:
                    store.retract(C, now[value % len(now)].id)
        live = list(store.load(C).turns)
        made = [i for i, t in enumerate(live) if t.role == "assistant"]
        if not made:
            return
        at = made[pick % len(made)]
        paired = {
            t.id for i, t in enumerate(live) if t.role == "tool" and ref._maker_of(live, i) == at
        }
        store.retract(C, live[at].id)
        gone = {t.id for t in live} - {t.id for t in store.load(C).turns}
        assert gone == {live[at].id} | paired
