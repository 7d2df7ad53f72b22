"""Reads of summary records for `SQLiteStore` (SPEC §9, §16.3): the attempt history, a
version's sources, the sources its text cites, the versions citing a turn. Each runs inside
the caller's read transaction; the arguments are validated."""

from __future__ import annotations

import sqlite3

from ledgerfold._citations import cited_sequences, cited_turns
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Turn
from ledgerfold._summary import SummaryEnvelope
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _summaries as summaries
from ledgerfold.store._protocol import SummaryRecord
from ledgerfold.store._rows import SUMMARY_COLUMNS

__all__ = ["cited_sources", "citing", "history", "sources_of"]


def history(
    conn: sqlite3.Connection, cache: summaries.VersionCache, conversation_id: str
) -> list[SummaryRecord]:
    """Every attempt of the conversation, oldest first."""
    rows = conn.execute(
        f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? ORDER BY pk",
        (conversation_id,),
    ).fetchall()
    return [
        SummaryRecord(
            envelope=None
            if row[1] is None
            else summaries.version(conn, cache, tuple(row)).envelope,
            status=row[4],
            reason=row[5],
            created_at=row[6],
            plan_id=row[3],
        )
        for row in rows
    ]


def _envelope(
    conn: sqlite3.Connection, cache: summaries.VersionCache, summary_id: str
) -> SummaryEnvelope:
    """The version with this ID; an unknown ID is `InvalidInput`."""
    row = conn.execute(
        f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE id = ?", (summary_id,)
    ).fetchone()
    if row is None:
        raise InvalidInput(
            f"summary_id: unknown summary {summary_id!r}",
            field="summary_id",
            problem="unknown-value",
        )
    return summaries.version(conn, cache, tuple(row)).envelope


def sources_of(
    conn: sqlite3.Connection, cache: summaries.VersionCache, summary_id: str
) -> list[Turn]:
    """The version's sources still in the ledger, in source order."""
    envelope = _envelope(conn, cache, summary_id)
    found = ledger.get_turns(conn, envelope.conversation_id, envelope.source_ids)
    by_id = {turn.id: turn for turn in found}
    return [by_id[turn_id] for turn_id in envelope.source_ids if turn_id in by_id]


def cited_sources(
    conn: sqlite3.Connection, cache: summaries.VersionCache, summary_id: str
) -> list[Turn]:
    """The live sources whose sequence the version's text cites, in ascending sequence."""
    envelope = _envelope(conn, cache, summary_id)
    cited = sorted(cited_sequences(envelope.text))
    candidates = ledger.turns_at(conn, envelope.conversation_id, cited)
    return cited_turns(envelope.text, envelope.source_ids, candidates)


def citing(conn: sqlite3.Connection, conversation_id: str, turn_id: str) -> list[str]:
    """IDs of the accepted versions whose sources include the turn, oldest first."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT s.id FROM summaries s WHERE s.conversation_id = ? AND s.pk IN"
            " (SELECT summary_pk FROM summary_sources WHERE turn_id = ?) ORDER BY s.pk",
            (conversation_id, turn_id),
        )
    ]
