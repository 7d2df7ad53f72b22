"""Real syncs of the WAL, counted and failed: `tests/native/wal_sync_shim.c`, compiled with
the C compiler the Rust build needs (`cc`, or `$CC`), preloaded into a subprocess that runs
one of the scenarios below against a real file `SQLiteStore`. The shim writes a line
`sync` to the scenario's log for each fsync/fdatasync of a `-wal` file (SQLite's own, not a
Python call), and fails those syncs with EIO while the fail-flag file exists; the scenario
writes its own lines to the same log, in order. Used by `test_group_commit_sync.py`.

    python tests/wal_sync.py <scenario> <directory>
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHIM_SOURCE = HERE / "native" / "wal_sync_shim.c"
SCENARIOS: dict[str, Callable[[Path], None]] = {}


def build_shim(directory: Path) -> Path:
    """The shim, compiled into `directory`."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) to build tests/native/wal_sync_shim.c")
    shim = directory / "wal_sync_shim.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(shim), str(SHIM_SOURCE), "-ldl"],
        check=True,
        capture_output=True,
    )
    return shim


def run(
    shim: Path, scenario: str, directory: Path, script: Path | None = None, *, killed: bool = False
) -> list[str]:
    """Run the scenario (of `script`, default this module) in a subprocess with the shim
    preloaded; its log's lines. The flag files the shim reads are in `directory`: `fail`
    (the WAL's syncs fail), `fail_db` (the database file's syncs fail), `full` (writes past
    the offset it holds fail with ENOSPC), `kill` (the process kills itself at a write
    to the WAL). `killed`: the scenario ends killed (SIGKILL), not returning."""
    env = {
        **os.environ,
        "LD_PRELOAD": str(shim),
        "WAL_SYNC_LOG": str(directory / "log"),
        "WAL_SYNC_FAIL": str(directory / "fail"),
        "WAL_SYNC_FAIL_DB": str(directory / "fail_db"),
        "WAL_SYNC_FULL": str(directory / "full"),
        "WAL_SYNC_KILL": str(directory / "kill"),
    }
    done = subprocess.run(
        [sys.executable, str(script or Path(__file__)), scenario, str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == (-signal.SIGKILL if killed else 0), done.stderr
    return (directory / "log").read_text().splitlines()


# -- the scenarios (in the subprocess) -------------------------------------------------------


def _note(directory: Path, *words: Any) -> None:
    with open(directory / "log", "a") as log:
        log.write(" ".join(str(word) for word in words) + "\n")


def _queued(store: Any, jobs: list[Callable[[], Any]]) -> list[Future[Any]]:
    """The jobs queued together on the store's worker (behind a gate): one batch."""
    from ledgerfold._worker import worker_for

    gate = threading.Event()
    worker = worker_for(store)
    worker.submit(gate.wait, 30)
    futures = [worker.submit(job) for job in jobs]
    gate.set()
    return futures


def _scenario(function: Callable[[Path], None]) -> Callable[[Path], None]:
    SCENARIOS[function.__name__] = function
    return function


@_scenario
def batch(directory: Path) -> None:
    """Ten appends queued together on a `"full"` store; each caller's answer noted."""
    from ledgerfold import SQLiteStore

    with SQLiteStore(directory / "s.db") as store:
        store.append("seed", "user", "opens the WAL")
        _note(directory, "start")
        futures = _queued(
            store, [functools.partial(store.append, f"c{n}", "user", f"m{n}") for n in range(10)]
        )
        answered: list[int] = []
        all_answered = threading.Event()

        def answer(n: int, _future: Future[Any]) -> None:
            _note(directory, "answered", n)  # on the worker thread, as the caller hears
            answered.append(n)
            if len(answered) == len(futures):
                all_answered.set()

        for n, future in enumerate(futures):
            future.add_done_callback(functools.partial(answer, n))
        for future in futures:
            future.result(timeout=30)
        all_answered.wait(30)
        _note(directory, "end")


@_scenario
def reads(directory: Path) -> None:
    """Three reads queued together on a `"full"` store."""
    from ledgerfold import SQLiteStore

    with SQLiteStore(directory / "s.db") as store:
        store.append("c", "user", "one")
        _note(directory, "start")
        for future in _queued(store, [lambda: store.load("c") for _ in range(3)]):
            future.result(timeout=30)
        _note(directory, "end")


@_scenario
def normal(directory: Path) -> None:
    """Appends queued together on a `"normal"` store."""
    from ledgerfold import SQLiteStore

    with SQLiteStore(directory / "s.db", durability="normal") as store:
        store.append("seed", "user", "opens the WAL")
        _note(directory, "start")
        for future in _queued(store, [lambda: store.append("c", "user", "x")] * 3):
            future.result(timeout=30)
        _note(directory, "end")


@_scenario
def failing(directory: Path) -> None:
    """A batch whose WAL sync fails: what its callers hear, and what is kept."""
    from ledgerfold import SQLiteStore, StoreError

    path = directory / "s.db"
    with SQLiteStore(path) as store:
        store.append("kept", "user", "before the batch")
        (directory / "fail").touch()
        futures = _queued(
            store,
            [
                lambda: store.append("kept", "user", "secret one"),
                lambda: store.append("other", "user", "secret two"),
            ],
        )
        for future in futures:
            try:
                future.result(timeout=30)
                _note(directory, "answered ok")
            except StoreError as error:
                _note(directory, "answered", json.dumps({"error": str(error)}))
        (directory / "fail").unlink()
        _note(directory, "seen", json.dumps([t.body for t in store.load("kept").turns]))
        _note(directory, "conversations", json.dumps(store.conversation_ids()))
    with SQLiteStore(path) as reopened:
        _note(directory, "reopened", json.dumps([t.body for t in reopened.load("kept").turns]))
        _note(directory, "conversations", json.dumps(reopened.conversation_ids()))
        reopened.append("kept", "user", "after")
        _note(directory, "after", json.dumps([t.body for t in reopened.load("kept").turns]))


@_scenario
def direct(directory: Path) -> None:
    """A call made outside the worker (its own transaction) whose WAL sync fails."""
    from ledgerfold import SQLiteStore, StoreError

    path = directory / "s.db"
    with SQLiteStore(path) as store:
        store.append("kept", "user", "before")
        (directory / "fail").touch()
        try:
            store.append_many("kept", [{"role": "user", "body": "secret"}] * 3)
            _note(directory, "answered ok")
        except StoreError as error:
            _note(directory, "answered", json.dumps({"error": str(error)}))
        (directory / "fail").unlink()
        _note(directory, "seen", json.dumps([t.body for t in store.load("kept").turns]))
        store.append("kept", "user", "after")
    with SQLiteStore(path) as reopened:
        _note(directory, "reopened", json.dumps([t.body for t in reopened.load("kept").turns]))


@_scenario
def closing(directory: Path) -> None:
    """A batch of an append and the store's close, while another store keeps the file
    open (the close's checkpoint then leaves the WAL in place)."""
    from ledgerfold import SQLiteStore

    path = directory / "s.db"
    with SQLiteStore(path) as other:
        other.append("other", "user", "keeps the file open")
        store = SQLiteStore(path)
        _note(directory, "start")
        futures = _queued(store, [lambda: store.append("c", "user", "kept"), store.close])
        futures[0].add_done_callback(lambda _f: _note(directory, "answered"))
        for future in futures:
            future.result(timeout=30)
        _note(directory, "kept", json.dumps([t.body for t in other.load("c").turns]))


if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](Path(sys.argv[2]))
