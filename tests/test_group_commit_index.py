"""The search index under group commit (`_search_index.flush_pending`, `Database.transaction`):
inside a batch of the store's worker, the appends' index rows are written once, at the
batch's end or before the first job that reads or deletes index rows; the index and every
search answer are the same as with each call on its own (SPEC §16.5: one transaction)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgerfold import SQLiteStore, StoreError
from ledgerfold._worker import worker_for
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._database import INDEX_FREE


def _batch(store: SQLiteStore, jobs: list[Callable[[], Any]]) -> list[Future[Any]]:
    """Run `jobs` as one batch of the store's worker (queued behind a gate)."""
    gate = threading.Event()
    worker = worker_for(store)
    worker.submit(gate.wait, 10)
    futures = [worker.submit(job) for job in jobs]
    gate.set()
    for future in futures:
        future.exception(timeout=30)
    return futures


def _index_rows(store: SQLiteStore) -> int:
    return int(store._connection().execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0])


def _indexed(store: SQLiteStore) -> set[tuple[str, str]]:
    return {
        (row[0], row[1])
        for row in store._connection().execute(
            "SELECT DISTINCT t.conversation_id, t.id FROM search_fts_docsize AS d"
            " JOIN turns AS t ON t.pk = d.id >> 10"
        )
    }


def _hit_ids(store: SQLiteStore, conversation_id: str, query: str) -> list[str]:
    return [hit.turn_id for hit in store.search(conversation_id, query, scope="all")]


def test_a_batchs_appends_are_indexed_at_its_end(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        seen: list[int] = []
        jobs: list[Callable[[], Any]] = [
            lambda n=n: store.append(f"c{n}", "user", f"quokka number {n}", id=f"t{n}")
            for n in range(8)
        ]
        jobs.append(lambda: seen.append(_index_rows(store)))  # a raw read: no flush
        _batch(store, jobs)
        assert seen == [0]  # none written while the batch ran ...
        assert _index_rows(store) == 8  # ... all of them at its end
        for n in range(8):
            assert _hit_ids(store, f"c{n}", "quokka") == [f"t{n}"]
        assert store._connection().pending is None  # outside a batch appends index at once
        store.append("c0", "user", "quokka again", id="u")
        assert _index_rows(store) == 9


def test_a_search_in_the_batch_finds_what_was_appended_before_it(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        found = _batch(
            store,
            [
                lambda: store.append("c", "user", "the locker code is 4471", id="a"),
                lambda: _hit_ids(store, "c", "locker 4471"),
                lambda: store.append("c", "user", "a second locker", id="b"),
            ],
        )
        assert found[1].result() == ["a"]
        assert sorted(_hit_ids(store, "c", "locker")) == ["a", "b"]


@pytest.mark.parametrize("erase", ["retract", "edit", "purge", "delete"])
def test_erasing_in_the_batch_what_was_appended_before_it(tmp_path: Path, erase: str) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        erasers: dict[str, Callable[[], Any]] = {
            "retract": lambda: store.retract("c", "a", erase=True),
            "edit": lambda: store.edit("c", "a", body="nothing left here"),
            "purge": lambda: store.purge_through("c", 1, "retention"),
            "delete": lambda: store.delete_conversation("c"),
        }
        futures = _batch(
            store,
            [
                lambda: store.append("c", "user", "wombat passport 88", id="a"),
                erasers[erase],
                lambda: store.append("c", "user", "wombat kept", id="b"),
            ],
        )
        assert all(future.exception() is None for future in futures)
        assert _hit_ids(store, "c", "passport") == []
        kept = {("c", "a"), ("c", "b")} if erase == "edit" else {("c", "b")}
        assert _indexed(store) == kept
        conn = store._connection()
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('integrity-check')")


def test_a_job_rolled_back_takes_its_index_rows_with_it(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:

        def append_then_fail() -> None:
            with store._transaction(write=True, operation="append", scope="c") as conn:
                store.append("c", "user", "platypus lost", id="lost")
                assert conn.pending  # the job's rows wait for the batch's end
                raise RuntimeError("the job fails after its append")

        futures = _batch(
            store,
            [
                lambda: store.append("c", "user", "platypus kept", id="kept"),
                append_then_fail,
                lambda: store.append("c", "user", "platypus later", id="later"),
            ],
        )
        assert isinstance(futures[1].exception(), RuntimeError)
        assert [turn.id for turn in store.load("c").turns] == ["kept", "later"]
        assert _indexed(store) == {("c", "kept"), ("c", "later")}
        assert sorted(_hit_ids(store, "c", "platypus")) == ["kept", "later"]
        # The failed job's rows are not written under the turn that took its rowid.
        assert _hit_ids(store, "c", "lost") == [] and _index_rows(store) == 2


def _failing_insert(monkeypatch: pytest.MonkeyPatch) -> None:
    real = search_index._insert

    def insert(conn: sqlite3.Connection, turns: Any) -> None:
        if conn.pending:  # only the deferred write fails
            raise sqlite3.OperationalError("database or disk is full")
        real(conn, turns)

    monkeypatch.setattr(search_index, "_insert", insert)


def test_a_failed_index_write_at_the_end_fails_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("c", "user", "before the batch", id="old")
        _failing_insert(monkeypatch)
        futures = _batch(
            store,
            [lambda n=n: store.append("c", "user", f"emu {n}", id=f"t{n}") for n in range(4)],
        )
        for future in futures:
            error = future.exception()
            assert isinstance(error, StoreError) and "full" in str(error)
        monkeypatch.undo()
        assert [turn.id for turn in store.load("c").turns] == ["old"]  # nothing kept
        assert _indexed(store) == {("c", "old")}
        store.append("c", "user", "emu after", id="after")  # the store goes on
        assert _hit_ids(store, "c", "emu") == ["after"]


def test_a_failed_index_write_before_a_search_fails_the_whole_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        _failing_insert(monkeypatch)
        futures = _batch(
            store,
            [
                lambda: store.append("c", "user", "koala one", id="a"),
                lambda: store.search("c", "koala"),
                lambda: store.append("c", "user", "koala two", id="b"),
            ],
        )
        assert all(isinstance(future.exception(), StoreError) for future in futures)
        monkeypatch.undo()
        assert store.load("c").turns == ()
        assert _index_rows(store) == 0


@pytest.mark.parametrize("where", ["end", "before-search"])
def test_an_index_write_failing_outside_sqlite_fails_the_batch_and_the_store_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Not an SQLite error (the segmenting of a pending body, say): the batch keeps nothing,
    its callers get the error, and the transaction does not stay open."""
    with SQLiteStore(tmp_path / "s.db") as store:
        real = search_index._insert

        def insert(conn: sqlite3.Connection, turns: Any) -> None:
            if conn.pending:
                raise RuntimeError("the segmenter failed")
            real(conn, turns)

        monkeypatch.setattr(search_index, "_insert", insert)
        jobs: list[Callable[[], Any]] = [lambda: store.append("c", "user", "ibis one", id="a")]
        if where == "before-search":
            jobs.append(lambda: store.search("c", "ibis"))
        futures = _batch(store, jobs)
        assert all(future.exception() is not None for future in futures)
        monkeypatch.undo()
        assert not store._connection().in_transaction
        assert store.load("c").turns == () and _index_rows(store) == 0
        store.append("c", "user", "ibis two", id="b")
        assert _hit_ids(store, "c", "ibis") == ["b"]


def test_rows_of_jobs_done_survive_a_failing_job_that_nests_an_index_read(
    tmp_path: Path,
) -> None:
    """A job whose store call opens another inside its own savepoint (here a retract, which
    deletes index rows, inside an append's transaction) must not write the rows of the jobs
    before it there: its rollback would take them along while their turns stay. It gets an
    error instead, and those rows are written at the batch's end."""
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("c", "user", "heron old", id="old")

        def nested_then_fail() -> None:
            with store._transaction(write=True, operation="append", scope="c"):
                store.retract("c", "old")
                raise RuntimeError("fails after the nested call")

        futures = _batch(
            store,
            [lambda: store.append("c", "user", "heron new", id="new"), nested_then_fail],
        )
        assert futures[0].exception() is None and futures[1].exception() is not None
        assert sorted(_hit_ids(store, "c", "heron")) == ["new", "old"]
        assert _indexed(store) == {("c", "old"), ("c", "new")}


def test_index_free_names_are_operations_of_the_store() -> None:
    """A misspelt name would make its operation flush (slower, never wrong); this keeps the
    list honest."""
    import ledgerfold.store as package

    sources = "".join(path.read_text() for path in Path(package.__file__).parent.glob("*.py"))
    for name in INDEX_FREE:
        assert f'operation="{name}"' in sources, name


# -- the same answers with and without a batch (differential) --------------------------------

_WORDS = ("apple", "bison", "cedar", "delta", "ember")

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 1), st.sampled_from(_WORDS)),
        st.tuples(st.just("search"), st.integers(0, 1), st.sampled_from(_WORDS)),
        st.tuples(st.just("retract"), st.integers(0, 1), st.integers(0, 6)),
        st.tuples(st.just("edit"), st.integers(0, 1), st.integers(0, 6)),
        st.tuples(st.just("purge"), st.integers(0, 1), st.integers(1, 3)),
        st.tuples(st.just("delete"), st.integers(0, 1), st.none()),
        st.tuples(st.just("context"), st.integers(0, 1), st.none()),
        st.tuples(st.just("fail"), st.integers(0, 1), st.sampled_from(_WORDS)),
    ),
    min_size=1,
    max_size=14,
)


def _job(store: SQLiteStore, op: tuple[str, int, Any], n: int) -> Callable[[], Any]:
    kind, conv, arg = op
    cid = f"c{conv}"

    def run() -> Any:
        turns = store.load(cid).turns if kind in ("retract", "edit") else ()
        if kind == "append":
            return store.append(cid, "user", f"{arg} note {n}", id=f"t{n}").id
        if kind == "search":
            return _hit_ids(store, cid, arg)
        if kind in ("retract", "edit"):
            if not turns:
                return None
            target = turns[arg % len(turns)].id
            if kind == "retract":
                return store.retract(cid, target, erase=True).id
            return store.edit(cid, target, body=f"edited {_WORDS[arg % 5]} {n}").id
        if kind == "purge":
            return store.purge_through(cid, arg, "retention").through_sequence
        if kind == "delete":
            return store.delete_conversation(cid)
        if kind == "context":
            return [item.id for item in store.context(cid).items]
        if store._db._in_batch:  # an erasing job's checkpoint may have ended the batch
            with store._transaction(write=True, operation="append", scope=cid):
                store.append(cid, "user", f"{arg} doomed {n}", id=f"t{n}")
                raise RuntimeError("fails after its append")
        raise RuntimeError("fails (its append would be rolled back)")

    return run


def _outcome(future: Future[Any]) -> Any:
    error = future.exception()
    return ("error", type(error).__name__) if error is not None else future.result()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_OPS)
def test_a_batch_gives_the_answers_and_index_of_one_call_at_a_time(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, Any]]
) -> None:
    base = tmp_path_factory.mktemp("diff")
    with SQLiteStore(base / "batched.db") as batched, SQLiteStore(base / "alone.db") as alone:
        futures = _batch(batched, [_job(batched, op, n) for n, op in enumerate(ops)])
        singles = []
        for n, op in enumerate(ops):  # each on its own: one batch each, waited for
            singles += _batch(alone, [_job(alone, op, n)])
        assert [_outcome(f) for f in futures] == [_outcome(f) for f in singles]
        assert _indexed(batched) == _indexed(alone)
        assert _index_rows(batched) == _index_rows(alone)
        for conv in ("c0", "c1"):
            for word in (*_WORDS, "edited", "doomed"):
                assert _hit_ids(batched, conv, word) == _hit_ids(alone, conv, word)
        batched._connection().execute(
            "INSERT INTO search_fts(search_fts) VALUES ('integrity-check')"
        )
