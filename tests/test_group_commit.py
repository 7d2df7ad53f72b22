"""Group commit on the store's worker thread (`store/_group_commit.py`, SPEC §17.6): jobs
queued together share one transaction, each a savepoint of it, committed once at the end of
their batch; one failing job fails alone, a failed commit fails every caller. The syncs of
the WAL, as the disk sees them: `test_group_commit_sync.py`."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import CompactionPolicy, Compactor, Event, InvalidInput, SQLiteStore, StoreError
from ledgerfold._worker import worker_for
from ledgerfold.store._database import Database


def _queue_behind_a_gate(store: SQLiteStore, jobs: list[Any]) -> list[Future[Any]]:
    """Submit a job that waits for a gate, then `jobs`, then open the gate: the jobs are
    queued together."""
    gate = threading.Event()
    worker = worker_for(store)
    worker.submit(gate.wait, 10)  # answered with the batch it opens
    futures = [worker.submit(job) for job in jobs]
    gate.set()
    return futures


def test_a_failing_job_fails_alone(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:

        def bad() -> None:
            store.append("c", "narrator", "x")  # not a role

        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.append("c", "user", "one"),
                bad,
                lambda: store.append("c", "user", "two"),
            ],
        )
        assert futures[0].result(timeout=30).body == "one"
        with pytest.raises(InvalidInput) as raised:
            futures[1].result(timeout=30)
        assert raised.value.field == "role"
        assert futures[2].result(timeout=30).body == "two"
        assert [t.body for t in store.load("c").turns] == ["one", "two"]


def test_a_job_closing_its_store_ends_the_batch_cleanly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    futures = _queue_behind_a_gate(store, [lambda: store.append("c", "user", "kept"), store.close])
    futures[0].result(timeout=30)
    futures[1].result(timeout=30)
    with SQLiteStore(tmp_path / "s.db") as reopened:
        assert [t.body for t in reopened.load("c").turns] == ["kept"]


# -- one transaction per batch: each job a savepoint of it ----------------------------------


def _statements(store: SQLiteStore, log: list[str]) -> None:
    store._connection().set_trace_callback(log.append)


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_batchs_writes_share_one_commit(tmp_path: Path, durability: str) -> None:
    with SQLiteStore(tmp_path / "s.db", durability=durability) as store:
        log: list[str] = []
        _statements(store, log)
        futures = _queue_behind_a_gate(
            store, [lambda n=n: store.append(f"c{n}", "user", f"m{n}") for n in range(10)]
        )
        assert [f.result(timeout=30).body for f in futures] == [f"m{n}" for n in range(10)]
        store._connection().set_trace_callback(None)
        assert log.count("COMMIT") == 1
        assert log.count("SAVEPOINT lf_job") == 10
        assert len(store.conversation_ids()) == 10


def _append_then_fail(store: SQLiteStore) -> None:
    with store._transaction(write=True, operation="test"):
        store.append("c", "user", "half-written")  # a savepoint inside the job's own
        raise RuntimeError("the job fails after writing")


def test_a_job_failing_after_writing_rolls_back_its_own_writes_only(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.append("c", "user", "one"),
                lambda: _append_then_fail(store),
                lambda: store.append("c", "user", "two"),
            ],
        )
        assert futures[0].result(timeout=30).body == "one"
        with pytest.raises(RuntimeError):
            futures[1].result(timeout=30)
        assert futures[2].result(timeout=30).body == "two"
    with SQLiteStore(tmp_path / "s.db") as reopened:
        assert [t.body for t in reopened.load("c").turns] == ["one", "two"]
        rows = reopened._connection().execute("SELECT COUNT(*) FROM turns").fetchone()[0]
        assert rows == 2


def _violate_a_deferred_key(store: SQLiteStore) -> None:
    # Checked at COMMIT only: the batch's commit fails.
    conn = store._connection()
    conn.execute("PRAGMA defer_foreign_keys = ON")
    conn.execute("INSERT INTO summary_kept (summary_pk, turn_pk) VALUES (424242, 424242)")


def test_a_failed_commit_fails_every_caller_and_keeps_nothing(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("kept", "user", "before the batch")
        before = store.context("kept", "v1")
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.append("kept", "user", "secret one"),
                lambda: store.context("kept", "v1"),  # reads the batch's own write
                lambda: _violate_a_deferred_key(store),
                lambda: store.append("other", "user", "secret two"),
            ],
        )
        for future in futures:
            with pytest.raises(StoreError) as raised:
                future.result(timeout=30)
            assert "secret" not in str(raised.value)
        # Nothing of the batch is kept, and nothing the caches learnt from it is served.
        assert [t.body for t in store.load("kept").turns] == ["before the batch"]
        assert store.conversation_ids() == ["kept"]
        assert store.context("kept", "v1") == before
        store.append("kept", "user", "after")
    with SQLiteStore(tmp_path / "s.db") as reopened:
        assert [t.body for t in reopened.load("kept").turns] == ["before the batch", "after"]


def test_a_transaction_lost_in_a_batch_fails_every_caller(tmp_path: Path) -> None:
    # SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error):
    # the jobs before it must not be reported as done, nor the ones after it be committed.
    with SQLiteStore(tmp_path / "s.db") as store:
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.append("c", "user", "one"),
                lambda: store._connection().execute("ROLLBACK"),
                lambda: store.append("c", "user", "two"),
            ],
        )
        for future in (futures[0], futures[2]):
            with pytest.raises(StoreError, match="rolled back"):
                future.result(timeout=30)
        assert store.load("c").turns == ()
        store.append("c", "user", "three")
        assert [t.body for t in store.load("c").turns] == ["three"]


def test_an_erasing_job_commits_the_batch_before_its_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        store.append("gone", "user", "erase-me-please")
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.append("c", "user", "one"),
                lambda: store.delete_conversation("gone"),
                lambda: store.append("c", "user", "two"),
            ],
        )
        for future in futures:
            future.result(timeout=30)
        for file in (path, Path(f"{path}-wal")):
            if file.exists():
                assert b"erase-me-please" not in file.read_bytes()
        assert [t.body for t in store.load("c").turns] == ["one", "two"]


def failing_commits(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """While the event is set, the store's COMMIT fails (as on an I/O error)."""
    real = Database._control

    def control(self: Database, conn: sqlite3.Connection, statement: str) -> None:
        if statement == "COMMIT" and failing.is_set():
            raise sqlite3.OperationalError("disk I/O error")
        real(self, conn, statement)

    failing = threading.Event()
    monkeypatch.setattr(Database, "_control", control)
    return failing


def test_after_a_failed_commit_no_cache_serves_the_batchs_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch's jobs filled the context cache from their own (uncommitted) writes; the
    # commit then fails without a row changing: the cache must not serve them.
    failing = failing_commits(monkeypatch)
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("kept", "user", "before the batch")
        before = store.context("kept", "v1")
        failing.set()
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.append("kept", "user", "secret one"),
                lambda: store.context("kept", "v1"),
            ],
        )
        for future in futures:
            with pytest.raises(StoreError, match="disk I/O error"):
                future.result(timeout=30)
        failing.clear()
        assert store.context("kept", "v1") == before
        assert [t.body for t in store.load("kept").turns] == ["before the batch"]


# -- events of a batch: handed over once it has committed ------------------------------------


def _covered_store(path: Path, events: list[tuple[str, str]]) -> tuple[SQLiteStore, str]:
    """A store with one summary; each event records the summary's status as another
    connection sees it when the hook runs (committed or not)."""

    def hook(event: Event) -> None:
        with contextlib.closing(sqlite3.connect(path)) as other:
            (status,) = other.execute("SELECT status FROM summaries").fetchone()
        events.append((event.name, status))

    store = SQLiteStore(path, on_event=hook)
    store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
    assert Compactor(store, policy).compact("c").status == "accepted"
    return store, store.load("c").turns[0].id


def test_a_batchs_events_reach_the_hook_after_its_commit(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    store, covered = _covered_store(tmp_path / "s.db", events)
    with store:
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.edit("c", covered, body="changed"),
                lambda: store.append("c", "user", "later"),
            ],
        )
        for future in futures:
            future.result(timeout=30)
    # The hook ran once the edit was committed: another connection saw the summary stale.
    assert events == [("summary.stale", "stale")]


def test_a_failed_batch_reports_no_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing = failing_commits(monkeypatch)
    events: list[tuple[str, str]] = []
    store, covered = _covered_store(tmp_path / "s.db", events)
    with store:
        failing.set()
        futures = _queue_behind_a_gate(store, [lambda: store.edit("c", covered, body="changed")])
        with pytest.raises(StoreError):
            futures[0].result(timeout=30)
        failing.clear()
        assert store.current_summary("c") is not None  # the edit did not happen
    assert events == []


# -- a batch a job committed early (an erasing call's checkpoint, a close) --------------------


def _failing_next_commit(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Once the event is set, the store's next COMMIT fails (as on a full disk); later ones
    succeed."""
    real = Database._control

    def control(self: Database, conn: sqlite3.Connection, statement: Any) -> None:
        if statement == "COMMIT" and armed.is_set():
            armed.clear()
            raise sqlite3.OperationalError("disk I/O error")
        real(self, conn, statement)

    armed = threading.Event()
    monkeypatch.setattr(Database, "_control", control)
    return armed


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_failed_early_commit_fails_the_jobs_before_it_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    # The erasing job commits the batch before its checkpoint, and that commit fails: the
    # jobs so far are rolled back and hear so; the job after it commits on its own, and its
    # caller and its event hook hear of it.
    armed = _failing_next_commit(monkeypatch)
    events: list[tuple[str, str]] = []
    store, covered = _covered_store(tmp_path / "s.db", events)
    with store:
        store.append("gone", "user", "erase me")
        armed.set()
        futures = _queue_behind_a_gate(
            store,
            [
                lambda: store.edit("c", covered, body="first change"),
                lambda: store.delete_conversation("gone"),
                lambda: store.edit("c", covered, body="second change"),
            ],
        )
        for future in futures[:2]:
            with pytest.raises(StoreError, match="disk I/O error"):
                future.result(timeout=30)
        futures[2].result(timeout=30)
        assert [t.body for t in store.load("gone").turns] == ["erase me"]
        assert store.load("c").turns[0].body == "second change"
        assert store.current_summary("c") is None  # stale: the second edit landed
    with SQLiteStore(tmp_path / "s.db") as reopened:
        assert reopened.load("c").turns[0].body == "second change"
        assert reopened.conversation_ids() == ["c", "gone"]
    # Only the second edit's event, after its commit: the first edit's was rolled back.
    assert events == [("summary.stale", "stale")]


def test_a_close_whose_commit_fails_fails_the_jobs_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job closes the store, whose commit of the batch fails outside SQLite (writing the
    # batch's pending index rows): the append before it was rolled back and must not be
    # reported as done.
    from ledgerfold.store import _search_index as search_index

    real = search_index.flush_pending

    def flush(conn: Any) -> None:
        if conn.pending:
            raise RuntimeError("segmenting failed")
        real(conn)

    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        monkeypatch.setattr(search_index, "flush_pending", flush)
        futures = _queue_behind_a_gate(
            store, [lambda: store.append("c", "user", "one"), lambda: store.close()]
        )
        for future in futures:
            with pytest.raises(RuntimeError, match="segmenting failed"):
                future.result(timeout=30)
    monkeypatch.setattr(search_index, "flush_pending", real)
    with SQLiteStore(path) as reopened:
        assert reopened.conversation_ids() == []
