"""The turn rows an erasure blanks (SPEC §15.5, §16.5): body and meta go, and the digest is
recomputed for the row as it now is. The old digest would keep the erased text recoverable:
BLAKE3 over a known encoding (SPEC §3) is no secret, and a short body ("my locker code is
NNNN", a yes or a no) is found by guessing it against the digest. ID and sequence stay."""

from __future__ import annotations

import sqlite3
from typing import Any

from ledgerfold._errors import StoreError
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._rows import TURN_COLUMNS, turn_from_row

__all__ = ["blank_turns"]


def blank_turns(conn: sqlite3.Connection, conversation_id: str, selected: str, ids: str) -> None:
    """Blank the conversation's turns whose IDs `selected` (a subquery over the JSON array
    `ids`) gives, digest included."""
    where = f"conversation_id = ? AND id IN ({selected})"
    conn.execute(f"UPDATE turns SET body = '', meta = NULL WHERE {where}", (conversation_id, ids))
    rows = lenient_rows(
        conn, f"SELECT pk, {TURN_COLUMNS} FROM turns WHERE {where}", (conversation_id, ids)
    )
    conn.executemany(
        "UPDATE turns SET digest = ? WHERE pk = ?", [(_digest(row[1:]), row[0]) for row in rows]
    )


def _digest(row: tuple[Any, ...]) -> bytes:
    """The digest of a blanked row; 32 zero bytes for one that makes no turn (a role, group
    or protection reason damaged in storage): it gives nothing of any text either."""
    try:
        return turn_from_row(row).digest
    except StoreError:
        return bytes(32)
