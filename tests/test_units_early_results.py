"""A result stored before its call (SPEC §17.2: it answers the first call of its ID after
it): an app writing out of order through `append`, or an import. When that call arrives, the
store looks back at the results of its IDs stored before it, as it looks at a late result's
call: a summary covering such a result but not the call splits their unit and goes stale
(`group-split`) in the call's transaction, so the store never keeps current, extends or
serves a summary the core calls stale; and a result answering a `recall_history` call that
arrives later leaves the search index (SPEC §16.5, §17.7). Real file databases."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold import SQLiteStore
from ledgerfold.tools import run_recall
from tool_call_meta import answer, calls, policy

C = "c"


def summarised_early_result(store: SQLiteStore, call_id: str = "x") -> lf.SummaryEnvelope:
    """A result of `call_id` with no call before it, then chat; compacted so the current
    summary covers the result."""
    store.append(C, "user", "q", id="u0")
    store.append(C, "tool", "out", id="r", meta=answer(call_id))
    for n in range(4):
        store.append(C, "user", f"more {n}", id=f"m{n}")
    summary = lf.Compactor(store, policy()).compact(C, force=True).summary
    assert summary is not None and "r" in summary.source_ids
    assert lf.check_summary(summary, store.load(C), "v1").current
    return summary


def status_of(store: SQLiteStore, summary_id: str) -> tuple[str, str | None]:
    record = next(r for r in store.summary_history(C) if r.envelope and r.envelope.id == summary_id)
    return record.status, record.reason


def assert_never_served_stale(store: SQLiteStore) -> None:
    """The store's current summary, if any, is current by the core's check, and the
    context serves only that one."""
    envelope = store.current_summary(C)
    context = store.context(C, "v1")
    if envelope is not None:
        check = lf.check_summary(envelope, store.load(C), "v1")
        assert check.current, (check.reason, check.turn_id)
    if context.summary is not None:
        assert envelope is not None and context.summary.id == envelope.id


# ---------------------------------------------------------------- the split


@pytest.mark.parametrize("how", ["append", "append_many", "append_chat_messages"])
def test_a_call_after_its_summarised_result_makes_the_summary_stale(
    tmp_path: Path, how: str
) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        summary = summarised_early_result(store)
        if how == "append":
            store.append(C, "assistant", "", id="a", meta=calls("x"))
        elif how == "append_many":
            store.append_many(
                C,
                [
                    {"role": "user", "body": "next", "id": "u1"},
                    {"role": "assistant", "body": "", "id": "a", "meta": calls("x")},
                ],
            )
        else:
            store.append_chat_messages(
                C,
                [
                    {"role": "user", "content": "next", "id": "u1"},
                    {
                        "role": "assistant",
                        "content": "",
                        "id": "a",
                        "tool_calls": json.loads(calls("x")["tool_calls"]),
                    },
                ],
            )
        # The core pairs the stored result with the call after it: the summary splits them.
        core = lf.check_summary(summary, store.load(C), "v1")
        assert (core.current, core.reason) == (False, "group-split")
        # The store says so in the call's transaction, as for a late result.
        assert status_of(store, summary.id) == ("stale", "group-split")
        assert store.current_summary(C) is None
        context = store.context(C, "v1")
        assert context.summary is None
        assert context.fallback == "stale-summary:group-split"
        assert_never_served_stale(store)


def test_the_next_compaction_covers_the_result_and_its_call_together(tmp_path: Path) -> None:
    # Before, the store kept extending the split summary: the context stayed raw for good.
    with SQLiteStore(tmp_path / "ledger.db") as store:
        summarised_early_result(store)
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        for n in range(6):
            store.append(C, "user", f"later {n}", id=f"l{n}")
        assert lf.Compactor(store, policy()).compact(C, force=True).status == "accepted"
        summary = store.current_summary(C)
        assert summary is not None
        assert {"r", "a"} <= set(summary.source_ids)
        assert_never_served_stale(store)
        assert store.context(C, "v1").summary is not None


def test_a_call_made_again_after_the_pair_leaves_the_summary_current(tmp_path: Path) -> None:
    # x answered out of order, then x made again (a model numbering its calls per
    # response): the new call pairs with no stored result, so nothing splits.
    with SQLiteStore(tmp_path / "ledger.db") as store:
        store.append(C, "user", "q", id="u0")
        store.append(C, "tool", "out", id="r", meta=answer("x"))
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        for n in range(4):
            store.append(C, "user", f"more {n}", id=f"m{n}")
        summary = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert summary is not None and {"r", "a"} <= set(summary.source_ids)
        store.append(C, "assistant", "", id="a2", meta=calls("x"))
        store.append(C, "tool", "out again", id="r2", meta=answer("x"))
        assert status_of(store, summary.id) == ("current", None)
        assert store.context(C, "v1").summary is not None
        assert_never_served_stale(store)


def test_a_call_of_a_result_the_summary_does_not_cover_changes_nothing(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        store.append(C, "user", "q", id="u0")
        for n in range(4):
            store.append(C, "user", f"more {n}", id=f"m{n}")
        summary = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert summary is not None
        store.append(C, "tool", "out", id="r", meta=answer("x"))  # raw, in the tail
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        assert status_of(store, summary.id) == ("current", None)
        assert store.context(C, "v1").summary is not None
        assert_never_served_stale(store)


def test_a_retracted_early_result_is_not_paired(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        summary = summarised_early_result(store)
        store.retract(C, "r")  # the summary goes stale for the retraction itself
        assert status_of(store, summary.id) == ("stale", "source-missing")
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        assert status_of(store, summary.id) == ("stale", "source-missing")


def test_checkpoints_citing_the_result_go_stale_too(tmp_path: Path) -> None:
    # Every accepted version citing the result but not its call splits the unit (as for a
    # late result): the next compaction does not extend one of them.
    with SQLiteStore(tmp_path / "ledger.db") as store:
        first = summarised_early_result(store)
        for n in range(3):
            store.append(C, "user", f"again {n}", id=f"g{n}")
        second = lf.Compactor(store, policy()).compact(C, force=True).summary
        assert second is not None and second.parent_id == first.id
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        assert status_of(store, first.id) == ("stale", "group-split")
        assert status_of(store, second.id) == ("stale", "group-split")
        for n in range(4):
            store.append(C, "user", f"later {n}", id=f"l{n}")
        assert lf.Compactor(store, policy()).compact(C, force=True).status == "accepted"
        assert_never_served_stale(store)


# ---------------------------------------------------------------- recall results


def _recall_result(store: SQLiteStore, word: str) -> str:
    store.append(C, "user", f"the vault word is {word}", id="orig")
    for n in range(3):
        store.append(C, "user", f"filler {n}", id=f"f{n}")
    result = run_recall(store, C, {"query": word})
    assert word in result
    return result


def _hits(store: SQLiteStore, word: str) -> list[str]:
    return [hit.turn_id for hit in store.search(C, word, scope="all")]


@pytest.mark.parametrize("how", ["append", "append_many", "append_chat_messages"])
def test_a_result_stored_before_its_recall_call_leaves_the_index(tmp_path: Path, how: str) -> None:
    word = "qjxpelicanvault"
    with SQLiteStore(tmp_path / "ledger.db") as store:
        result = _recall_result(store, word)
        store.append(C, "tool", result, id="r", meta=answer("call-r"))
        # No call of its ID yet: a tool result like any other, searchable.
        assert sorted(_hits(store, word)) == ["orig", "r"]
        call = calls("call-r", name="recall_history")
        if how == "append":
            store.append(C, "assistant", "", id="a", meta=call)
        elif how == "append_many":
            store.append_many(
                C,
                [
                    {"role": "user", "body": "next", "id": "u1"},
                    {"role": "assistant", "body": "", "id": "a", "meta": call},
                ],
            )
        else:
            store.append_chat_messages(
                C,
                [
                    {
                        "role": "assistant",
                        "content": "",
                        "id": "a",
                        "tool_calls": json.loads(call["tool_calls"]),
                    }
                ],
            )
        # SPEC §16.5: a tool turn answering a recall_history call is never indexed.
        assert _hits(store, word) == ["orig"]
        # And an erasure of the original still blanks it (it is a recall result).
        store.retract(C, "orig", erase=True)
        assert _hits(store, word) == []
        assert word not in store.get_turns(C, ["r"])[0].body


def test_a_result_stored_before_a_recall_call_of_its_group_leaves_the_index(
    tmp_path: Path,
) -> None:
    word = "qjxheronvault"
    with SQLiteStore(tmp_path / "ledger.db") as store:
        result = _recall_result(store, word)
        store.append(C, "tool", result, id="r", group="g")  # known by its group only
        assert sorted(_hits(store, word)) == ["orig", "r"]
        call: dict[str, Any] = {"tool_calls": json.dumps([{"id": "k", "name": "recall_history"}])}
        store.append(C, "assistant", "", id="a", group="g", meta=call)
        assert _hits(store, word) == ["orig"]


def test_a_result_stored_before_another_tools_call_stays_searchable(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        store.append(C, "tool", "booking ibisfact", id="r", meta=answer("call_0"))
        store.append(C, "assistant", "", id="a", meta=calls("call_0", name="lookup"))
        assert _hits(store, "ibisfact") == ["r"]


def test_a_recall_call_made_again_leaves_a_lookup_result_searchable(tmp_path: Path) -> None:
    # r answered the lookup a (stored out of order); a recall call of the same ID later is
    # not r's call.
    with SQLiteStore(tmp_path / "ledger.db") as store:
        store.append(C, "tool", "booking ibisfact", id="r", meta=answer("call_0"))
        store.append(C, "assistant", "", id="a", meta=calls("call_0", name="lookup"))
        store.append(C, "assistant", "", id="b", meta=calls("call_0", name="recall_history"))
        assert _hits(store, "ibisfact") == ["r"]


def test_a_recall_call_in_a_group_commit_batch_unindexes_its_early_result(
    tmp_path: Path,
) -> None:
    # Inside a batch the appends' index rows wait to be written at its end: the result
    # leaves them (or the index) whichever job stored it.
    word = "qjxegretvault"
    with SQLiteStore(tmp_path / "ledger.db") as store:
        result = _recall_result(store, word)
        store.append(C, "tool", result, id="r0", meta=answer("call-0"))
        with store._worker_batch():
            store.append(C, "user", "pending row", id="p")
            store.append(C, "tool", result, id="r1", meta=answer("call-1"))
            store.append(
                C, "assistant", "", id="a", meta=calls("call-0", "call-1", name="recall_history")
            )
        assert _hits(store, word) == ["orig"]
        assert _hits(store, "pending") == ["p"]


# ---------------------------------------------------------------- older files


def test_a_file_without_the_answers_index_gets_it_at_a_writing_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        summary = summarised_early_result(store)
    with sqlite3.connect(path) as conn:  # as a file written before the index was added
        conn.execute("DROP INDEX turns_by_answer")
    with SQLiteStore(path, read_only=True) as store:  # a read-only open needs no index
        assert store.context(C, "v1").summary is not None
    with sqlite3.connect(path) as conn:
        assert not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'turns_by_answer'"
        ).fetchone()
    with SQLiteStore(path) as store:
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        assert status_of(store, summary.id) == ("stale", "group-split")
    with sqlite3.connect(path) as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT sequence FROM turns WHERE conversation_id = ?"
                " AND role = 'tool' AND json_valid(meta)"
                " AND json_extract(meta, '$.tool_call_id') = ? ORDER BY sequence LIMIT 1",
                (C, "x"),
            )
        )
        assert "turns_by_answer" in plan
