"""`begin_compaction(only_due_at_once=True)` (the check each `add_items` makes below the
trigger) answers from the context cache when it found nothing due at once before and only
appends happened since (`store/_context_cache.py`). The oracle: a store opened on a copy
of the file, with no cache, asked the same question."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from cache_support import OPS, Writes, compacted, ops, turns
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("due-cache-v1", min_new_turns=1, keep_tail=2)


_turns = turns


def _compacted(path: Path) -> tuple[SQLiteStore, Compactor]:
    return compacted(path, POLICY)


def _ask(store: SQLiteStore, conversation: str, keep_tail: int = 2) -> tuple[str, int]:
    work = store.begin_compaction(conversation, keep_tail, POLICY.version, only_due_at_once=True)
    return work.status, work.failures


def _uncached(path: Path, conversation: str, keep_tail: int = 2) -> tuple[str, int]:
    """The answer of a store with nothing cached, on a copy of the file as it is now."""
    copy = path.with_name(f"copy-{path.name}")
    copy.unlink(missing_ok=True)
    source, target = sqlite3.connect(path), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    with SQLiteStore(copy) as fresh:
        return _ask(fresh, conversation, keep_tail)


def _statements(store: SQLiteStore) -> list[str]:
    seen: list[str] = []
    store._connection().set_trace_callback(seen.append)
    return seen


def test_after_an_append_the_answer_is_given_without_queries(tmp_path: Path) -> None:
    store, _ = _compacted(tmp_path / "s.db")
    with store:
        store.context("a", POLICY.version)  # as the due check reads it first
        assert _ask(store, "a") == ("not-due", 0)
        store.append_many("a", _turns("more", 2))
        store.context("a", POLICY.version)
        seen = _statements(store)
        assert _ask(store, "a") == ("not-due", 0)
        store._connection().set_trace_callback(None)
        assert seen == ["PRAGMA data_version"]


def test_a_retraction_of_the_newest_turn_asks_again_and_finds_a_rebase(tmp_path: Path) -> None:
    """The tail reaching back into the summary's sources makes a rebase due at once: the
    retraction keeps the (shortened) context cached, but not the earlier answer."""
    path = tmp_path / "s.db"
    store, _ = _compacted(path)
    with store:
        store.context("a", POLICY.version)
        assert _ask(store, "a") == ("not-due", 0)
        newest = store.load("a").turns[-1]
        store.retract("a", newest.id)
        store.context("a", POLICY.version)
        assert _uncached(path, "a")[0] == "ready"
        assert _ask(store, "a")[0] == "ready"


def test_a_failed_compaction_is_counted_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store, _ = _compacted(path)

    def failing(request: object) -> str:
        raise RuntimeError("model down")

    with store:
        store.context("a", POLICY.version)
        assert _ask(store, "a") == ("not-due", 0)
        store.append_many("a", _turns("more", 2))
        outcome = Compactor(store, POLICY, summarizer=failing).compact("a", force=True)
        assert outcome.status == "failed"
        store.context("a", POLICY.version)
        assert _ask(store, "a") == ("not-due", 1) == _uncached(path, "a")


def test_an_answer_is_kept_per_keep_tail(tmp_path: Path) -> None:
    """Asked with a larger `keep_tail`, the tail reaches into the summary: a rebase is due
    although with the policy's own `keep_tail` nothing is."""
    path = tmp_path / "s.db"
    store, _ = _compacted(path)
    with store:
        store.context("a", POLICY.version)
        assert _ask(store, "a", keep_tail=2) == ("not-due", 0)
        assert _ask(store, "a", keep_tail=4)[0] == "ready" == _uncached(path, "a", 4)[0]


def _failing(request: object) -> str:
    raise RuntimeError("model down")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops(tuple(op for op in OPS if op != "retract")))
def test_every_answer_equals_an_uncached_stores(tmp_path_factory: object, ops: list) -> None:
    path = tmp_path_factory.mktemp("due") / "s.db"  # type: ignore[attr-defined]
    store, compactor = _compacted(path)
    failing = Compactor(store, POLICY, summarizer=_failing)
    with store, SQLiteStore(path) as other:
        writes = Writes(store, other, compactor, failing)
        for step, (op, conversation, pick) in enumerate(ops):
            for name in ("a", "b"):  # fill the cache before each change, as a session does
                store.context(name, POLICY.version)
                if _ask(store, name)[0] == "ready":
                    compactor.compact(name, force=True)
                    store.context(name, POLICY.version)
                    _ask(store, name)
            writes.apply(step, op, conversation, pick)
            for name in ("a", "b"):
                store.context(name, POLICY.version)
                expected = _uncached(path, name)
                assert _ask(store, name) == expected
