"""Group commit on the store's worker thread (`store/_group_commit.py`, SPEC §17.6): jobs
queued together commit with one fsync of the WAL at the end of their batch, and no caller
hears back before its commit is durable; one failing job fails alone."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import InvalidInput, StoreError
from ledgerfold._worker import worker_for
from ledgerfold.store import SQLiteStore
from ledgerfold.store import _group_commit as group_commit

FULL, NORMAL = 2, 1


class FsyncLog:
    """Records each fsync of the WAL (the real one runs) in a shared event log."""

    def __init__(self, log: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
        real = os.fsync

        def fsync(fd: int) -> None:
            real(fd)
            log.append(("fsync",))

        monkeypatch.setattr(group_commit.os, "fsync", fsync)


def _queue_behind_a_gate(store: SQLiteStore, jobs: list[Any]) -> list[Future[Any]]:
    """Submit a job that waits for a gate, then `jobs`, then open the gate: the jobs are
    queued together."""
    gate = threading.Event()
    worker = worker_for(store)
    worker.submit(gate.wait, 10)  # answered with the batch it opens
    futures = [worker.submit(job) for job in jobs]
    gate.set()
    return futures


def _sync_level(store: SQLiteStore) -> int:
    return int(store._connection().execute("PRAGMA synchronous").fetchone()[0])


def test_queued_appends_share_one_fsync_and_answer_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[tuple[Any, ...]] = []
    FsyncLog(log, monkeypatch)
    with SQLiteStore(tmp_path / "s.db") as store:

        def append(n: int) -> int:
            store.append(f"c{n}", "user", f"message {n}")
            log.append(("commit", n, _sync_level(store)))
            return n

        futures = _queue_behind_a_gate(store, [lambda n=n: append(n) for n in range(10)])
        for n, future in enumerate(futures):
            future.add_done_callback(lambda _f, n=n: log.append(("answered", n)))
        assert [future.result(timeout=30) for future in futures] == list(range(10))
        assert _sync_level(store) == FULL  # as a call from another thread finds it
        # Each commit is durable before its caller hears back: committed with FULL, or an
        # fsync of the WAL between its commit and its answer.
        for n in range(10):
            committed = next(i for i, e in enumerate(log) if e[:2] == ("commit", n))
            answered = next(i for i, e in enumerate(log) if e == ("answered", n))
            assert log[committed][2] == FULL or ("fsync",) in log[committed:answered]
        # ... and the ten queued together were made durable by one fsync, not ten.
        assert sum(1 for e in log if e == ("fsync",)) == 1
        assert all(e[2] == NORMAL for e in log if e[0] == "commit")
        assert len(store.conversation_ids()) == 10


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


def test_a_failed_flush_fails_the_batchs_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(group_commit.os, "fsync", fsync)
    with SQLiteStore(tmp_path / "s.db") as store:
        futures = _queue_behind_a_gate(store, [lambda: store.append("c", "user", "secret body")])
        with pytest.raises(StoreError) as raised:
            futures[0].result(timeout=30)
        assert "write-ahead log" in str(raised.value)
        assert "secret body" not in str(raised.value)
        assert _sync_level(store) == FULL


def test_reads_only_need_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[Any, ...]] = []
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("c", "user", "one")
        FsyncLog(log, monkeypatch)
        futures = _queue_behind_a_gate(store, [lambda: store.load("c") for _ in range(3)])
        assert all(len(f.result(timeout=30).turns) == 1 for f in futures)
    assert log == []


def test_a_normal_durability_store_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[tuple[Any, ...]] = []
    FsyncLog(log, monkeypatch)
    with SQLiteStore(tmp_path / "s.db", durability="normal") as store:
        futures = _queue_behind_a_gate(
            store, [lambda: (store.append("c", "user", "x"), _sync_level(store))[1]]
        )
        assert futures[0].result(timeout=30) == NORMAL
    assert log == []


def test_a_job_closing_its_store_ends_the_batch_cleanly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    futures = _queue_behind_a_gate(store, [lambda: store.append("c", "user", "kept"), store.close])
    futures[0].result(timeout=30)
    futures[1].result(timeout=30)
    with SQLiteStore(tmp_path / "s.db") as reopened:
        assert [t.body for t in reopened.load("c").turns] == ["kept"]


def test_a_job_closing_its_store_still_syncs_the_batchs_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With another connection on the file, the close's checkpoint leaves the WAL in place:
    # the batch's commits (written at NORMAL) are synced before their callers hear back.
    path = tmp_path / "s.db"
    log: list[tuple[Any, ...]] = []
    with SQLiteStore(path) as other:
        other.append("other", "user", "keeps the file open")
        store = SQLiteStore(path)

        def append() -> None:
            store.append("c", "user", "kept")
            log.append(("commit", _sync_level(store)))

        FsyncLog(log, monkeypatch)
        futures = _queue_behind_a_gate(store, [append, store.close])
        futures[0].add_done_callback(lambda _f: log.append(("answered",)))
        futures[0].result(timeout=30)
        futures[1].result(timeout=30)
        assert ("commit", NORMAL) in log
        committed = log.index(("commit", NORMAL))
        assert ("fsync",) in log[committed : log.index(("answered",))]
        assert [t.body for t in other.load("c").turns] == ["kept"]
