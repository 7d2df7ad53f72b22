"""A summary's slot (`summaries.through_sequence`, SPEC §15.1) checked against its sources
when the store reads the version (`_summaries.pointed`): a slot another tool changed is a
damaged record, as a record that does not read back is."""

from __future__ import annotations

import sqlite3

from ledgerfold.store._rows import DamagedSummary, Version

__all__ = ["check_slot"]


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
