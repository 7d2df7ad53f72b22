"""A summary's slot (`summaries.through_sequence`, SPEC §15.1) checked against its sources
when the store reads the version (`_summaries.pointed`): a slot another tool changed is a
damaged record, as a record that does not read back is."""

from __future__ import annotations

import sqlite3

from ledgerfold.store._rows import DamagedSummary, Version

__all__ = ["SLOT_SOUND_SQL", "check_slot"]

# The sources of summary row `s` (the `summary_sources` view's rows of it), by position.
_SOURCES = "run_sources r WHERE r.run_pk = s.source_run AND r.position < s.source_count"

_LAST_ID = f"(SELECT r.turn_id FROM {_SOURCES} ORDER BY r.position DESC LIMIT 1)"

#: SQL: 1 when the slot of summary row `s` is sound by `check_slot`'s rule, else 0 — the
#: same tests in the same order, for the callers that list records without reading each
#: (deep revalidation's listing, `stats()`): no source: sound; a slot that is no integer:
#: damaged; its last source (by position) not a turn of its conversation: sound (the full
#: check judges it); else sound when that turn's sequence is not above the slot and the turn
#: at the slot is one of its sources — the last one, or else any (its sources scanned).
#: The usual case first, from indexes alone (no turn row read): the turn at the slot is the
#: source at position `source_count - 1` (three key probes). Otherwise indexed lookups of
#: the one summary; its sources are scanned only for a slot that is not its last source's.
SLOT_SOUND_SQL = (
    "(CASE"
    " WHEN typeof(s.through_sequence) = 'integer' AND (SELECT a.pk FROM turns a"
    "  WHERE a.conversation_id = s.conversation_id AND a.sequence = s.through_sequence)"
    "  = (SELECT l.pk FROM run_sources r JOIN turns l ON l.conversation_id = s.conversation_id"
    "  AND l.id = r.turn_id WHERE r.run_pk = s.source_run AND r.position = s.source_count - 1)"
    "  THEN 1"
    f" WHEN NOT EXISTS (SELECT 1 FROM {_SOURCES}) THEN 1"
    " WHEN typeof(s.through_sequence) <> 'integer' THEN 0"
    " ELSE IFNULL((SELECT NOT (typeof(l.sequence) = 'integer' AND l.sequence > s.through_sequence)"
    "  AND IFNULL((SELECT CASE WHEN a.id = l.id THEN 1"
    f"   ELSE EXISTS (SELECT 1 FROM {_SOURCES} AND r.turn_id = a.id) END"
    "   FROM turns a WHERE a.conversation_id = s.conversation_id"
    "   AND a.sequence = s.through_sequence), 0)"
    f"  FROM turns l WHERE l.conversation_id = s.conversation_id AND l.id = {_LAST_ID}), 1)"
    " END)"
)


def check_slot(conn: sqlite3.Connection, version: Version) -> None:
    """`DamagedSummary` when a version's slot is not its sources' last sequence (another
    tool's write: trusted, the context would leave turns out or show them twice, and an
    extension would cite covered turns again): no number, below its last source (sources
    are in ledger order, a turn kept below a purge joining after them), or no source's.
    Run when the version is read from its row (with its source IDs, O(sources) natively)."""
    envelope, through = version.envelope, version.through_sequence
    ids = envelope.source_ids
    if not len(ids):
        return
    if type(through) is int:
        last = conn.execute(
            "SELECT sequence FROM turns WHERE conversation_id = ? AND id = ?",
            (envelope.conversation_id, ids[len(ids) - 1]),
        ).fetchone()
        at = conn.execute(
            "SELECT id FROM turns WHERE conversation_id = ? AND sequence = ?",
            (envelope.conversation_id, through),
        ).fetchone()
        if last is None:  # its sources are not its conversation's: the full check says so
            return
        below = type(last[0]) is int and last[0] > through
        if not below and at is not None and at[0] in ids:
            return
    raise DamagedSummary(
        f"damaged row in table summaries, column through_sequence: pk {version.pk}"
        f" (summary {envelope.id!r}); the database was changed outside ledgerfold",
        summary_id=envelope.id,
    )
