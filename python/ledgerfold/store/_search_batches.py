"""The turns the search index is built from (`_search_index.build`, also for
`rebuild_search_index`): a batch of the ledger's rows read by pk, each kept when it is live
and answers no `recall_history` call (SPEC §16.5, §17.7).

Bodies and meta are read as bytes and decoded here: a row changed outside ledgerfold to text
that is not UTF-8 would make SQLite's driver fail the whole read with a message quoting the
bytes, so no index could be built (and the file, whose first writing open builds it, could
not be opened). Such a turn is left out of the index, counted and logged by pk only; the
store's other reads report it as they do (`StoreError` naming the column)."""

from __future__ import annotations

import logging
import sqlite3

from ledgerfold.store._recall_answers import NO_BATCH, answers_recall, stored_meta
from ledgerfold.store._schema import TURN_LIVE

__all__ = ["decoded", "indexable_turns"]

_log = logging.getLogger("ledgerfold.store")


def decoded(value: object) -> str | None:
    """A stored text column read as bytes, decoded; None when it is not UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def indexable_turns(
    conn: sqlite3.Connection, through: int, limit: int
) -> tuple[list[tuple[int, str]], int | None, int]:
    """The `(pk, body)` pairs to index among the first `limit` turns with a pk above
    `through`, the last pk read (None when there is none) and how many turns were read."""
    rows = conn.execute(
        "SELECT pk, conversation_id, role, CAST(body AS BLOB), grp, CAST(meta AS BLOB), state,"
        " sequence FROM turns WHERE pk > ? ORDER BY pk LIMIT ?",
        (through, limit),
    ).fetchall()
    wanted: list[tuple[int, str]] = []
    for pk, conversation_id, role, raw_body, group, raw_meta, state, sequence in rows:
        if state != TURN_LIVE:
            continue
        body, meta = decoded(raw_body), decoded(raw_meta)
        if body is None or (raw_meta is not None and meta is None):
            _log.warning("search index: turn pk=%d is not UTF-8 text; left out", pk)
            continue
        if not answers_recall(
            conn, conversation_id, role, group, stored_meta(meta), NO_BATCH, sequence
        ):
            wanted.append((int(pk), body))
    return wanted, (int(rows[-1][0]) if rows else None), len(rows)
