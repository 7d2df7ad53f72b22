"""A process forked while the store's worker thread is inside a store call (docs/threading.md):
only the forking thread exists in the child, so the store's lock, held by the parent's
worker, was never released there and the child blocked at its first call of that store or
at its `close()`. The child's inherited store now refuses calls (`StoreError`: open it
again), its `close()` returns, and stores the child opens work, sync and async; so does a
compactor's due check whose count another thread held. Real forks, real files; the child
reports through its exit code only."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._worker import worker_for

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")

POLICY = lf.CompactionPolicy("fork-v1", keep_tail=2, min_new_turns=1)
NET = 30  # a safety net for a failing test, never a timing the test relies on


def _exit_code_of_child(
    child: Callable[[], int], after_fork: Callable[[], None] = lambda: None
) -> int:
    """Fork; the child runs `child` (its exit code; a hang ends it after `NET` s, not the
    test run); the parent waits for it, then runs `after_fork` whatever happened."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(NET)
            code = child()
        finally:
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        after_fork()
    return os.waitstatus_to_exitcode(status)


def _child(parent: lf.SQLiteStore, parent_path: Path, own_path: Path) -> int:
    try:
        parent.load("c")
        return 3  # the inherited store answered from a connection caught mid-transaction
    except lf.StoreError as error:
        if "forked" not in str(error):
            return 4
    parent.close()  # returns: nothing of the parent's is waited for
    own = lf.SQLiteStore(own_path)
    own.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    compactor = lf.Compactor(own, POLICY)
    if not asyncio.run(asyncio.wait_for(compactor.acompact("c"), NET)).accepted:
        return 5
    if asyncio.run(compactor.acontext("c")).summary is None:
        return 6
    own.close()
    with lf.SQLiteStore(parent_path, read_only=True) as reopened:  # its committed turns
        return 0 if len(reopened.load("c").turns) == 1 else 7


def test_a_child_forked_while_the_worker_holds_the_store_lock_is_not_blocked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "parent.db"
    store = lf.SQLiteStore(path)
    store.append("c", "user", "before the fork")
    inside, release = threading.Event(), threading.Event()

    def held_write() -> None:  # a job in the middle of a write transaction
        with store._db.transaction(write=True, operation="append") as conn:
            conn.execute("UPDATE conversations SET revision = revision WHERE id = 'c'")
            inside.set()
            assert release.wait(NET)

    job = worker_for(store).submit(held_write)
    assert inside.wait(NET)
    code = _exit_code_of_child(lambda: _child(store, path, tmp_path / "child.db"), release.set)
    job.result(timeout=NET)
    assert code == 0
    assert len(store.load("c").turns) == 1  # the parent's store goes on as before
    store.close()


def test_a_store_idle_at_the_fork_works_in_the_child(tmp_path: Path) -> None:
    """A store no thread was using at the fork is left as it was: the child may use it."""
    store = lf.SQLiteStore(tmp_path / "idle.db")
    store.append("c", "user", "before the fork")
    assert _exit_code_of_child(lambda: 0 if len(store.load("c").turns) == 1 else 2) == 0
    store.close()


def test_a_compactor_whose_due_count_was_in_use_at_the_fork_works_in_the_child(
    tmp_path: Path,
) -> None:
    """Another thread inside the compactor's due check at the fork (its token count's lock
    held): the child's due check blocked on that lock, never released there."""
    store = lf.SQLiteStore(tmp_path / "due.db")
    store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    compactor = lf.Compactor(store, lf.CompactionPolicy("fork-v1", keep_tail=2, trigger_tokens=1))
    inside, release = threading.Event(), threading.Event()

    def counting() -> None:
        with compactor._due_tokens._lock:
            inside.set()
            assert release.wait(NET)

    thread = threading.Thread(target=counting)
    thread.start()
    assert inside.wait(NET)

    def released() -> None:
        release.set()
        thread.join(NET)

    assert _exit_code_of_child(lambda: 0 if compactor.is_due("c") else 2, released) == 0
    assert compactor.is_due("c")  # the parent's goes on as before
    store.close()
