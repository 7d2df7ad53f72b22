"""The worker threads of a deep revalidation: the current summaries are split into shards of
contiguous conversation keys, one per worker thread, each checked through its own read-only
connection (`ledgerfold._revalidate_runs`); the verdicts come back to the caller's thread, which
stays free to handle a Ctrl-C and stops the workers after the batch they are on."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold._revalidate_audit import Audit
from ledgerfold._revalidate_runs import Job, KeyRange, Verdict
from ledgerfold.store import _batch_reads as batch_reads

#: How often the caller's thread wakes while workers run (to handle signals).
_POLL_S = 0.05


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _shards(jobs: list[Job], count: int) -> list[list[Job]]:
    """Split jobs (sorted by conversation ID) into at most `count` contiguous runs of about
    equal cited turns, so each worker reads its own range of the tables."""
    total = sum(job[4] + 1 for job in jobs)
    shards: list[list[Job]] = [[]]
    done = 0
    for job in jobs:
        if done >= total * len(shards) / count and len(shards) < count:
            shards.append([])
        shards[-1].append(job)
        done += job[4] + 1
    return [shard for shard in shards if shard]


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) back until the block is done: starting a worker and recording
    it must not be split, or an interrupted caller could return while that worker still
    runs. Only the main thread receives signals, so elsewhere nothing is needed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # ignored, default, or not installed from Python
        yield
        return
    held: list[tuple[int, FrameType | None]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            previous(*held[0])


def check_all(
    path: str,
    workers: int,
    threads: int,
    batch_turns: int,
    progress: Callable[[int], None] | None,
    on_total: Callable[[int], None] | None = None,
) -> tuple[int, list[Verdict], int, int, Audit, int]:
    """How many conversations the database records, then every current summary's verdict
    (damaged records first), with the turns and bytes hashed and what the audit of the
    turns no verified summary covers found: one worker thread per shard, each through its
    own read-only connection, auditing its shard's range of conversation keys
    (`ledgerfold._revalidate_audit`); last, how many workers ran (at most `workers`: no
    more than there are shards, and one, the caller's thread, for one shard or none).

    The first connection stays open until every worker's has closed and they all share its
    URI (`batch_reads.open_readonly`)."""
    conn, uri = batch_reads.open_readonly_first(path)
    try:
        conversations = batch_reads.conversation_count(conn)
        checked = _check_shards(conn, path, uri, workers, threads, batch_turns, progress, on_total)
        return conversations, *checked
    finally:
        conn.close()


def _check_shards(
    conn: sqlite3.Connection,
    path: str,
    uri: str,
    workers: int,
    threads: int,
    batch_turns: int,
    progress: Callable[[int], None] | None,
    on_total: Callable[[int], None] | None,
) -> tuple[list[Verdict], int, int, Audit, int]:
    jobs, verdicts, damaged = revalidate_runs.jobs_damage_and_keys(conn)
    if on_total is not None:
        on_total(len(jobs))
    shards = _shards(jobs, workers)
    if len(shards) <= 1:
        found, turns_hashed, bytes_hashed, audit = revalidate_runs.check_jobs(
            path, jobs, batch_turns, threads, progress, uri=uri, keys=(None, None), damaged=damaged
        )
        return verdicts + found, turns_hashed, bytes_hashed, audit, 1
    # Shard i audits the conversation keys from its first job's up to the next shard's.
    keys: list[KeyRange] = [
        (
            None if index == 0 else shard[0][0],
            shards[index + 1][0][0] if index + 1 < len(shards) else None,
        )
        for index, shard in enumerate(shards)
    ]
    lock = threading.Lock()
    stop = threading.Event()
    results: list[tuple[list[Verdict], int, int, Audit] | None] = [None] * len(shards)
    errors: list[BaseException | None] = [None] * len(shards)

    def report_progress(done: int) -> None:
        if progress is not None:
            with lock:
                progress(done)

    def work(index: int) -> None:
        try:
            results[index] = revalidate_runs.check_jobs(
                path,
                shards[index],
                batch_turns,
                threads,
                report_progress,
                stop,
                uri=uri,
                keys=keys[index],
                damaged=damaged,
            )
        except BaseException as error:  # handed to the caller's thread
            errors[index] = error

    running: list[threading.Thread] = []
    try:
        with _interrupts_deferred():  # every started worker is in `running`
            for index in range(len(shards)):
                worker = threading.Thread(
                    target=work, args=(index,), name=f"ledgerfold-worker_{index}"
                )
                worker.start()
                running.append(worker)
        # Wake up now and then, so that a signal (Ctrl-C) is handled here, in the main
        # thread, without waiting for a whole shard.
        for worker in running:
            while worker.is_alive() and not stop.is_set():
                worker.join(_POLL_S)
    except BaseException:  # the caller was interrupted
        stop.set()  # the workers stop after the batch they are on
        raise
    finally:
        for worker in running:
            worker.join()
    for error in errors:  # in shard order
        if error is not None:
            raise error
    turns_hashed = bytes_hashed = 0
    audit = Audit()
    for result in results:
        assert result is not None  # every worker without an error stored its result
        found, turns, size, shard_audit = result
        verdicts.extend(found)
        turns_hashed += turns
        bytes_hashed += size
        audit.add(shard_audit)
    return verdicts, turns_hashed, bytes_hashed, audit, len(shards)
