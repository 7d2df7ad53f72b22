"""The turns the search index is built from (`_search_index.build`, also for
`rebuild_search_index`): a batch of the ledger's rows read by pk, each kept when it is live
and answers no `recall_history` call (SPEC §16.5, §17.7).

Text columns are read as bytes (`text_rows`) and decoded here: a row changed outside
ledgerfold to text that is not UTF-8 would make SQLite's driver fail the whole read with a
message quoting the bytes, so no index could be built (and the file, whose first writing
open builds it, could not be opened). Such a turn is left out of the index, counted and
logged by pk only; the store's other reads report it as they do (`StoreError` naming the
column). The bytes are SQLite's UTF-8 text, whatever the file's encoding (a file whose text
is stored as UTF-16 is read as the store's reads read it; `CAST(... AS BLOB)` would give
its UTF-16 bytes)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from ledgerfold.store._batch_reads import text_read_as
from ledgerfold.store._recall_answers import NO_BATCH, answers_recall, stored_meta
from ledgerfold.store._schema import TURN_LIVE

__all__ = ["decoded", "indexable_turns", "text_rows"]

_log = logging.getLogger("ledgerfold.store")


def decoded(value: object) -> str | None:
    """A stored text column read as bytes, decoded; None when it is not UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def readable(
    columns: Sequence[object],
) -> tuple[str, str, str, str | None, str | None] | None:
    """`(conversation_id, role, body, grp, meta)` read by `text_rows`, decoded; None when
    one of them is not UTF-8 text (or a required one is not text at all)."""
    conversation_id, role, body, group, meta = (decoded(value) for value in columns)
    raw_group, raw_meta = columns[3], columns[4]
    if conversation_id is None or role is None or body is None:
        return None
    if (raw_group is not None and group is None) or (raw_meta is not None and meta is None):
        return None
    return conversation_id, role, body, group, meta


def text_rows(
    conn: sqlite3.Connection, query: str, parameters: Sequence[object] = ()
) -> list[tuple[Any, ...]]:
    """Every row of `query`, each text column as the bytes of its UTF-8 text (SQLite
    converts a file's UTF-16 text), for `decoded`."""
    with text_read_as(conn, bytes):
        return conn.execute(query, tuple(parameters)).fetchall()


def indexable_turns(
    conn: sqlite3.Connection, through: int, limit: int
) -> tuple[list[tuple[int, str]], int | None, int]:
    """The `(pk, body)` pairs to index among the first `limit` turns with a pk above
    `through`, the last pk read (None when there is none) and how many turns were read."""
    rows = text_rows(
        conn,
        "SELECT pk, conversation_id, role, body, grp, meta, state, sequence FROM turns"
        " WHERE pk > ? ORDER BY pk LIMIT ?",
        (through, limit),
    )
    wanted: list[tuple[int, str]] = []
    for pk, *columns, state, sequence in rows:
        if state != TURN_LIVE:
            continue
        turn = readable(columns)
        if turn is None:
            _log.warning("search index: turn pk=%d is not UTF-8 text; left out", pk)
            continue
        conversation_id, role, body, group, meta = turn
        if not answers_recall(
            conn, conversation_id, role, group, stored_meta(meta), NO_BATCH, sequence
        ):
            wanted.append((int(pk), body))
    return wanted, (int(rows[-1][0]) if rows else None), len(rows)
