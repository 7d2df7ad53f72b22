"""Deep batch revalidation of a ledgerfold SQLite database.

Every current summary is checked against its sources' *re-hashed* bodies: stored digests are
never trusted here (the per-call path trusts them; this is what keeps that honest). Each batch
of conversations is read in one snapshot as a single aggregate row, packed by column (the
database driver never makes a Python object per turn; the reads are
`ledgerfold.store._batch_reads`), and the native core unpacks it,
groups the rows, hashes and checks them detached from the interpreter.
`workers` threads of this process share the conversations, each reading its share through its
own read-only connection and checking it on its own core (SQLite's reads and the native check
both run without the GIL); the verdicts come back to the caller, which marks stale summaries
in one transaction. The check of a run is `ledgerfold._revalidate_runs`, the worker threads
`ledgerfold._revalidate_workers`; this module reports.

What the fingerprints cannot show is checked by the same workers, run by run, right after
each run's check and in its snapshot (`ledgerfold._revalidate_audit`): a current summary
that splits a compaction unit by a tool-call link (SPEC §17.2, `group-split`), and a stored
digest that no longer matches its bytes in a live turn no verified summary covers. The
check reads each conversation up to its summary's last source and reports the rows it read
but found uncited; the audit reads the rest (the tail, those uncited rows, every live row of
a conversation found stale) packed per run, and the native core hashes them and matches
their tool-call links without the GIL. Each turn is read once (by the check or by the
audit), the audit spreads over the workers as the check does, and only what the native pass
cannot decide for certain (a wrong or damaged row, an unanswered call among the raw turns)
is looked at row by row, with the store's own reading. Conversations without a current
summary to check are audited row by row by the worker whose range of keys holds them.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledgerfold import _validate
from ledgerfold._events import EventHook
from ledgerfold._revalidate_workers import available_cores, check_all
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store._batch_reads import NotUtf8
from ledgerfold.store._paths import database_path
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.store._sqlite_errors import quotes_stored_data, store_error

__all__ = ["RevalidationReport", "StaleSummary", "revalidate_database"]

_log = logging.getLogger("ledgerfold.revalidate")


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
    #: The worker threads that ran: at most the `workers` asked for, no more than the
    #: shards the current summaries made (one for one shard or none: the caller's thread).
    workers: int
    stale_summaries: tuple[StaleSummary, ...] = field(default=())
    #: Live turns whose stored digest was checked outside the summary check (those no
    #: current summary verified), how many did not match their bytes, how many of those
    #: were repaired (none with `mark_stale=False`), and rows too damaged to hash (named in
    #: `damaged_turns`, as `(conversation_id, turn_id)`).
    digests_checked: int = 0
    digests_wrong: int = 0
    digests_repaired: int = 0
    turns_damaged: int = 0
    wrong_digests: tuple[tuple[str, str], ...] = field(default=())
    damaged_turns: tuple[tuple[str, str], ...] = field(default=())

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
            "digests_checked": self.digests_checked,
            "digests_wrong": self.digests_wrong,
            "digests_repaired": self.digests_repaired,
            "turns_damaged": self.turns_damaged,
            "wrong_digests": [
                {"conversation": conversation_id, "turn": turn_id}
                for conversation_id, turn_id in self.wrong_digests
            ],
            "damaged_turns": [
                {"conversation": conversation_id, "turn": turn_id}
                for conversation_id, turn_id in self.damaged_turns
            ],
        }


#: The most hashing threads a worker may use (`threads`; the native core's bound), checked
#: before the database is read.
MAX_THREADS = 1024


def revalidate_database(
    path: str | os.PathLike[str],
    *,
    workers: int | None = None,
    threads: int = 1,
    batch_turns: int = 2_000,
    mark_stale: bool = True,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    on_event: EventHook | None = None,
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
    worker's thread (one call at a time); `on_total(n)` is called first with how many
    conversations will be checked (those with a current summary). Stale summaries are
    marked `stale` with the check's reason unless `mark_stale=False`; `on_event` (an
    `SQLiteStore` hook) then receives a `summary.stale` event for those marked.

    Every live turn the check did not verify (not a source of a current summary found
    current) is hashed too: a stored digest that does not match its bytes (a body changed
    behind the library's back) is repaired — recomputed, the versions citing the turn marked
    stale, a new revision — unless `mark_stale=False`; the report counts them
    (`digests_wrong`, `digests_repaired`, with `wrong_digests` naming each turn)."""
    path = database_path(path)
    workers = (
        available_cores() if workers is None else _validate.integer("workers", workers, minimum=1)
    )
    threads = _validate.integer("threads", threads, minimum=1, maximum=MAX_THREADS)
    batch_turns = _validate.integer("batch_turns", batch_turns, minimum=1)
    mark_stale = _validate.flag("mark_stale", mark_stale)
    # Checked before any work: they are first called from a worker, after a batch.
    _validate.callback("progress", progress, "int -> None")
    _validate.callback("on_total", on_total, "int -> None")
    _validate.hook("on_event", on_event)
    started = time.perf_counter()
    # Read-only: refuses a missing file or one that is not a ledgerfold store, creates nothing.
    with SQLiteStore(path, read_only=True):
        pass
    conn = batch_reads.open_readonly(path)
    try:
        utf8 = batch_reads.is_utf8(conn)
    finally:
        conn.close()
    try:
        conversations, verdicts, turns_hashed, bytes_hashed, audit, ran = check_all(
            path, workers, threads, batch_turns, progress, on_total
        )
    except sqlite3.Error as error:
        failure = store_error(None, error, operation="revalidate", write=False)
        if quotes_stored_data(error):
            raise failure from None  # SQLite's message quotes the stored bytes
        raise failure from error
    stale_verdicts = [verdict for verdict in verdicts if verdict[2] is not None]
    stale = [
        StaleSummary(_as_text(conversation_id), _as_text(summary_id), str(reason), turn_id)
        for conversation_id, summary_id, reason, turn_id in stale_verdicts
    ]
    # A key stored as a blob, or as text that is not UTF-8 (a damaged database), or one the
    # store refuses or cannot bind (an empty conversation key, a blank summary or turn ID,
    # U+FFFF in a UTF-16 file; written by another tool) names nothing the API can reach:
    # reported (as text), not marked.
    markable = [
        item
        for item, verdict in zip(stale, stale_verdicts, strict=True)
        if _nameable(verdict[0], verdict[1], utf8)
    ]
    # In table order, as one scan of the table finds them, whatever the workers' shares.
    wrong = [(conversation_id, turn_id) for _, conversation_id, turn_id in sorted(audit.wrong)]
    repairable = [pair for pair in wrong if _nameable(*pair, utf8)]
    repaired = 0
    if mark_stale and (markable or repairable):
        with SQLiteStore(path, on_event=on_event) as store:
            # One transaction: an interrupted or failed run leaves the database as it was.
            _, repaired = store._versions.apply_revalidation(
                ((item.conversation_id, item.summary_id, item.reason) for item in markable),
                repairable,
            )
    report = RevalidationReport(
        conversations=conversations,
        summaries_checked=len(verdicts),
        current=len(verdicts) - len(stale),
        stale=len(stale),
        turns_hashed=turns_hashed,
        bytes_hashed=bytes_hashed,
        seconds=time.perf_counter() - started,
        workers=ran,  # what ran, not what was asked (`--workers 100000000`)
        stale_summaries=tuple(stale),
        digests_checked=audit.checked,
        digests_wrong=len(wrong),
        digests_repaired=repaired,
        turns_damaged=audit.damaged,
        wrong_digests=tuple((_as_text(c), _as_text(t)) for c, t in wrong),
        damaged_turns=tuple((_as_text(c), _as_text(t)) for _, c, t in sorted(audit.damaged_rows)),
    )
    _log.info(
        "revalidation: conversations=%d checked=%d stale=%d turns=%d bytes=%d workers=%d"
        " digests_wrong=%d digests_repaired=%d turns_damaged=%d",
        report.conversations,
        report.summaries_checked,
        report.stale,
        report.turns_hashed,
        report.bytes_hashed,
        report.workers,
        report.digests_wrong,
        report.digests_repaired,
        report.turns_damaged,
    )
    return report


def _nameable(conversation_id: object, item_id: object, utf8: bool) -> bool:
    """Whether `mark_stale` and `repair_digests` take this conversation key and summary or
    turn ID (text the store accepts: a conversation key not empty, an ID not blank) and find
    them (in a UTF-16 file, a bound U+FFFE or U+FFFF is another text: `unbindable`)."""
    return (
        isinstance(conversation_id, str)
        and conversation_id != ""
        and isinstance(item_id, str)
        and item_id.strip() != ""
        and (
            utf8 or not (batch_reads.unbindable(conversation_id) or batch_reads.unbindable(item_id))
        )
    )


def _as_text(key: object) -> str:
    """A stored key as text: a blob, or text that is not UTF-8 (a damaged database), decoded,
    its bad bytes replaced."""
    if isinstance(key, NotUtf8):
        key = key.raw
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key).decode("utf-8", errors="replace")
    return str(key)
