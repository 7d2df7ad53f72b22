"""What deep revalidation checks beside the summaries' fingerprints, run by run on the worker
threads: every live turn that no verified current summary covers is hashed against its
stored digest (a body changed behind the library's back leaves it wrong: the next summary
would be fingerprinted from it), and a current summary that splits a compaction unit by a
tool-call link (SPEC §17.2, a database written before links made units) is `group-split`.

Both need the same rows: the turns of the summary's conversation that it does not cite (its
raw turns). The check of a run reads each conversation up to its summary's
`through_sequence` and reports the rows it read but found uncited; the audit then reads, in
one packed aggregate row per run (`_batch_reads.packed_audit`), the rows above that bound
and those uncited ones (all live rows of a conversation whose summary was found stale), and
the native core hashes them and matches their tool-call links detached from the
interpreter (`_native.audit_columns`). So a worker reads each turn once for the check or
once for the audit, and the work spreads over the workers as the check does.

The native audit only ever says "right" for certain: a row whose digest does not match, or
that is not a valid turn, is decided here row by row with the store's own reading
(`_digests.check_row`), and a summary whose raw rows leave a call unanswered or an answer
without its call (or whose rows it cannot read) gets the full split check (`split_in`,
which reads its sources too). Conversations without a current summary to check (none, or a
damaged record) and anything the packed reads cannot decide are audited row by row, per
conversation (`_digests.wrong_digests`). No body or summary text is decoded into an error or
a log."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgerfold import _native
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store import _digests as digests
from ledgerfold.store import _unit_splits as unit_splits
from ledgerfold.store._schema import TURN_LIVE
from ledgerfold.store._sqlite_errors import quotes_stored_data

__all__ = ["Audit", "audit_leftovers", "audit_run", "split_in"]

Job = batch_reads.Job
# (conversation_id, summary_id, reason | None, turn_id | None)
Verdict = tuple[str, str, str | None, str | None]

_GROUP_SPLIT = "group-split"
#: A bound below every stored sequence: the slot reads all live rows of its conversation.
_ALL = float("-inf")


@dataclass(slots=True)
class Audit:
    """Live turns hashed outside the summary check, those too damaged to hash (`damaged`,
    named in `damaged_rows`), and those whose stored digest is wrong, each named as
    `(pk, conversation_id, turn_id)` (the table key orders them as one scan of the table
    would)."""

    checked: int = 0
    damaged: int = 0
    wrong: list[tuple[int, str, str]] = field(default_factory=list)
    damaged_rows: list[tuple[int, str, str]] = field(default_factory=list)

    def add(self, other: Audit) -> None:
        self.checked += other.checked
        self.damaged += other.damaged
        self.wrong.extend(other.wrong)
        self.damaged_rows.extend(other.damaged_rows)

    def count(self, found: digests.RowCheck) -> None:
        pk, key, size = found
        self.checked += 1
        if size < 0:
            self.damaged += 1
            if key is not None:
                self.damaged_rows.append((pk, *key))
        elif key is not None:
            self.wrong.append((pk, *key))


def split_in(conn: sqlite3.Connection, conversation_id: str, summary_id: str) -> str | None:
    """SPEC §17.2: the raw turn whose compaction unit holds a source of the summary, or None.
    Reads IDs, roles and meta of the raw turns only: no body or summary text is decoded (a
    damaged one must not stop revalidation)."""
    with batch_reads.text_read_as(conn, bytes):
        row = conn.execute(
            "SELECT pk FROM summaries WHERE conversation_id = ? AND id = ?",
            (conversation_id, summary_id),
        ).fetchone()
        if row is None:
            return None
        raw = conn.execute(
            "SELECT id, sequence, role, meta FROM turns WHERE conversation_id = ? AND state = ?"
            " AND meta IS NOT NULL AND id NOT IN"
            " (SELECT turn_id FROM summary_sources WHERE summary_pk = ?)",
            (conversation_id, TURN_LIVE, row[0]),
        )
        return unit_splits.split_by_links(
            conn, conversation_id, row[0], (_link(*found) for found in raw)
        )


def _link(
    turn_id: bytes, sequence: object, role: bytes, meta: bytes
) -> tuple[str, int, str, dict[str, Any] | None]:
    try:
        loaded = json.loads(meta)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        loaded = None
    number = sequence if isinstance(sequence, int) else -1  # a damaged one sorts first
    role_text = role.decode(errors="replace")
    return (
        turn_id.decode(errors="replace"),
        number,
        role_text,
        loaded if isinstance(loaded, dict) else None,
    )


def _conversation_by_rows(
    conn: sqlite3.Connection, job: Job, verdict: Verdict, audit: Audit, utf8: bool
) -> Verdict:
    """The split check and the audit of one conversation, row by row."""
    conversation_id, summary_id, reason, turn_id = verdict
    if reason is None:
        split = split_in(conn, conversation_id, summary_id)
        if split is not None:
            reason, turn_id = _GROUP_SPLIT, split
    stale = [job[1]] if reason is not None else []
    for found in digests.wrong_digests(conn, job[0], stale, utf8=utf8):
        audit.count(found)
    return conversation_id, summary_id, reason, turn_id


def audit_run(
    conn: sqlite3.Connection,
    run: Sequence[Job],
    verdicts: Sequence[Verdict],
    uncited: Sequence[list[int] | None] | None,
    bounded: bool,
    threads: int,
    *,
    utf8: bool = True,
) -> tuple[list[Verdict], Audit]:
    """The split check and the digest audit of a checked run (inside the caller's snapshot):
    the run's verdicts, `group-split` where a current summary splits a unit, and what the
    audit found. `uncited[i]` are the sequences of the rows the check read for `run[i]` and
    found uncited (None when it cannot tell, or for the whole run when the check read it by
    rows); `bounded`: the check read each conversation up to its summary's
    `through_sequence` only. `utf8`: the database stores text as UTF-8; a packed read
    counts and carries the bytes of the stored text, so a database that does not (UTF-16)
    is audited row by row, its text read as text."""
    audit = Audit()
    slots: list[tuple[object, float | int | None]] = []
    kept: list[tuple[int, int]] = []
    by_rows: list[int] = []
    for index, (job, verdict) in enumerate(zip(run, verdicts, strict=True)):
        sequences = None if uncited is None else uncited[index]
        if verdict[2] is not None:  # stale: its sources are not verified either
            slots.append((job[0], _ALL))
        elif sequences is None or (bounded and not isinstance(job[5], int)):
            slots.append((job[0], None))
            by_rows.append(index)
        else:
            slots.append((job[0], job[5] if bounded else None))
            kept.extend((index, sequence) for sequence in sequences)
    found = None
    if utf8 and len(by_rows) < len(run):
        try:
            turn_columns, audit_columns = batch_reads.packed_audit(conn, slots, kept)
            found = _native.audit_columns(turn_columns, audit_columns, len(run), threads)
        except sqlite3.DataError:  # over SQLite's length limit: row by row
            found = None
        except sqlite3.OperationalError as error:
            if not quotes_stored_data(error):
                raise
            found = None  # a number stored as text that is not UTF-8: row by row
    checked = list(verdicts)
    if found is None:
        by_rows = list(range(len(run)))
    else:
        skipped = set(by_rows)
        recheck, may_split, rows, _ = found
        audit.checked += rows
        for _, pk in recheck:
            row = digests.row_by_key(conn, pk, utf8=utf8)
            if row is not None:
                audit.checked -= 1  # counted again, decided by the store's reading
                audit.count(digests.check_row(row))
        for index in may_split:
            conversation_id, summary_id, reason, _ = checked[index]
            if reason is not None or index in skipped:
                continue
            split = split_in(conn, conversation_id, summary_id)
            if split is None:
                continue
            checked[index] = (conversation_id, summary_id, _GROUP_SPLIT, split)
            # Its sources are no longer verified: hashed too.
            for row in digests.cited_rows(conn, conversation_id, run[index][1], utf8=utf8):
                audit.count(digests.check_row(row))
    for index in by_rows:
        checked[index] = _conversation_by_rows(conn, run[index], checked[index], audit, utf8)
    return checked, audit


def audit_leftovers(
    conn: sqlite3.Connection,
    conversations: Sequence[object],
    stale_summary_pks: Sequence[int],
    *,
    utf8: bool = True,
) -> Audit:
    """The audit of conversations without a current summary to check (none, or a damaged
    record whose table key is among `stale_summary_pks`), row by row."""
    audit = Audit()
    with batch_reads.snapshot(conn):
        for conversation_id in conversations:
            for found in digests.wrong_digests(conn, conversation_id, stale_summary_pks, utf8=utf8):
                audit.count(found)
    return audit
