"""Revalidation's worker threads: workers and batch sizes do not change the verdicts; the
workers are threads of this process; a failing worker or an interrupt stops them all and
marks nothing; a forked child and each calling thread get their own hashing pool; workers
opening side by side neither fail nor leave WAL files."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    SQLiteStore,
    _native,
    revalidate,
)
from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold.revalidate import revalidate_database

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))


from revalidate_support import (  # noqa: E402
    POLICY,
    ROW,
    SUMMARY,
    _current_jobs,
    native_verdicts,
    oracle,
    oracle_ids,
    tamper,
)


def test_workers_and_batches_do_not_change_the_verdicts(db: Path) -> None:
    targets = tamper(db, 20, seed=7)
    expected = oracle(db)
    assert sum(reason is not None for reason in expected.values()) == len(targets)
    for options in (
        {"workers": 1},
        {"workers": 2},
        {"workers": 3, "batch_turns": 1},
        {"threads": 2},
    ):
        assert native_verdicts(db, **options) == expected, options


def _database_dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_workers_are_threads_of_this_process_and_one_keeps_to_the_caller(db: Path) -> None:
    """`workers=1` checks on the calling thread (one core); `workers=2` on two threads of
    this process, each reporting its own batches; the default is one per available core."""
    summaries = sum(1 for _ in oracle_ids(db))
    for workers, expected in ((1, {threading.main_thread().name}), (2, None)):
        seen: list[tuple[str, int]] = []

        def progress(done: int, seen: list[tuple[str, int]] = seen) -> None:
            seen.append((threading.current_thread().name, done))

        report = revalidate_database(db, workers=workers, batch_turns=50, progress=progress)
        assert report.workers == workers
        assert sum(done for _, done in seen) == report.summaries_checked == summaries
        names = {name for name, _ in seen}
        if expected is not None:
            assert names == expected
        else:
            assert len(names) == 2 and all(n.startswith("ledgerfold-worker") for n in names)
    assert revalidate_database(db).workers == revalidate.available_cores()


@pytest.mark.parametrize(
    ("workers", "failing"),
    [(1, "MainThread"), (2, "ledgerfold-worker_0"), (2, "ledgerfold-worker_1")],
)
def test_a_failing_worker_stops_the_run_and_marks_nothing(
    db: Path, workers: int, failing: str
) -> None:
    """Whichever worker fails (the first shard's or a later one's), the others stop after
    the batch they are on, the error reaches the caller and nothing is marked."""
    tamper(db, 1, seed=5)
    before = _database_dump(db)
    assert len(list(revalidate_runs.runs(_current_jobs(db), 50))) > 20
    after: list[int] = []  # batches reported once the failure happened
    failed = threading.Event()

    def progress(done: int) -> None:
        if threading.current_thread().name == failing:
            failed.set()
            raise RuntimeError("the progress display went away")
        if failed.is_set():
            after.append(done)

    with pytest.raises(RuntimeError, match="went away"):
        revalidate_database(db, workers=workers, batch_turns=50, progress=progress)
    assert failed.is_set() and len(after) <= 2
    assert _database_dump(db) == before
    assert revalidate_database(db, workers=workers).stale == 1


class _Interrupted(Exception):
    pass


def test_an_interrupt_while_workers_run_stops_them_and_marks_nothing(db: Path) -> None:
    """Ctrl-C while workers run, delivered to a worker's thread (a terminal's SIGINT goes to
    any thread): the caller's thread handles it at once, the workers stop after the batch
    they are on, the interrupt propagates and nothing is marked."""
    tamper(db, 1, seed=9)
    before = _database_dump(db)
    batches = len(list(revalidate_runs.runs(_current_jobs(db), 50)))
    done: list[int] = []
    handled = threading.Event()
    seen: list[bool] = []  # whether the main thread handled the signal while workers ran

    def progress(count: int) -> None:
        done.append(count)
        if len(done) == 1:
            # To this worker's thread, as a terminal's Ctrl-C may be: the handler runs in
            # the main thread, once it wakes.
            signal.raise_signal(signal.SIGINT)
            seen.append(handled.wait(timeout=10))

    def interrupted(signum: int, frame: object) -> None:
        handled.set()
        raise _Interrupted

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        with pytest.raises(_Interrupted):
            revalidate_database(db, workers=2, batch_turns=50, progress=progress)
    finally:
        signal.signal(signal.SIGINT, previous)
    # Handled while the workers ran; then the first batch, and at most the batch each
    # worker was on.
    assert seen == [True]
    assert batches > 20 and len(done) <= 4
    assert _database_dump(db) == before


def _revalidate_small(threads: int) -> int:
    verdicts, turns, _ = _native.revalidate_flat([ROW], [(1, "a")], [SUMMARY], threads)
    return turns + len(verdicts)


def test_a_forked_child_gets_its_own_thread_pool() -> None:
    import multiprocessing

    assert _revalidate_small(2) == 2  # the parent now has a 2-thread pool
    with multiprocessing.get_context("fork").Pool(1) as pool:
        # Reusing the parent's pool in the child would wait forever for absent threads.
        assert pool.apply_async(_revalidate_small, (2,)).get(timeout=60) == 2


# Run in a fresh interpreter: pools of threads that other tests started are torn down
# asynchronously when those threads end, so counting this process's threads would race them.
_POOL_SCENARIO = """
import sys, threading, time
from pathlib import Path
from ledgerfold import _native

def pool_threads():
    tasks = Path("/proc/self/task")
    names = [(task / "comm").read_text() for task in tasks.iterdir()]
    return sum(name.startswith("ledgerfold-reva") for name in names)

threads = int(sys.argv[1])
ready, release = threading.Barrier(3), threading.Event()

def check():
    row = ("c", "a", 1, "user", b"hi", 0, None, None, None)
    summary = ("c", 1, "s", "lf1:" + "0" * 64)
    verdicts, turns, _ = _native.revalidate_flat([row], [(1, "a")], [summary], threads)
    assert turns + len(verdicts) == 2
    ready.wait(timeout=60)
    release.wait(timeout=60)  # keep this thread, and so any pool of its own, alive

workers = [threading.Thread(target=check) for _ in range(2)]
for worker in workers:
    worker.start()
ready.wait(timeout=60)
# A new thread names itself once it runs, so a pool thread may not carry its name yet:
# wait (bounded) for the expected count, then let any late extra thread show up too.
expected = int(sys.argv[2])
deadline = time.monotonic() + 20
while pool_threads() < expected and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.2)
print(pool_threads())
release.set()
for worker in workers:
    worker.join(timeout=60)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread names need /proc")
@pytest.mark.parametrize(("threads", "pool_threads"), [(1, 0), (2, 4)])
def test_each_calling_thread_hashes_on_its_own_threads(threads: int, pool_threads: int) -> None:
    """With one hashing thread, each interpreter thread hashes inline, starting no pool (a
    pool thread would cost two wake-ups a batch); with two, each gets its own pool of two (a
    pool shared by the process would take their batches in turn)."""
    done = subprocess.run(
        [sys.executable, "-c", _POOL_SCENARIO, str(threads), str(pool_threads)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert int(done.stdout) == pool_threads


def test_workers_opening_side_by_side_neither_fail_nor_leave_wal_files(tmp_path: Path) -> None:
    """The workers' read-only connections share the URI of the first, which stays open
    until they close: deciding it per thread from the WAL files a sibling was creating or
    deleting failed ("unable to open database file", a CI run) or left the files behind."""
    path = tmp_path / "small.db"
    with SQLiteStore(path) as store:
        compactor = Compactor(
            store, CompactionPolicy(POLICY, min_new_turns=1, keep_tail=1), ExtractiveSummarizer()
        )
        for n in range(8):
            store.append_many(f"c{n}", [{"role": "user", "body": f"turn {i}"} for i in range(4)])
            compactor.compact(f"c{n}", force=True)
    for _ in range(150):  # the race showed within 6 to 106 runs
        report = revalidate_database(path, workers=4)
        assert report.summaries_checked == report.current == 8
        assert sorted(p.name for p in tmp_path.iterdir()) == ["small.db"]
