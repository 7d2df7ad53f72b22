"""`SQLiteStore.context` serves a context again only while nothing it depends on changed
(`store/_context_cache.py`): an append to another conversation keeps it, any change to its
own conversation, a write through the raw connection, another connection's commit or any
other write method is seen at once. The oracle: the same read without the cache."""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cache_support import OPS, Writes, compacted, ops, turns
from ledgerfold import CompactionPolicy, Compactor, DuplicateId, SQLiteStore
from ledgerfold.store import _context_read as context_read

POLICY = CompactionPolicy("cache-v1", min_new_turns=1, keep_tail=2)


_turns = turns


def _uncached(store: SQLiteStore, conversation_id: str) -> object:
    return context_read.assemble(store._transaction, store._cache, conversation_id, POLICY.version)


def _compacted(path: Path) -> tuple[SQLiteStore, Compactor]:
    return compacted(path, POLICY)


def test_a_context_read_twice_is_served_again(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        first = store.context("a", POLICY.version)
        assert first.fallback is None
        assert store.context("a", POLICY.version) is first


def test_an_append_elsewhere_keeps_it_an_append_here_does_not(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        a = store.context("a", POLICY.version)
        store.append_many("b", _turns("b-more", 2))
        assert store.context("a", POLICY.version) is a
        (turn,) = store.append_many("a", _turns("a-more", 1))
        again = store.context("a", POLICY.version)
        assert again.items[-1].id == turn.id
        assert again == _uncached(store, "a")


def test_a_compaction_elsewhere_keeps_it_one_here_does_not(tmp_path: Path) -> None:
    """A summary committed (and old versions pruned) for one conversation changes no row of
    another: twenty sessions sharing a store do not read every context again whenever one
    of them compacts."""
    store, compactor = _compacted(tmp_path / "s.db")
    with store:
        a = store.context("a", POLICY.version)
        b = store.context("b", POLICY.version)
        store.append_many("b", _turns("b-more", 4))
        assert compactor.compact("b", force=True).status == "accepted"
        assert store.prune_versions("b", keep=0, keep_checkpoints=0) > 0
        assert store.context("a", POLICY.version) is a
        again = store.context("b", POLICY.version)
        assert again != b and again == _uncached(store, "b")


def test_an_edit_of_a_covered_turn_is_seen_at_once(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        assert store.context("a", POLICY.version).fallback is None
        covered = store.load("a").turns[0]
        store.edit("a", covered.id, body="corrected")
        assert store.context("a", POLICY.version).fallback == "stale-summary:source-modified"


def test_a_write_through_the_raw_connection_is_seen(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        assert store.context("a", POLICY.version).fallback is None
        store._connection().execute(
            "UPDATE summaries SET status = 'stale', reason = 'source-modified'"
            " WHERE conversation_id = 'a' AND status = 'current'"
        )
        assert store.context("a", POLICY.version).fallback == "stale-summary:source-modified"


def test_another_connections_commit_is_seen(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        assert store.context("b", POLICY.version).fallback is None
        other = sqlite3.connect(tmp_path / "s.db")
        try:
            with other:
                other.execute(
                    "UPDATE summaries SET status = 'stale', reason = 'source-modified'"
                    " WHERE conversation_id = 'b' AND status = 'current'"
                )
        finally:
            other.close()
        assert store.context("b", POLICY.version).fallback == "stale-summary:source-modified"


def test_another_store_objects_append_is_seen(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store, SQLiteStore(tmp_path / "s.db") as second:
        before = store.context("a", POLICY.version)
        (turn,) = second.append_many("a", _turns("from-the-other", 1))
        after = store.context("a", POLICY.version)
        assert after is not before and after.items[-1].id == turn.id


def test_an_append_extends_the_context_it_read(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        before = store.context("a", POLICY.version)
        turns = store.append_many("a", _turns("a-more", 2))
        after = store.context("a", POLICY.version)
        assert after.items[: len(before.items)] == before.items
        assert [item.id for item in after.items[len(before.items) :]] == [t.id for t in turns]
        assert after == _uncached(store, "a")


def test_a_result_joining_a_summarised_call_is_not_appended_to_the_summary(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    with store:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        store.append_chat_messages(
            "a",
            [{"role": "user", "content": f"u{n}"} for n in range(4)]
            + [{"role": "assistant", "content": None, "tool_calls": [call]}]
            + [{"role": "tool", "tool_call_id": "c1", "content": "one"}]
            + [{"role": "user", "content": f"v{n}"} for n in range(4)],
        )
        assert Compactor(store, POLICY).compact("a", force=True).status == "accepted"
        assert store.context("a", POLICY.version).fallback is None
        store.append_chat_messages("a", [{"role": "tool", "tool_call_id": "c1", "content": "2"}])
        assert store.context("a", POLICY.version).fallback == "stale-summary:group-split"
        assert store.context("a", POLICY.version) == _uncached(store, "a")


def _call(call_id: str) -> dict[str, object]:
    call = {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_a_result_whose_caller_is_beyond_the_append_scan_is_read_again(tmp_path: Path) -> None:
    # A result whose summarised caller lies 2,000 assistant turns back (the append once
    # looked no further, leaving the split to the context's own check): the summary goes
    # stale, and the cached context is not extended past it.
    store = SQLiteStore(tmp_path / "s.db")
    with store:
        store.append_chat_messages(
            "a",
            [
                {"role": "user", "content": "u"},
                _call("c1"),
                {"role": "tool", "tool_call_id": "c1", "content": "one"},
            ],
        )
        store.append_many(
            "a",
            [{"role": "assistant", "body": f"a{n}", "meta": {"k": "v"}} for n in range(2000)],
        )
        policy = CompactionPolicy("cache-v1", min_new_turns=1, keep_tail=2000)
        assert Compactor(store, policy).compact("a", force=True).status == "accepted"
        assert store.context("a", policy.version).fallback is None
        # Appended as a plain turn: no group joins it to its call (chat messages do that).
        store.append("a", "tool", "2", meta={"tool_call_id": "c1"})
        assert store.context("a", policy.version).fallback == "stale-summary:group-split"
        assert store.context("a", policy.version) == context_read.assemble(
            store._transaction, store._cache, "a", policy.version
        )


def _call_after_its_summarised_result(store: SQLiteStore) -> None:
    """A result recorded before its call, summarised; then the call: the unit splits."""
    store.append_chat_messages(
        "a",
        [{"role": "tool", "tool_call_id": "c1", "content": "early"}]
        + [{"role": "user", "content": f"u{n}"} for n in range(6)],
    )
    assert Compactor(store, POLICY).compact("a", force=True).status == "accepted"
    assert store.context("a", POLICY.version).fallback is None
    store.append_chat_messages("a", [_call("c1")])
    assert store.context("a", POLICY.version).fallback == "stale-summary:group-split"


def test_a_call_appended_after_its_summarised_result_is_read_again(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        _call_after_its_summarised_result(store)
        assert store.context("a", POLICY.version) == _uncached(store, "a")


def test_a_context_that_fell_back_is_read_again_after_an_append(tmp_path: Path) -> None:
    # Whether a context falls back is decided at its read, over the turns then: a later
    # append is not simply joined to a fallback context.
    with SQLiteStore(tmp_path / "s.db") as store:
        _call_after_its_summarised_result(store)
        store.append_chat_messages("a", [{"role": "tool", "tool_call_id": "c1", "content": "r"}])
        assert store.context("a", POLICY.version) == _uncached(store, "a")


def test_a_result_of_a_raw_call_extends_the_context(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        store.append_chat_messages("a", [_call("c9")])
        before = store.context("a", POLICY.version)
        assert before.fallback is None and before.items[0].kind == "summary"
        store.append_chat_messages("a", [{"role": "tool", "tool_call_id": "c9", "content": "r"}])
        cached = store._contexts._entries[("a", POLICY.version)][1]
        assert cached.items[: len(before.items)] == before.items  # extended, not dropped
        assert store.context("a", POLICY.version) == _uncached(store, "a")


def test_an_append_extends_a_context_without_a_summary(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append_many("a", _turns("a", 3))
        before = store.context("a", POLICY.version)
        assert before.fallback == "no-summary"
        store.append_many("a", _turns("a-more", 2))
        cached = store._contexts._entries[("a", POLICY.version)][1]
        assert cached.items[: len(before.items)] == before.items  # extended, not dropped
        assert store.context("a", POLICY.version) == _uncached(store, "a")


def test_a_turn_with_the_summarys_id_is_not_appended_to_the_summary(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        assert store.context("a", POLICY.version).fallback is None
        summary = store.current_summary("a")
        assert summary is not None
        store.append_many("a", [{"role": "user", "body": "same id", "id": summary.id}])
        assert store.context("a", POLICY.version).fallback == "duplicate-id"
        assert store.context("a", POLICY.version) == _uncached(store, "a")


def test_retracting_the_newest_turns_shortens_the_context_read(tmp_path: Path) -> None:
    """A session's `pop_item`: the context keeps its item objects, less the retracted end,
    with a summary and without one; no read of the ledger (its rows) again."""
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        store.append_many("c", _turns("c", 5))  # never compacted: `no-summary`
        for conversation in ("a", "c"):
            first = store.context(conversation, POLICY.version)
            store.retract(conversation, first.items[-1].id)
            again = store.context(conversation, POLICY.version)
            assert len(again.items) == len(first.items) - 1
            assert all(map(operator.is_, again.items, first.items))
            assert again == _uncached(store, conversation)


def test_a_retraction_elsewhere_keeps_the_context_one_here_does_not(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        a = store.context("a", POLICY.version)
        newest_b = store.context("b", POLICY.version).items[-1].id
        store.retract("b", newest_b)
        assert store.context("a", POLICY.version) is a
        # Not the newest turn: the context is read again.
        store.retract("a", a.items[-2].id)
        again = store.context("a", POLICY.version)
        assert again == _uncached(store, "a")
        assert a.items[-2] not in again.items


def test_retracting_a_call_with_its_results_at_the_end_shortens_the_context(
    tmp_path: Path,
) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with store:
        store.append_chat_messages(
            "a",
            [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"},
            ],
        )
        first = store.context("a", POLICY.version)
        store.retract("a", first.items[-2].id)  # the call: its result goes with it
        again = store.context("a", POLICY.version)
        assert again.items == first.items[:-2] == _uncached(store, "a").items
        assert all(map(operator.is_, again.items, first.items))


def test_an_erasure_of_the_newest_turn_leaves_no_context_in_memory(tmp_path: Path) -> None:
    """An erasure empties the cache (no erased text stays in memory), the other
    conversation's contexts too."""
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        a = store.context("a", POLICY.version)
        b = store.context("b", POLICY.version)
        store.retract("b", b.items[-1].id, erase=True)
        assert len(store._contexts) == 0
        assert store.context("a", POLICY.version) == a
        assert store.context("a", POLICY.version) is not a


def test_a_retraction_that_marks_a_summary_stale_is_read_again(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        first = store.context("a", POLICY.version)
        summary = first.summary
        assert summary is not None
        store.retract("a", summary.source_ids[-1])
        again = store.context("a", POLICY.version)
        assert again.fallback == "stale-summary:source-missing"
        assert again == _uncached(store, "a")


def test_a_failed_write_leaves_what_it_read_right(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        a = store.context("a", POLICY.version)
        existing = store.load("a").turns[-1].id
        with pytest.raises(DuplicateId):
            store.append_many("a", [{"role": "user", "body": "x", "id": existing}])
        assert store.context("a", POLICY.version) == a == _uncached(store, "a")


_OPS = ops(tuple(op for op in OPS if op != "fail"))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_every_read_equals_the_uncached_read(tmp_path_factory: object, ops: list) -> None:
    path = tmp_path_factory.mktemp("cache") / "s.db"  # type: ignore[attr-defined]
    store, compactor = _compacted(path)
    with store, SQLiteStore(path) as other:
        writes = Writes(store, other, compactor)
        for step, (op, conversation, pick) in enumerate(ops):
            for name in ("a", "b"):
                store.context(name, POLICY.version)  # fill the cache before each change
            writes.apply(step, op, conversation, pick)
            for name in ("a", "b"):
                assert store.context(name, POLICY.version) == _uncached(store, name)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=5) | st.none(),
    st.text(max_size=20),
)
def test_appended_items_are_what_a_read_of_their_rows_makes(
    meta: dict[str, str] | None, body: str
) -> None:
    """The items an append extends the cached contexts with are made from its `Turn`s
    without the meta's JSON: equal to `item_from_row` of the row written, key order too."""
    from ledgerfold import Turn
    from ledgerfold._errors import InvalidInput
    from ledgerfold.store._rows import item_from_row, meta_json
    from ledgerfold.store._turn_writes import _items

    try:
        turn = Turn("t1", 3, "user", body, meta=meta)
    except InvalidInput:
        return  # a meta or body the store refuses is never appended
    (made,) = _items([turn])
    read = item_from_row((turn.id, turn.sequence, turn.role, turn.body, meta_json(turn.meta)))
    assert made == read
    assert list((made.meta or {}).items()) == list((read.meta or {}).items())
