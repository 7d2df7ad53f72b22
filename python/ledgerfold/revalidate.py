"""Deep batch revalidation of a ledgerfold SQLite database.

Every current summary is checked against its sources' *re-hashed* bodies: stored digests are
never trusted here (the per-call path trusts them; this is what keeps that honest). Each batch
of conversations is read in one snapshot as a single aggregate row, packed by column (the
database driver never makes a Python object per turn), and the native core unpacks it,
groups the rows, hashes and checks them detached from the interpreter.
`workers` threads of this process share the conversations, each reading its share through its
own read-only connection and checking it on its own core (SQLite's reads and the native check
both run without the GIL); the verdicts come back to the caller, which marks stale summaries
in one transaction.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerfold import _native, _validate
from ledgerfold.errors import InvalidInput
from ledgerfold.model import PROTECTION_REASONS, ROLES
from ledgerfold.store.schema import TURN_LIVE
from ledgerfold.store.sqlite import SQLiteStore

__all__ = ["RevalidationReport", "StaleSummary", "revalidate_database"]

_log = logging.getLogger("ledgerfold.revalidate")

# In table order (ORDER BY c.id would walk the ID index and look each row up, twice the
# time); `_current_jobs` sorts them as SQLite orders the keys.
_CURRENT = (
    "SELECT c.id, s.pk, s.id, s.source_fingerprint, s.source_count, s.through_sequence"
    " FROM conversations AS c JOIN summaries AS s ON s.pk = c.current_summary"
    " WHERE s.status = 'current'"
)
# The row form's range: every live turn of a run of conversations.
_WHERE_TURNS = " FROM turns WHERE conversation_id BETWEEN ? AND ? AND state = ?"


def _text_column(column: str, *, nullable: bool = True) -> str:
    """A text column packed: its byte lengths (-1 for NULL), then its values back to back. A
    NOT NULL column skips the NULL case (a fifth less time a row; a NULL would drop out of
    both lists, and the packing be refused)."""
    length = f"length(CAST({column} AS BLOB))"
    if nullable:
        length = f"ifnull({length}, -1)"
    return f"group_concat({length}, ','), CAST(group_concat({column}, '') AS BLOB)"


def _code(column: str, codes: dict[str, int]) -> str:
    whens = " ".join(f"WHEN '{value}' THEN {code}" for value, code in codes.items())
    return f"CASE {column} {whens} ELSE 9 END"


# role * 100 + protected * 10 + reason, SPEC §3 codes (the position in ROLES and in
# PROTECTION_REASONS, from 1); 9 for a value no valid turn has. Role and reason are compared
# as text whatever their storage class, as every text field is read.
_FLAGS = (
    _code("CAST(role AS TEXT)", {role: code for code, role in enumerate(ROLES, 1)})
    + " * 100 + CASE WHEN protected = 0 THEN 0 WHEN typeof(protected) = 'integer' THEN 10"
    " ELSE 90 END + CASE WHEN protection_reason IS NULL THEN 0 ELSE "
    + _code(
        "CAST(protection_reason AS TEXT)",
        {reason: code for code, reason in enumerate(PROTECTION_REASONS, 1)},
    )
    + " END"
)
# The packed form is one aggregate row per run: per text column its byte lengths and its
# values back to back, per integer column its values, and which summary a row was read for
# with its role, protection flag and reason as one key (see `ledgerfold_core::columns`), so
# no driver or Python code runs per row; the row form is the fallback for a run whose packing
# does not line up. Each summary `k` of the run reads the live turns of its conversation up
# to its `through_sequence` (the largest sequence it cites): the newest turns, which no
# summary covers, are never read. The unbounded form reads all of them, for a run where a
# cited turn was not found below that bound.
_PACKED_COLUMNS = ", ".join(
    [
        f"group_concat(k * 1000 + {_FLAGS}, ',')",
        _text_column("id", nullable=False),
        "group_concat(sequence, ',')",
        _text_column("body", nullable=False),
        _text_column("grp"),
        _text_column("meta"),
    ]
)


def _packed_turns(count: int, *, bounded: bool) -> str:
    rows = ", ".join(["(?, ?, ?)"] * count)
    below = " AND t.sequence <= run.bound" if bounded else ""
    return (
        f"WITH run(k, conversation, bound) AS (VALUES {rows}) SELECT {_PACKED_COLUMNS}"
        " FROM run CROSS JOIN turns AS t ON t.conversation_id = run.conversation"
        f"{below} WHERE t.state = ?"
    )


# The sources of exactly the summaries a run names (by key; `None` pads the list to a power
# of two so few statements are prepared), not whatever is current by the time the run is
# read: a summary superseded meanwhile is still checked as the summary it is.
_MAX_RUN_SUMMARIES = 256  # 3 parameters each (under SQLite's oldest limit of 999); k fits 8 bits


def _slots(run: list[_Job]) -> int:
    """How many summaries a run's statements name: its own, padded to a power of two."""
    return 1 << (len(run) - 1).bit_length()


def _keys(run: list[_Job]) -> list[int | None]:
    keys: list[int | None] = [job[1] for job in run]
    return keys + [None] * (_slots(run) - len(keys))


def _turn_parameters(run: list[_Job]) -> list[object]:
    """`(k, conversation, bound)` for each summary of the run, padded as `_keys` pads."""
    parameters: list[object] = []
    for k, job in enumerate(run):
        parameters += [k, job[0], job[5]]
    return parameters + [None] * (3 * (_slots(run) - len(run))) + [TURN_LIVE]


def _in(count: int) -> str:
    return "(" + ", ".join(["?"] * count) + ")"


# Each source row as one key, `k << 54 | position << 26 | byte length of the turn ID` (see
# `ledgerfold_core::columns::source_key`), and the turn IDs back to back: two aggregate calls
# a row instead of four. A position or ID out of those ranges (or not an integer) writes 'x',
# which is no key: the packing is refused and the run read by rows.
_SOURCE_KEY = (
    "CASE WHEN ss.position BETWEEN 0 AND 268435455"
    " AND length(CAST(ss.turn_id AS BLOB)) < 67108864"
    " THEN run.k * 18014398509481984 + ss.position * 67108864"
    " + length(CAST(ss.turn_id AS BLOB)) ELSE 'x' END"
)


def _packed_sources(count: int) -> str:
    rows = ", ".join(["(?, ?)"] * count)
    return (
        f"WITH run(k, pk) AS (VALUES {rows})"
        f" SELECT group_concat({_SOURCE_KEY}, ','), CAST(group_concat(ss.turn_id, '') AS BLOB)"
        " FROM run CROSS JOIN summary_sources AS ss ON ss.summary_pk = run.pk"
    )


def _source_parameters(run: list[_Job]) -> list[object]:
    """`(k, summary key)` for each summary of the run, padded as `_keys` pads."""
    parameters: list[object] = []
    for k, job in enumerate(run):
        parameters += [k, job[1]]
    return parameters + [None] * (2 * (_slots(run) - len(run)))


# The row form, text fields as their stored bytes in a UTF-8 database (whatever the storage
# class, and text that is not UTF-8 stays visible as such: the packed read sees the same
# bytes), as text in a UTF-16 one (SQLite converts it).
_ROW_COLUMNS = (
    "conversation_id",
    "id",
    "sequence",
    "role",
    "body",
    "protected",
    "protection_reason",
    "grp",
    "meta",
)


def _read(column: str, utf8: bool) -> str:
    return f"CAST({column} AS BLOB)" if utf8 else column


def _rows_query(utf8: bool) -> str:
    columns = [
        _read(column, utf8) if column not in ("sequence", "protected") else column
        for column in _ROW_COLUMNS
    ]
    return "SELECT " + ", ".join(columns) + _WHERE_TURNS


def _sources_query(utf8: bool, count: int) -> str:
    return (
        f"SELECT summary_pk, {_read('turn_id', utf8)} FROM summary_sources"
        f" WHERE summary_pk IN {_in(count)} ORDER BY summary_pk, position"
    )


@dataclass(frozen=True, slots=True)
class StaleSummary:
    conversation_id: str
    summary_id: str
    reason: str
    turn_id: str | None


@dataclass(frozen=True, slots=True)
class RevalidationReport:
    """What `ledgerfold revalidate --json` prints."""

    conversations: int
    summaries_checked: int
    current: int
    stale: int
    turns_hashed: int
    bytes_hashed: int
    seconds: float
    workers: int
    stale_summaries: tuple[StaleSummary, ...] = field(default=())

    def as_json(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "summaries_checked": self.summaries_checked,
            "current": self.current,
            "stale": self.stale,
            "turns_hashed": self.turns_hashed,
            "bytes_hashed": self.bytes_hashed,
            "seconds": round(self.seconds, 6),
            "workers": self.workers,
            "stale_summaries": [
                {
                    "conversation": item.conversation_id,
                    "summary": item.summary_id,
                    "reason": item.reason,
                    "turn": item.turn_id,
                }
                for item in self.stale_summaries
            ],
        }


# (conversation_id, summary_pk, summary_id, source_fingerprint, source_count, through_sequence)
_Job = tuple[str, int, str, str, int, int | None]
# (conversation_id, summary_id, reason | None, turn_id | None)
_Verdict = tuple[str, str, str | None, str | None]


def _open_readonly(path: str) -> sqlite3.Connection:
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def _sqlite_order(job: _Job) -> tuple[int, Any]:
    """SQLite's order of a conversation key (BINARY collation): NULL, text, then blobs. Text
    compares by UTF-8 bytes, which is code point order, Python's order of `str`. (A column
    of TEXT affinity stores numbers as text.)"""
    key: object = job[0]
    if key is None:
        return (0, "")
    return (1, key) if isinstance(key, str) else (2, key)


def _current_jobs(conn: sqlite3.Connection) -> list[_Job]:
    """Every current summary to check, sorted by conversation key as SQLite sorts it: runs
    read contiguous key ranges (`BETWEEN` the first and last key)."""
    jobs: list[_Job] = conn.execute(_CURRENT).fetchall()
    if all(type(job[0]) is str for job in jobs):  # unique text keys: the tuples sort by them
        jobs.sort()
    else:
        jobs.sort(key=_sqlite_order)
    return jobs


def _runs(jobs: list[_Job], batch_turns: int) -> Iterator[list[_Job]]:
    """Runs of conversations (by ID) with about `batch_turns` cited turns each (a larger
    conversation is a run of its own) and at most `_MAX_RUN_SUMMARIES` summaries."""
    start = 0
    while start < len(jobs):
        end, cited = start, 0
        while (
            end < len(jobs)
            and end - start < _MAX_RUN_SUMMARIES
            and (end == start or cited + jobs[end][4] <= batch_turns)
        ):
            cited += jobs[end][4]
            end += 1
        yield jobs[start:end]
        start = end


def _check_run(
    conn: sqlite3.Connection, run: list[_Job], threads: int, *, utf8: bool, packed: bool = True
) -> Any:
    """Check one run of conversations, read in one snapshot: packed in a UTF-8 database
    (lengths count bytes of the stored text), else, or when the packing does not line up,
    row by row."""
    summaries = [(job[0], job[1], job[2], job[3]) for job in run]
    keys = _keys(run)
    conn.execute("BEGIN")
    try:
        if utf8 and packed:
            checked = _check_packed(conn, run, summaries, threads)
            if checked is not None:
                return checked
            _log.debug("revalidation: packed rows did not line up; reading by rows")
        first, last = run[0][0], run[-1][0]
        rows = conn.execute(_rows_query(utf8), (first, last, TURN_LIVE)).fetchall()
        sources = conn.execute(_sources_query(utf8, len(keys)), keys).fetchall()
    finally:
        conn.execute("COMMIT")
    return _native.revalidate_flat(rows, sources, summaries, threads)


_SOURCE_MISSING = "source-missing"


def _check_packed(
    conn: sqlite3.Connection,
    run: list[_Job],
    summaries: list[tuple[str, int, str, str]],
    threads: int,
) -> Any:
    """The packed check of a run (inside the caller's snapshot), or None when the packing
    does not line up. Turns are read up to each summary's `through_sequence`; should a cited
    turn be missing there (retracted, or its sequence no longer what it was), the run is read
    again whole, so that the verdict is the one every live turn gives."""
    slots, parameters = _slots(run), _turn_parameters(run)
    try:
        source_columns = conn.execute(_packed_sources(slots), _source_parameters(run)).fetchone()
        for bounded in (True, False):
            turn_columns = conn.execute(
                _packed_turns(slots, bounded=bounded), parameters
            ).fetchone()
            checked = _native.revalidate_columns(turn_columns, source_columns, summaries, threads)
            if checked is None or not any(verdict[2] == _SOURCE_MISSING for verdict in checked[0]):
                return checked
    except sqlite3.DataError:  # a run over SQLite's length limit: read it by rows
        return None
    return checked


def _check_jobs(
    path: str,
    jobs: list[_Job],
    batch_turns: int,
    threads: int,
    progress: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
) -> tuple[list[_Verdict], int, int]:
    """Check `jobs` run by run through one read-only connection; returns early (with what
    it has) once `stop` is set, and sets it when it fails, so its siblings stop too."""
    conn = _open_readonly(path)
    verdicts: list[_Verdict] = []
    turns_hashed = bytes_hashed = 0
    try:
        utf8 = conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-8"
        for run in _runs(jobs, batch_turns):
            if stop is not None and stop.is_set():
                break
            found, turns, size = _check_run(conn, run, threads, utf8=utf8)
            verdicts.extend(found)
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


#: How often the caller's thread wakes while workers run (to handle signals).
_POLL_S = 0.05


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _shards(jobs: list[_Job], count: int) -> list[list[_Job]]:
    """Split jobs (sorted by conversation ID) into at most `count` contiguous runs of about
    equal cited turns, so each worker reads its own range of the tables."""
    total = sum(job[4] + 1 for job in jobs)
    shards: list[list[_Job]] = [[]]
    done = 0
    for job in jobs:
        if done >= total * len(shards) / count and len(shards) < count:
            shards.append([])
        shards[-1].append(job)
        done += job[4] + 1
    return [shard for shard in shards if shard]


def revalidate_database(
    path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    threads: int = 1,
    batch_turns: int = 2_000,
    mark_stale: bool = True,
    progress: Callable[[int], None] | None = None,
) -> RevalidationReport:
    """Re-hash every source of every current summary in the database at `path` and check it.

    `workers` conversations are checked at once, each share by a thread of this process with
    its own read-only connection (default: one per available core); each worker hashes on
    `threads` threads (default 1), so about `workers * threads` cores are busy and
    `workers=1` keeps to one core. Reading and hashing both run without the GIL.

    Batches hold about `batch_turns` cited turns (a larger conversation is a batch of its
    own), so peak memory is bounded by `workers` times the larger of a batch and the largest
    conversation; small batches cost nothing measurable (2k: 48 MB peak on a 200k-turn
    database, 50k: 203 MB, same time).

    `progress(n)` is called with the number of conversations done after each batch, from the
    worker's thread (one call at a time). Stale summaries are marked `stale` with the check's
    reason unless `mark_stale=False`."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidInput("path: must be str or os.PathLike", field="path", problem="wrong-type")
    path = os.fspath(path)
    workers = (
        available_cores() if workers is None else _validate.integer("workers", workers, minimum=1)
    )
    threads = _validate.integer("threads", threads, minimum=1)
    batch_turns = _validate.integer("batch_turns", batch_turns, minimum=1)
    started = time.perf_counter()
    with SQLiteStore(path) as store:  # refuses a file that is not a ledgerfold store
        conversations = len(store.conversation_ids())
    conn = _open_readonly(path)
    try:
        jobs = _current_jobs(conn)
    finally:
        conn.close()
    shards = _shards(jobs, workers)
    verdicts: list[_Verdict] = []
    turns_hashed = bytes_hashed = 0
    if len(shards) <= 1:
        found, turns_hashed, bytes_hashed = _check_jobs(path, jobs, batch_turns, threads, progress)
        verdicts.extend(found)
    else:
        lock = threading.Lock()
        stop = threading.Event()

        def report_progress(done: int) -> None:
            if progress is not None:
                with lock:
                    progress(done)

        pool = ThreadPoolExecutor(len(shards), thread_name_prefix="ledgerfold-worker")
        try:
            futures = [
                pool.submit(_check_jobs, path, shard, batch_turns, threads, report_progress, stop)
                for shard in shards
            ]
            # Wake up now and then, so that a signal (Ctrl-C) delivered to a worker's thread is
            # handled here, in the main thread, without waiting for a whole shard.
            while not stop.is_set() and wait(futures, timeout=_POLL_S).not_done:
                pass
            # In shard order: verdicts come back in conversation order; a failure raises.
            results = [future.result() for future in futures]
        except BaseException:  # a worker failed, or the caller was interrupted
            stop.set()  # the others stop after the batch they are on
            raise
        finally:
            pool.shutdown(wait=True)
        for found, turns, size in results:
            verdicts.extend(found)
            turns_hashed += turns
            bytes_hashed += size
    stale = [
        StaleSummary(conversation_id, summary_id, reason, turn_id)
        for conversation_id, summary_id, reason, turn_id in verdicts
        if reason is not None
    ]
    if mark_stale and stale:
        with SQLiteStore(path) as store:
            store.mark_stale((item.conversation_id, item.summary_id, item.reason) for item in stale)
    report = RevalidationReport(
        conversations=conversations,
        summaries_checked=len(verdicts),
        current=len(verdicts) - len(stale),
        stale=len(stale),
        turns_hashed=turns_hashed,
        bytes_hashed=bytes_hashed,
        seconds=time.perf_counter() - started,
        workers=workers,
        stale_summaries=tuple(stale),
    )
    _log.info(
        "revalidation: conversations=%d checked=%d stale=%d turns=%d bytes=%d workers=%d",
        report.conversations,
        report.summaries_checked,
        report.stale,
        report.turns_hashed,
        report.bytes_hashed,
        workers,
    )
    return report
