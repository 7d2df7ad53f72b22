"""Plans and summary versions inside one transaction: registering a plan, the atomic commit
of a result (SPEC §9), failure records, history, and the version cache.

Every function takes an open connection inside the caller's transaction; `SQLiteStore` owns
the transactions, validation and logging. Versions read or written go to the cache only
after their transaction commits (SPEC §15.4).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ledgerfold import _checkpoints as checkpoints
from ledgerfold._context import ContextItem, SummaryItem
from ledgerfold._errors import InvalidInput
from ledgerfold._native import SourceDigests, SourceIds
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _sources as sources
from ledgerfold.store._batch_reads import NotUtf8, lenient_rows
from ledgerfold.store._database import now
from ledgerfold.store._rows import (
    ITEM_COLUMNS,
    SUMMARY_COLUMNS,
    DamagedSummary,
    Version,
    damaged_summary,
    envelope_from_row,
)
from ledgerfold.store._schema import (
    ACCEPTED,
    CURRENT,
    FAILED,
    STALE,
    TURN_LIVE,
    TURN_PURGED,
)
from ledgerfold.store._sqlite_errors import damaged_row, quotes_stored_data
from ledgerfold.store._summary_slot import check_slot

__all__ = [
    "VersionCache",
    "mark_stale",
    "pointed",
    "readable_record",
    "record_failure",
    "summarised_items",
    "verdict_triples",
    "version",
]

_Ids = tuple[str, ...] | SourceIds

#: Envelopes kept in memory per store; summaries are immutable, so entries never go stale.
_CACHE_LIMIT = 64


class VersionCache:
    """Stored versions by summary ID. A version found or written inside a transaction is
    staged, and published by `publish()` once that transaction has committed; `discard()`
    drops what a failed transaction staged."""

    def __init__(self) -> None:
        self._versions: dict[str, Version] = {}
        self._staged: list[Version] = []
        # Keyed by row, ID and fingerprint: SQLite reuses the rowid of a deleted newest row
        # (after `delete_conversation` or a purge) and an ID may come again after
        # `delete_conversation`; a reused row must not find old digests.
        self._digests: dict[tuple[int, str, str], SourceDigests] = {}
        self._staged_digests: dict[tuple[int, str, str], SourceDigests] = {}
        # Plan ID -> (its compacted IDs, the parent's source IDs they were built on): the
        # tuple objects themselves, so a commit of that very tuple knows it starts with the
        # parent's without comparing 100k IDs (SPEC §15.2's cost). A few plans, per store.
        self._extensions: dict[str, tuple[_Ids, _Ids]] = {}
        self._staged_extensions: dict[str, tuple[_Ids, _Ids]] = {}

    def get(self, summary_id: str) -> Version | None:
        return self._versions.get(summary_id)

    def stage(self, staged: Version) -> None:
        self._staged.append(staged)

    def digests(self, version: Version) -> SourceDigests | None:
        """The fingerprint state of a version's stored source digests (immutable, as
        versions are)."""
        return self._digests.get(_key(version))

    def stage_digests(self, version: Version, digests: SourceDigests) -> None:
        self._staged_digests[_key(version)] = digests

    def stage_extension(
        self,
        plan_id: str,
        compacted: tuple[str, ...] | SourceIds,
        prefix: tuple[str, ...] | SourceIds,
    ) -> None:
        self._staged_extensions[plan_id] = (compacted, prefix)

    def extends(
        self, plan_id: str, ids: tuple[str, ...] | SourceIds, prefix: tuple[str, ...] | SourceIds
    ) -> bool:
        """Whether `ids` is the very tuple the store built for `plan_id` on `prefix`."""
        known = self._extensions.get(plan_id)
        return known is not None and known[0] is ids and known[1] is prefix

    def publish(self) -> None:
        for plan_id, extension in self._staged_extensions.items():
            while len(self._extensions) >= 4:
                self._extensions.pop(next(iter(self._extensions)))
            self._extensions[plan_id] = extension
        self._staged_extensions.clear()
        for staged in self._staged:
            if len(self._versions) >= _CACHE_LIMIT:
                self._versions.pop(next(iter(self._versions)))
            self._versions[staged.envelope.id] = staged
        for key, digests in self._staged_digests.items():
            # Only the newest few (a state is O(log covered) bytes, but old ones are not
            # needed: the next compaction extends the current version).
            while len(self._digests) >= 4:
                self._digests.pop(next(iter(self._digests)))
            self._digests[key] = digests
        self.discard()

    def clear(self) -> None:
        """Forget everything (a group commit failed after its jobs published)."""
        self._versions.clear()
        self._digests.clear()
        self._extensions.clear()
        self.discard()

    def discard(self) -> None:
        self._staged_extensions.clear()
        self._staged.clear()
        self._staged_digests.clear()


def _key(version: Version) -> tuple[int, str, str]:
    return version.pk, version.envelope.id, version.envelope.source_fingerprint


def version(conn: sqlite3.Connection, cache: VersionCache, row: tuple[Any, ...]) -> Version:
    """The version of a `summaries` row of `SUMMARY_COLUMNS` (never a `failed` row); a
    damaged row is a `StoreError` naming its table, column and row."""
    try:
        return _version(conn, cache, row)
    except DamagedSummary as damage:
        raise damaged_row(str(damage)) from None


def _version(conn: sqlite3.Connection, cache: VersionCache, row: tuple[Any, ...]) -> Version:
    found = cache.get(row[1])
    # The row must still be the one cached: after `delete_conversation` the same ID can
    # come back on the same (reused) row number with other content.
    if found is not None and _cached_fields(found) == _row_fields(row):
        return found
    if row[12] is not None:
        source_ids = _rejected_ids(row)
    else:
        # Shared by the versions that extend this one (issue 28 item 6). An ID stored as a
        # blob reads as its text, as revalidation reads it; one that is no text is damage.
        try:
            source_ids = SourceIds(
                r[0].decode() if isinstance(r[0], bytes) else r[0]
                for r in conn.execute(
                    "SELECT turn_id FROM summary_sources WHERE summary_pk = ? ORDER BY position",
                    (row[0],),
                )
            )
        except (ValueError, TypeError):  # UnicodeDecodeError is a ValueError
            raise damaged_summary(row, "summary_sources.turn_id") from None
    read = envelope_from_row(row, source_ids)
    if row[12] is None:
        check_slot(conn, read)  # once per version read, as its source IDs are
    cache.stage(read)
    return read


def _rejected_ids(row: tuple[Any, ...]) -> SourceIds:
    try:
        return SourceIds(json.loads(row[12]))
    except (ValueError, TypeError, RecursionError):
        raise damaged_summary(row, "rejected_source_ids") from None


def readable_record(row: tuple[Any, ...]) -> bool:
    """Whether `pointed` reads a `SUMMARY_COLUMNS` row (read with `lenient_text`) as a
    version, its sources aside: no column holds text that is not UTF-8 (`NotUtf8`), every
    field is one the envelope takes (a text that is text, IDs not blank ...), and
    `rejected_source_ids`, when present, is a JSON list of IDs. Revalidation reports a
    current summary that fails it as `damaged-record`, the verdict the store's context
    gives it (`stale-summary:damaged-record`). An empty conversation key is revalidation's
    to judge: no call names that conversation (it checks its summary and reports it)."""
    if any(isinstance(value, NotUtf8) for value in row):
        return False
    if row[2] == "":
        row = (*row[:2], "unnamed", *row[3:])
    try:
        envelope_from_row(row, () if row[12] is None else _rejected_ids(row))
    except DamagedSummary:
        return False
    return True


def _cached_fields(found: Version) -> tuple[Any, ...]:
    envelope = found.envelope
    return (
        found.pk,
        envelope.conversation_id,
        envelope.plan_id,
        envelope.source_revision,
        envelope.source_fingerprint,
        envelope.policy_version,
        envelope.text,
        found.through_sequence,
        envelope.parent_id,
    )


def _row_fields(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """`_cached_fields` of a `SUMMARY_COLUMNS` row (its status, reason and time left out)."""
    return (*row[0:1], *row[2:4], *row[7:11], row[11] if row[11] is not None else 0, row[13])


def pointed(
    conn: sqlite3.Connection, cache: VersionCache, conversation_id: str, *, strict: bool = False
) -> tuple[Version, str, str | None] | None:
    """The version the conversation's pointer designates, its status and reason. A damaged
    record is no usable summary: None (a plan then rebases), or with `strict`
    `DamagedSummary` (the context says why it fell back)."""
    query = (
        f"SELECT {SUMMARY_COLUMNS} FROM summaries"
        " WHERE pk = (SELECT current_summary FROM conversations WHERE id = ?)"
    )
    try:
        row = conn.execute(query, (conversation_id,)).fetchone()
    except sqlite3.OperationalError as error:
        if not quotes_stored_data(error):
            raise
        # Text that is not UTF-8 in the record (written by another tool): a damaged record,
        # as a missing fingerprint is, so the context falls back and a compaction replaces
        # it (a rebase) instead of every call failing.
        damage = _undecodable(conn, query, conversation_id)
        if strict:
            raise damage from None
        return None
    if row is None:
        return None
    try:
        return _version(conn, cache, tuple(row)), row[4], row[5]
    except DamagedSummary:
        if strict:
            raise
        return None


def _undecodable(conn: sqlite3.Connection, query: str, conversation_id: str) -> DamagedSummary:
    """The record `query` failed to decode, as damage naming its first such column."""
    (row,) = lenient_rows(conn, query, (conversation_id,))
    columns = [name.strip() for name in SUMMARY_COLUMNS.split(",")]
    bad = next(i for i, value in enumerate(row) if isinstance(value, NotUtf8))
    return damaged_summary(row, columns[bad])


def record_failure(conn: sqlite3.Connection, plan_id: str, reason: str) -> str:
    """Record a failed attempt of a known plan; returns its conversation ID."""
    row = conn.execute("SELECT conversation_id FROM plans WHERE id = ?", (plan_id,)).fetchone()
    if row is None:
        raise InvalidInput(
            f"plan_id: unknown plan {plan_id!r}", field="plan_id", problem="unknown-value"
        )
    conn.execute(
        "INSERT INTO summaries (conversation_id, plan_id, status, reason, created_at)"
        f" VALUES (?, ?, '{FAILED}', ?, ?)",
        (row[0], plan_id, reason, now()),
    )
    conn.execute("UPDATE plans SET ended = 1 WHERE id = ?", (plan_id,))
    return str(row[0])


def mark_stale(
    conn: sqlite3.Connection, items: Iterable[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """`(reason, summary_id, conversation_id)` each; only `current` versions of that
    conversation change (a summary whose record names another conversation is that one's:
    the pointing conversation's context falls back without it, `conversation-mismatch`).
    Returns the items that changed a version (for the store's events)."""
    changed = []
    for reason, summary_id, conversation_id in items:
        if conn.execute(
            f"UPDATE summaries SET status = '{STALE}', reason = ?"
            f" WHERE id = ? AND conversation_id = ? AND status = '{CURRENT}'",
            (reason, summary_id, conversation_id),
        ).rowcount:
            changed.append((reason, summary_id, conversation_id))
    return changed


def summarised_items(
    conn: sqlite3.Connection, conversation_id: str, used: Version
) -> tuple[ContextItem, ...]:
    """The context with a current summary, read without its sources: the kept turns below
    its slot, the summary, then every live turn after its last source."""
    envelope = used.envelope
    items: list[ContextItem] = list(
        ledger.item_rows(
            conn,
            f"SELECT {', '.join('t.' + c.strip() for c in ITEM_COLUMNS.split(','))}"
            " FROM summary_kept k JOIN turns t ON t.pk = k.turn_pk"
            " WHERE k.summary_pk = ? AND t.state = ? ORDER BY t.sequence",
            (used.pk, TURN_LIVE),
        )
    )
    # Sources are in ledger order (sealed ones first): the first one's row, purged or not,
    # gives the slot's first sequence (SPEC §16.5) in one indexed lookup.
    first = (
        conn.execute(
            "SELECT sequence FROM turns WHERE conversation_id = ? AND id = ?",
            (conversation_id, envelope.source_ids[0]),
        ).fetchone()
        if envelope.source_ids
        else None
    )
    items.append(
        SummaryItem(
            envelope.id,
            envelope.text,
            used.through_sequence,
            envelope.source_ids,
            None if first is None else int(first[0]),
        )
    )
    items.extend(
        ledger.item_rows(
            conn,
            f"SELECT {ITEM_COLUMNS} FROM turns"
            " WHERE conversation_id = ? AND sequence > ? AND state = ? ORDER BY sequence",
            (conversation_id, used.through_sequence, TURN_LIVE),
        )
    )
    return tuple(items)


def cached_source_ids(conn: sqlite3.Connection, cache: VersionCache, pk: int) -> _Ids | None:
    """The source IDs of the version at row `pk` when the cache holds that version (as read
    by the plan that named it as a base), else None: nothing is read or staged then."""
    row = conn.execute(
        f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE pk = ? AND status IN {ACCEPTED}",
        (pk,),
    ).fetchone()
    found = None if row is None else cache.get(row[1])
    if found is None or _cached_fields(found) != _row_fields(tuple(row)):
        return None
    return found.envelope.source_ids


def version_at(conn: sqlite3.Connection, cache: VersionCache, pk: int) -> Version | None:
    """The accepted version stored at row `pk` (None when there is none, or it is damaged)."""
    try:
        row = conn.execute(
            f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE pk = ? AND status IN {ACCEPTED}",
            (pk,),
        ).fetchone()
    except sqlite3.OperationalError as error:
        if not quotes_stored_data(error):
            raise
        return None  # text that is not UTF-8: damaged, as `pointed` says
    if row is None:
        return None
    try:
        return _version(conn, cache, tuple(row))
    except DamagedSummary:
        return None


def accepted_records(conn: sqlite3.Connection, conversation_id: str) -> list[checkpoints.Record]:
    """The conversation's accepted versions as the checkpoint rules see them. Pruning keeps
    them few (`keep_versions` + `keep_checkpoints` + a sealed base)."""
    return [
        checkpoints.Record(int(pk), str(summary_id), parent_id, run, int(count or 0))
        for pk, summary_id, parent_id, run, count in conn.execute(
            "SELECT pk, id, parent_id, source_run, source_count FROM summaries"
            f" WHERE conversation_id = ? AND status IN {ACCEPTED}",
            (conversation_id,),
        )
    ]


def run_of(conn: sqlite3.Connection, summary_pk: int | None) -> int | None:
    row = conn.execute("SELECT source_run FROM summaries WHERE pk = ?", (summary_pk,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def pointed_pk(conn: sqlite3.Connection, conversation_id: str) -> int | None:
    row = conn.execute(
        "SELECT current_summary FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def all_purged(conn: sqlite3.Connection, conversation_id: str, summary_pk: int) -> bool:
    """Whether every source of the version is a purged turn (it is then sealed for good)."""
    return (
        conn.execute(
            "SELECT 1 FROM summary_sources ss LEFT JOIN turns t ON t.conversation_id = ?"
            " AND t.id = ss.turn_id WHERE ss.summary_pk = ?"
            " AND (t.state IS NULL OR t.state != ?) LIMIT 1",
            (conversation_id, summary_pk, TURN_PURGED),
        ).fetchone()
        is None
    )


def sealed_base(
    conn: sqlite3.Connection, conversation_id: str, order: Sequence[checkpoints.Record]
) -> int | None:
    """The sealed base (SPEC §17.5): the first of `order` (a head and its ancestors, newest
    first) whose sources are all purged; None when there is none (or nothing was purged)."""
    # Only a version whose last source lies within the purged history can be wholly purged:
    # the O(covered) check runs on those alone (usually one), not on every checkpoint.
    within = {
        int(row[0])
        for row in conn.execute(
            "SELECT pk FROM summaries WHERE conversation_id = ?"
            f" AND status IN {ACCEPTED} AND through_sequence <="
            " (SELECT MAX(through_sequence) FROM history_boundaries WHERE conversation_id = ?)",
            (conversation_id, conversation_id),
        )
    }
    for record in order if within else ():
        if record.pk in within and all_purged(conn, conversation_id, record.pk):
            return record.pk
    return None


def rebuild_order(
    conn: sqlite3.Connection, conversation_id: str, records: list[checkpoints.Record]
) -> list[checkpoints.Record]:
    """The versions a compaction tries to rebuild from once the current summary went stale,
    newest first (`_compaction._rebuild`): the ancestors of the version the pointer
    designates; with none (an erasure took it with a source, SPEC §15.5), every one left."""
    head = pointed_pk(conn, conversation_id)
    if head is None:
        return sorted(records, key=lambda record: record.pk, reverse=True)
    order = list(checkpoints.lineage(records, head))
    # The sealed base a purge kept stays a candidate (last) when the lineage no longer
    # reaches it: the sealed summary merged a turn inside its range (an extension below
    # the slot, so no shared source run) and the purge erased the versions linking them.
    seen = {head, *(record.pk for record in order)}
    rest = sorted((r for r in records if r.pk not in seen), key=lambda r: r.pk, reverse=True)
    base = sealed_base(conn, conversation_id, rest)
    return order + [r for r in rest if r.pk == base]


def kept_checkpoints(conn: sqlite3.Connection, conversation_id: str, keep: int) -> set[int]:
    """The records pruning keeps beyond the newest ones (SPEC §17.5): up to `keep` spaced
    ancestors of the version the pointer designates, and the sealed base. With no pointer
    (an erasure took the current summary) the next compaction tries every version left
    (`rebuild_order`): the newest `keep` of them are kept, and the sealed base."""
    records = accepted_records(conn, conversation_id)
    order = rebuild_order(conn, conversation_id, records)
    head = pointed_pk(conn, conversation_id)
    if head is None:
        kept = {record.pk for record in order[:keep]}
    else:
        counts = {record.pk: record.count for record in records}
        kept = checkpoints.spaced_checkpoints(counts.get(head, 0), order, keep)
        order = [*(r for r in records if r.pk == head), *order]
    base = sealed_base(conn, conversation_id, order)
    if base is not None:
        kept.add(base)
    return kept if head is None else kept | checkpoints.links(records, head, kept)


def prune(
    conn: sqlite3.Connection,
    conversation_id: str,
    keep: int,
    cutoff: str | None,
    keep_checkpoints: int = 0,
) -> int:
    """Delete the conversation's records beyond the newest `keep` other than the one its
    pointer designates, the `failed` ones since its newest accepted version and the
    checkpoints (`kept_checkpoints`: up to `keep_checkpoints` spaced ancestors and the
    sealed base), and with `cutoff`, only those created before it: their text goes with
    them, and the index rows no remaining version reads. Returns how many records were
    deleted."""
    if ledger.conversation_row(conn, conversation_id) is None:
        return 0  # no turn was ever written: only records of empty plans, and no tally
    doomed = [
        row[0]
        for row in conn.execute(
            "SELECT pk, created_at FROM summaries WHERE conversation_id = ? AND pk IS NOT"
            f" (SELECT current_summary FROM conversations WHERE id = ?) AND status != '{CURRENT}'"
            # The failures since the newest accepted version are the back-off's count
            # (SPEC §17.5): kept beyond `keep`, so pruning never resets the back-off.
            f" AND NOT (status = '{FAILED}' AND pk > COALESCE((SELECT MAX(pk) FROM summaries"
            f" WHERE conversation_id = ? AND status IN {ACCEPTED}), 0))"
            " ORDER BY pk DESC LIMIT -1 OFFSET ?",
            (conversation_id, conversation_id, conversation_id, keep),
        )
        if cutoff is None or row[1] < cutoff
    ]
    if doomed:
        spared = kept_checkpoints(conn, conversation_id, keep_checkpoints)
        doomed = [pk for pk in doomed if pk not in spared]
    delete_records(conn, conversation_id, doomed)
    return len(doomed)


def delete_records(conn: sqlite3.Connection, conversation_id: str, doomed: list[int]) -> None:
    """Delete these records with their text and the index rows no remaining version reads
    (sources shared along a lineage stay while a version reads them); they count as pruned.
    Shared by pruning and by erasure (purge, `retract(erase=True)`)."""
    if not doomed:
        return
    runs = sources.runs_of(conn, doomed)
    for start in range(0, len(doomed), 500):
        chunk = doomed[start : start + 500]
        marks = ",".join("?" * len(chunk))
        conn.execute(f"DELETE FROM summary_kept WHERE summary_pk IN ({marks})", chunk)
        conn.execute(
            f"UPDATE plans SET base_summary_pk = NULL WHERE base_summary_pk IN ({marks})", chunk
        )
        conn.execute(
            f"UPDATE conversations SET current_summary = NULL WHERE current_summary IN ({marks})",
            chunk,
        )
        conn.execute(f"DELETE FROM summaries WHERE pk IN ({marks})", chunk)
    sources.release(conn, runs)
    conn.execute(
        "UPDATE conversations SET pruned_count = pruned_count + ? WHERE id = ?",
        (len(doomed), conversation_id),
    )


def verdict_triples(verdicts: object) -> Iterator[tuple[Any, Any, Any]]:
    """`mark_stale`'s argument: an iterable of 3-item tuples (or lists)."""
    if isinstance(verdicts, (str, bytes, Mapping)) or not isinstance(verdicts, Iterable):
        raise InvalidInput("verdicts: must be an iterable", field="verdicts", problem="wrong-type")
    for index, verdict in enumerate(verdicts):
        if not isinstance(verdict, (tuple, list)) or len(verdict) != 3:
            raise InvalidInput(
                f"verdicts[{index}]: must be a (conversation_id, summary_id, reason) tuple",
                field=f"verdicts[{index}]",
                problem="wrong-type",
            )
        yield verdict[0], verdict[1], verdict[2]
