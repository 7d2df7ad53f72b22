"""Checking conversations against their re-hashed sources, run by run, through one read-only
connection: the current summaries to check (sorted as SQLite sorts their keys), runs of about
`batch_turns` cited turns, each read in one snapshot (packed by column in a UTF-8 database,
else row by row; the reads are `ledgerfold.store._batch_reads`) and checked by the native core
detached from the interpreter. Shared by the worker threads of `ledgerfold._revalidate_workers`."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ledgerfold import _native
from ledgerfold import _sealed as sealed
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store._rows import DAMAGED

_log = logging.getLogger("ledgerfold.revalidate")

Job = batch_reads.Job
# (conversation_id, summary_id, reason | None, turn_id | None)
Verdict = tuple[str, str, str | None, str | None]


def sqlite_order(job: Job) -> tuple[int, Any]:
    """SQLite's order of a conversation key (BINARY collation): NULL, text, then blobs. Text
    compares by UTF-8 bytes, which is code point order, Python's order of `str`. (A column
    of TEXT affinity stores numbers as text.)"""
    key: object = job[0]
    if key is None:
        return (0, "")
    return (1, key) if isinstance(key, str) else (2, key)


def current_jobs(conn: sqlite3.Connection) -> list[Job]:
    """Every current summary that can be checked (see `jobs_and_damage`)."""
    return jobs_and_damage(conn)[0]


def jobs_and_damage(conn: sqlite3.Connection) -> tuple[list[Job], list[Verdict]]:
    """Every current summary to check, sorted by conversation key as SQLite sorts it: runs
    read contiguous key ranges (`BETWEEN` the first and last key). A record damaged in
    storage (no text ID or fingerprint) cannot be checked: it is a `damaged-record` verdict,
    not a crash."""
    jobs: list[Job] = []
    damaged: list[Verdict] = []
    for job in batch_reads.current_summaries(conn):
        if isinstance(job[2], str) and isinstance(job[3], str) and isinstance(job[4], int):
            jobs.append(job)
        else:
            damaged.append((job[0], job[2] if isinstance(job[2], str) else "?", DAMAGED, None))
    if all(type(job[0]) is str for job in jobs):  # unique text keys: the tuples sort by them
        jobs.sort()
    else:
        jobs.sort(key=sqlite_order)
    return jobs, damaged


def runs(jobs: list[Job], batch_turns: int) -> Iterator[list[Job]]:
    """Runs of conversations (by ID) with about `batch_turns` cited turns each (a larger
    conversation is a run of its own) and at most `MAX_RUN_SUMMARIES` summaries."""
    start = 0
    while start < len(jobs):
        end, cited = start, 0
        while (
            end < len(jobs)
            and end - start < batch_reads.MAX_RUN_SUMMARIES
            and (end == start or cited + jobs[end][4] <= batch_turns)
        ):
            cited += jobs[end][4]
            end += 1
        yield jobs[start:end]
        start = end


def check_run(
    conn: sqlite3.Connection, run: list[Job], threads: int, *, utf8: bool, packed: bool = True
) -> Any:
    """Check one run of conversations, read in one snapshot: packed in a UTF-8 database
    (lengths count bytes of the stored text), else, or when the packing does not line up,
    row by row."""
    summaries = [(job[0], job[1], job[2], job[3]) for job in run]
    with batch_reads.snapshot(conn):
        if utf8 and packed:
            checked = _check_packed(conn, run, summaries, threads)
            if checked is not None:
                return checked
            _log.debug("revalidation: packed rows did not line up; reading by rows")
        rows = batch_reads.turn_rows(conn, run, utf8=utf8)
        sources = batch_reads.source_rows(conn, run, utf8=utf8)
    return _native.revalidate_flat(rows, sources, summaries, threads)


_SOURCE_MISSING = "source-missing"


def _check_packed(
    conn: sqlite3.Connection,
    run: list[Job],
    summaries: list[tuple[str, int, str, str]],
    threads: int,
) -> Any:
    """The packed check of a run (inside the caller's snapshot), or None when the packing
    does not line up. Turns are read up to each summary's `through_sequence`; should a cited
    turn be missing there (retracted, or its sequence no longer what it was), the run is read
    again whole, so that the verdict is the one every live turn gives."""
    try:
        source_columns = batch_reads.packed_sources(conn, run)
        for bounded in (True, False):
            turn_columns = batch_reads.packed_turns(conn, run, bounded=bounded)
            checked = _native.revalidate_columns(turn_columns, source_columns, summaries, threads)
            if checked is None or not any(verdict[2] == _SOURCE_MISSING for verdict in checked[0]):
                return checked
    except sqlite3.DataError:  # a run over SQLite's length limit: read it by rows
        return None
    return checked


def _unseal(conn: sqlite3.Connection, verdict: Verdict) -> Verdict:
    """A `source-missing` verdict redone with the summary's purged sources sealed."""
    conversation_id, summary_id, reason, _ = verdict
    if reason != sealed.SOURCE_MISSING:
        return verdict
    rechecked = sealed.recheck(
        conversation_id,
        summary_id,
        *batch_reads.sealed_inputs(conn, conversation_id, summary_id),
    )
    return verdict if rechecked is None else (conversation_id, summary_id, *rechecked)


def check_jobs(
    path: str,
    jobs: list[Job],
    batch_turns: int,
    threads: int,
    progress: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
    *,
    uri: str | None = None,
) -> tuple[list[Verdict], int, int]:
    """Check `jobs` run by run through one read-only connection (opened with `uri`, the one
    its siblings share); returns early (with what it has) once `stop` is set, and sets it
    when it fails, so its siblings stop too."""
    conn = batch_reads.open_readonly(path, uri)
    verdicts: list[Verdict] = []
    turns_hashed = bytes_hashed = 0
    try:
        utf8 = batch_reads.is_utf8(conn)
        for run in runs(jobs, batch_turns):
            if stop is not None and stop.is_set():
                break
            found, turns, size = check_run(conn, run, threads, utf8=utf8)
            verdicts.extend(_unseal(conn, verdict) for verdict in found)
            turns_hashed += turns
            bytes_hashed += size
            if progress is not None:
                progress(len(run))
    except BaseException:
        if stop is not None:
            stop.set()
        raise
    finally:
        conn.close()
    return verdicts, turns_hashed, bytes_hashed
