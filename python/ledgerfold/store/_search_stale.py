"""Index rows written from a body that is no longer the turn's (SPEC §16.1: the index is
derived from the ledger).

A body changed behind the library's back (raw SQL) keeps the index rows of its earlier
text. When a deep revalidation's repair accepts the new bytes (`repair_digests`), those rows
must go: left, a search for the earlier words finds the turn (its passage cut from the new
body), the new words are not found, and a later erasure deletes the new body's tokens,
leaving the earlier text's terms in the file. The index is contentless, so FTS5 deletes a
row only given the tokens it was written with: they are read back from the index itself
(`_search_vocab`: one scan of the index, and a repair is rare), the rows deleted with
them, and the body as it is now indexed as the write paths would (a live turn that answers
no `recall_history` call).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ledgerfold.store import _search_index as search_index
from ledgerfold.store._recall_answers import NO_BATCH, answers_recall, stored_meta
from ledgerfold.store._schema import TURN_LIVE
from ledgerfold.store._search_batches import readable, text_rows
from ledgerfold.store._search_index import SLOT_BITS, _indexed_through, _insert
from ledgerfold.store._search_vocab import indexed_tokens

__all__ = ["reindex_changed"]


def reindex_changed(conn: sqlite3.Connection, turn_pks: Sequence[int]) -> None:
    """In the caller's write transaction: replace the index rows of these turns (bodies
    changed outside the library) with those of their bodies as they are now."""
    through = _indexed_through(conn)
    wanted = [pk for pk in turn_pks if pk <= through]  # later ones: the build indexes them
    if not wanted:
        return
    search_index.flush_pending(conn)
    rows = indexed_tokens(conn, wanted, SLOT_BITS)
    conn.executemany(
        "INSERT INTO search_fts (search_fts, rowid, tokens) VALUES ('delete', ?, ?)",
        sorted(rows.items()),
    )
    conn.execute(
        "DELETE FROM search_offsets WHERE turn_pk IN (SELECT value FROM json_each(?))",
        (json.dumps(wanted),),
    )
    fresh: list[tuple[int, str]] = []
    for pk, *columns, sequence in text_rows(
        conn,
        "SELECT pk, conversation_id, role, body, grp, meta, sequence FROM turns"
        " WHERE pk IN (SELECT value FROM json_each(?)) AND state = ? ORDER BY pk",
        (json.dumps(wanted), TURN_LIVE),
    ):
        turn = readable(columns)
        if turn is None:
            continue  # not UTF-8 text: left out, as the build leaves it out
        conversation_id, role, body, group, meta = turn
        if not answers_recall(
            conn, conversation_id, role, group, stored_meta(meta), NO_BATCH, sequence
        ):
            fresh.append((int(pk), body))
    _insert(conn, fresh)
