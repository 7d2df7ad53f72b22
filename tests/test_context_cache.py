"""`SQLiteStore.context` serves a context again only while nothing it depends on changed
(`store/_context_cache.py`): an append to another conversation keeps it, any change to its
own conversation, a write through the raw connection, another connection's commit or any
other write method is seen at once. The oracle: the same read without the cache."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, Compactor, DuplicateId
from ledgerfold.store import SQLiteStore
from ledgerfold.store import _context_read as context_read

POLICY = CompactionPolicy("cache-v1", min_new_turns=1, keep_tail=2)


def _turns(prefix: str, count: int) -> list[dict[str, str]]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "body": f"{prefix} message {n}"}
        for n in range(count)
    ]


def _uncached(store: SQLiteStore, conversation_id: str) -> object:
    return context_read.assemble(store._transaction, store._cache, conversation_id, POLICY.version)


def _compacted(path: Path) -> tuple[SQLiteStore, Compactor]:
    store = SQLiteStore(path)
    compactor = Compactor(store, POLICY)
    for conversation in ("a", "b"):
        store.append_many(conversation, _turns(conversation, 8))
        assert compactor.compact(conversation, force=True).status == "accepted"
    return store, compactor


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


def test_a_failed_write_leaves_what_it_read_right(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        a = store.context("a", POLICY.version)
        existing = store.load("a").turns[-1].id
        with pytest.raises(DuplicateId):
            store.append_many("a", [{"role": "user", "body": "x", "id": existing}])
        assert store.context("a", POLICY.version) == a == _uncached(store, "a")


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "edit", "retract", "compact", "tamper", "other-append"]),
        st.sampled_from(["a", "b"]),
        st.integers(min_value=0, max_value=50),
    ),
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_OPS)
def test_every_read_equals_the_uncached_read(tmp_path_factory: object, ops: list) -> None:
    path = tmp_path_factory.mktemp("cache") / "s.db"  # type: ignore[attr-defined]
    store, compactor = _compacted(path)
    with store, SQLiteStore(path) as other:
        for op, conversation, pick in ops:
            for name in ("a", "b"):
                store.context(name, POLICY.version)  # fill the cache before each change
            live = store.load(conversation).turns
            if op == "append":
                store.append_many(conversation, _turns(f"{conversation}{pick}", 1 + pick % 3))
            elif op == "edit" and live:
                store.edit(conversation, live[pick % len(live)].id, body=f"edit {pick}")
            elif op == "retract" and len(live) > 1:
                store.retract(conversation, live[pick % len(live)].id)
            elif op == "compact":
                compactor.compact(conversation, force=True)
            elif op == "tamper":
                store._connection().execute(
                    "UPDATE summaries SET status = 'stale', reason = 'source-modified'"
                    " WHERE conversation_id = ? AND status = 'current'",
                    (conversation,),
                )
            elif op == "other-append":
                other.append_many(conversation, _turns(f"other{pick}", 1))
            for name in ("a", "b"):
                assert store.context(name, POLICY.version) == _uncached(store, name)
