"""Checking conversations against their re-hashed sources, run by run, through one read-only
connection: the current summaries to check (sorted as SQLite sorts their keys), runs of about
`batch_turns` cited turns, each read in one snapshot (packed by column in a UTF-8 database,
else row by row; the reads are `ledgerfold.store._batch_reads`) and checked by the native core
detached from the interpreter. Shared by the worker threads of `ledgerfold._revalidate_workers`."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ledgerfold import _native
from ledgerfold import _sealed as sealed
from ledgerfold._revalidate_audit import Audit, audit_leftovers, audit_run
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store import _summaries as summaries
from ledgerfold.store._current_summaries import current_summaries
from ledgerfold.store._rows import DAMAGED
from ledgerfold.store._sqlite_errors import quotes_stored_data

_log = logging.getLogger("ledgerfold.revalidate")

Job = batch_reads.Job
# (conversation_id, summary_id, reason | None, turn_id | None)
Verdict = tuple[str, str, str | None, str | None]


#: Python's codec of each text encoding SQLite may store text in (`PRAGMA encoding`).
_CODECS = {"UTF-8": "utf-8", "UTF-16le": "utf-16-le", "UTF-16be": "utf-16-be"}


def sqlite_order(job: Job, encoding: str = "UTF-8") -> tuple[int, Any]:
    """SQLite's order of a conversation key (BINARY collation): NULL, text, then blobs. Text
    compares by the bytes it is stored as: in UTF-8, code point order, Python's order of
    `str`; in UTF-16 (`encoding`, the database's), not (little-endian bytes compare the low
    byte first, and big-endian ones put an astral character before U+E000-U+FFFF). (A
    column of TEXT affinity stores numbers as text.)"""
    key: object = job[0]
    if key is None:
        return (0, "")
    if isinstance(key, str):
        if encoding == "UTF-8":
            return (1, key)
        return (1, key.encode(_CODECS[encoding], "surrogatepass"))
    return (2, key)


def key_order(key: object, encoding: str) -> tuple[int, bytes]:
    """`sqlite_order` of any stored key, one a damaged record may hold too: text (also text
    that is not UTF-8) by its bytes, then blobs; a number (stored by another tool) as its
    text."""
    if key is None:
        return (0, b"")
    if isinstance(key, batch_reads.NotUtf8):
        return (1, key.raw)
    if isinstance(key, (bytes, bytearray, memoryview)):
        return (2, bytes(key))
    return (1, str(key).encode(_CODECS[encoding], "surrogatepass"))


def current_jobs(conn: sqlite3.Connection) -> list[Job]:
    """Every current summary that can be checked (see `jobs_and_damage`)."""
    return jobs_and_damage(conn)[0]


_CONVERSATION_MISMATCH = "conversation-mismatch"


def jobs_and_damage(conn: sqlite3.Connection) -> tuple[list[Job], list[Verdict]]:
    """Every current summary to check and the verdicts of those that cannot be (see
    `jobs_damage_and_keys`)."""
    jobs, damaged, _ = jobs_damage_and_keys(conn)
    return jobs, damaged


def jobs_damage_and_keys(
    conn: sqlite3.Connection,
) -> tuple[list[Job], list[Verdict], list[int]]:
    """Every current summary to check, sorted by conversation key as SQLite sorts it (in
    the database's encoding): runs read contiguous key ranges (`BETWEEN` the first and last
    key), and the workers' shards ranges of keys. A record damaged in
    storage (no text ID or fingerprint; any column, its text or `through_sequence`
    included, stored as text that is not UTF-8; a field the store's envelope refuses: a
    record the store cannot read, `summaries.readable_record`) cannot be checked: it is a
    `damaged-record` verdict, the store's, not a crash; nor is one whose own conversation
    is not the one pointing at it: it is
    `conversation-mismatch` (SPEC §6), unchecked further. Nor is one whose conversation key
    is not UTF-8 text (a blob, or `NotUtf8`), or in a UTF-16 file holds U+FFFE or U+FFFF
    (bound, SQLite makes it U+FFFD: `batch_reads.unbindable`): no API call can name that
    conversation, so its summary is never served; it is `damaged-record` too, never a run's
    bound, and the audit hashes its turns.
    Returns the jobs, those verdicts and the table keys of their summaries."""
    jobs: list[Job] = []
    damaged: list[Verdict] = []
    keys: list[int] = []
    encoding: str = conn.execute("PRAGMA encoding").fetchone()[0]
    for job, own, readable in current_summaries(conn, summaries.readable_record):
        verdict = record_verdict(job, own, readable, encoding)
        if verdict is None:
            jobs.append(job)
            continue
        damaged.append(verdict)
        keys.append(job[1])
    # By conversation key, as the checked ones are: the order is the table scan's otherwise.
    damaged.sort(key=lambda verdict: key_order(verdict[0], encoding))
    if encoding == "UTF-8" and all(type(job[0]) is str for job in jobs):
        jobs.sort()  # unique text keys: the tuples sort by them
    else:
        jobs.sort(key=lambda job: sqlite_order(job, encoding))
    return jobs, damaged, keys


#: The reasons `record_verdict` gives: a current summary that is not checked against its
#: sources at all (nothing is hashed for it).
RECORD_REASONS = (DAMAGED, _CONVERSATION_MISMATCH)


def record_verdict(job: Job, own: bool, readable: bool, encoding: str = "UTF-8") -> Verdict | None:
    """The verdict of a current summary that cannot be checked against its sources, or None
    when it is to be checked: the one rule of the command and of the Parquet export (which
    records it for `ledgerfold.dask`). `job` as `current_summaries` lists it (the pointing
    conversation's key first), `own` whether the record's own conversation is that one,
    `readable` whether the store reads the record (`summaries.readable_record`), `encoding`
    the database's text encoding (`PRAGMA encoding`)."""
    bound: object = job[5]
    if (
        not (isinstance(job[2], str) and isinstance(job[3], str) and isinstance(job[4], int))
        or isinstance(bound, batch_reads.NotUtf8)
        or not readable
    ):
        return (job[0], job[2] if isinstance(job[2], str) else "?", DAMAGED, None)
    if not own:
        return (job[0], job[2], _CONVERSATION_MISMATCH, None)
    if not isinstance(job[0], str) or (encoding != "UTF-8" and batch_reads.unbindable(job[0])):
        return (job[0], job[2], DAMAGED, None)
    return None


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
    with batch_reads.snapshot(conn):
        return _check(conn, run, threads, utf8=utf8, packed=packed, uncited=False)[0]


def _check(
    conn: sqlite3.Connection,
    run: list[Job],
    threads: int,
    *,
    utf8: bool,
    packed: bool = True,
    uncited: bool,
) -> tuple[Any, bool | None]:
    """`check_run` inside the caller's snapshot, with how it read the run: True when each
    conversation up to its summary's `through_sequence`, False when whole, None when by
    rows. With `uncited` (packed reads), each verdict carries the sequences of the rows it
    read and found uncited (see `_native.revalidate_columns`)."""
    summaries = [(job[0], job[1], job[2], job[3]) for job in run]
    if utf8 and packed:
        checked = _check_packed(conn, run, summaries, threads, uncited=uncited)
        if checked is not None:
            return checked
        _log.debug("revalidation: packed rows did not line up; reading by rows")
    rows = batch_reads.turn_rows(conn, run, utf8=utf8)
    sources = batch_reads.source_rows(conn, run, utf8=utf8)
    return _native.revalidate_flat(rows, sources, summaries, threads), None


_SOURCE_MISSING = "source-missing"


def _check_packed(
    conn: sqlite3.Connection,
    run: list[Job],
    summaries: list[tuple[str, int, str, str]],
    threads: int,
    *,
    uncited: bool,
) -> tuple[Any, bool] | None:
    """The packed check of a run (inside the caller's snapshot) and whether it was read up
    to each summary's `through_sequence`, or None when the packing does not line up. Turns
    are read up to that bound; should a cited turn be missing there (retracted, or its
    sequence no longer what it was), the run is read again whole, so that the verdict is
    the one every live turn gives."""
    try:
        source_columns = batch_reads.packed_sources(conn, run)
        for bounded in (True, False):
            turn_columns = batch_reads.packed_turns(conn, run, bounded=bounded)
            checked = _native.revalidate_columns(
                turn_columns, source_columns, summaries, threads, uncited=uncited
            )
            if checked is None:
                return None
            if not any(verdict[2] == _SOURCE_MISSING for verdict in checked[0]):
                return checked, bounded
    except sqlite3.DataError:  # a run over SQLite's length limit: read it by rows
        return None
    except sqlite3.OperationalError as error:
        if not quotes_stored_data(error):
            raise
        return None  # a number stored as text that is not UTF-8: read by rows
    return checked, False


def _unseal(conn: sqlite3.Connection, verdict: Any) -> Verdict:
    """A `source-missing` verdict redone with the summary's purged sources sealed."""
    conversation_id, summary_id, reason, turn_id = verdict[:4]
    if reason != sealed.SOURCE_MISSING:
        return conversation_id, summary_id, reason, turn_id
    rechecked = sealed.recheck(
        conversation_id,
        summary_id,
        *batch_reads.sealed_inputs(conn, conversation_id, summary_id),
    )
    if rechecked is None:
        return conversation_id, summary_id, reason, turn_id
    return (conversation_id, summary_id, *rechecked)


_EMPTY_SOURCE = "empty-source"


def _still_there(conn: sqlite3.Connection, run: list[Job], verdicts: list[Verdict]) -> list[bool]:
    """Whether each summary of the run is still in the database in the run's snapshot (the
    jobs were listed before it): one deleted meanwhile (its conversation deleted, or the
    version pruned) has no sources left, which the check calls `empty-source`, and is no
    longer a summary to report. Asked only of those verdicts."""
    return [
        verdict[2] != _EMPTY_SOURCE
        or conn.execute(
            "SELECT 1 FROM summaries WHERE pk = ? AND id = ?", (job[1], job[2])
        ).fetchone()
        is not None
        for job, verdict in zip(run, verdicts, strict=True)
    ]


#: A shard's range of conversation keys, `[low, high)` (None: unbounded on that side).
KeyRange = tuple[object, object]

_DISTINCT = "SELECT DISTINCT conversation_id FROM turns"


def _conversations_in(conn: sqlite3.Connection, keys: KeyRange) -> list[object]:
    """Every conversation key of the `turns` table in the range (from its index); a key
    stored as text that is not UTF-8 comes back as `NotUtf8`."""
    low, high = keys
    clauses, parameters = [], []
    if low is not None:
        clauses.append("conversation_id >= ?")
        parameters.append(low)
    if high is not None:
        clauses.append("conversation_id < ?")
        parameters.append(high)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    return [row[0] for row in batch_reads.lenient_rows(conn, _DISTINCT + where, parameters)]


def check_jobs(
    path: str,
    jobs: list[Job],
    batch_turns: int,
    threads: int,
    progress: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
    *,
    uri: str | None = None,
    keys: KeyRange | None = None,
    damaged: Sequence[int] = (),
) -> tuple[list[Verdict], int, int, Audit]:
    """Check `jobs` run by run through one read-only connection (opened with `uri`, the one
    its siblings share); returns early (with what it has) once `stop` is set, and sets it
    when it fails, so its siblings stop too. Each run's split check and digest audit
    (`ledgerfold._revalidate_audit`) follow its check in the same snapshot; with `keys`,
    the conversations in that range that have no job (`damaged`: the table keys of damaged current
    summaries) are audited after the runs."""
    conn = batch_reads.open_readonly(path, uri)
    verdicts: list[Verdict] = []
    audit = Audit()
    turns_hashed = bytes_hashed = 0
    try:
        utf8 = batch_reads.is_utf8(conn)
        for run in runs(jobs, batch_turns):
            if stop is not None and stop.is_set():
                break
            with batch_reads.snapshot(conn):
                (found, turns, size), bounded = _check(conn, run, threads, utf8=utf8, uncited=True)
                uncited = None if bounded is None else [verdict[4] for verdict in found]
                unsealed = [_unseal(conn, verdict) for verdict in found]
                checked, run_audit = audit_run(
                    conn, run, unsealed, uncited, bool(bounded), threads, utf8=utf8
                )
                there = _still_there(conn, run, checked)
            verdicts.extend(verdict for verdict, kept in zip(checked, there, strict=True) if kept)
            audit.add(run_audit)
            turns_hashed += turns
            bytes_hashed += size
            if progress is not None:
                progress(len(run))
        if keys is not None and not (stop is not None and stop.is_set()):
            checked_keys = {job[0] for job in jobs}
            with batch_reads.snapshot(conn):
                leftovers = [
                    key for key in _conversations_in(conn, keys) if key not in checked_keys
                ]
            audit.add(audit_leftovers(conn, leftovers, damaged, utf8=utf8))
    except BaseException:
        if stop is not None:
            stop.set()
        raise
    finally:
        conn.close()
    return verdicts, turns_hashed, bytes_hashed, audit
