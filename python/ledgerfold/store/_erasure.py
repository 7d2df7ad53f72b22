"""Erasure inside one transaction (SPEC §15.5, §16.5, §17.7): what is left of a turn
retracted or purged earlier, blanking erased turns (body, meta, digest, earlier versions,
index rows, the recall results quoting them) with every summary version citing them, and
deleting a whole conversation. Split from `_retention` (purges), which it shares
`citing` with."""

from __future__ import annotations

import json
import sqlite3

from ledgerfold.store import _search_index as search_index
from ledgerfold.store import _sources as sources
from ledgerfold.store import _summaries as summaries
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._erased_rows import blank_turns
from ledgerfold.store._recall_results import blank_recall_results
from ledgerfold.store._retention import citing
from ledgerfold.store._schema import TURN_PURGED, TURN_RETRACTED

__all__ = ["delete_conversation", "erase_body", "retracted"]


def retracted(
    conn: sqlite3.Connection, conversation_id: str, turn_id: str
) -> tuple[int | None, int] | None:
    """A turn retracted or purged earlier: its sequence (None when the stored one is not an
    integer: a row damaged in storage), the conversation's revision; or None."""
    found = lenient_rows(
        conn,
        "SELECT t.sequence, c.revision FROM turns t JOIN conversations c ON c.id ="
        " t.conversation_id WHERE t.conversation_id = ? AND t.id = ? AND t.state IN (?, ?)",
        (conversation_id, turn_id, TURN_RETRACTED, TURN_PURGED),
    )
    if not found:
        return None
    sequence, revision = found[0]
    return (sequence if type(sequence) is int else None), int(revision)


def erase_body(conn: sqlite3.Connection, conversation_id: str, turn_ids: list[str]) -> int:
    """Blank retracted turns' bodies, meta and digests and drop their earlier versions (IDs
    and sequences stay), and erase every summary version (or rejected result) that
    cites one of them: their text may quote it (retraction already made them stale). Returns
    how many versions went (they count as pruned)."""
    selected = "SELECT value FROM json_each(?)"
    ids = json.dumps(turn_ids, ensure_ascii=False)
    doomed = [
        row[0] for row in conn.execute(citing(selected, None), (conversation_id, ids, ids, None))
    ]
    if doomed:
        summaries.delete_records(conn, conversation_id, doomed)
    conn.execute(
        "DELETE FROM turn_history WHERE turn_pk IN (SELECT pk FROM turns"
        f" WHERE conversation_id = ? AND id IN ({selected}))",
        (conversation_id, ids),
    )
    search_index.unindex(
        conn, f"conversation_id = ? AND id IN ({selected})", (conversation_id, ids)
    )
    blank_turns(conn, conversation_id, selected, ids)  # the digest too: no guessing against it
    blank_recall_results(conn, conversation_id, selected, (ids,))  # SPEC §16.5, §17.7
    search_index.scrub(conn)
    return len(doomed)


def delete_conversation(conn: sqlite3.Connection, conversation_id: str) -> int:
    """Erase a conversation's turns, turn history, summaries, plans, index rows and
    boundaries. Returns how many turn rows went (0 for an unknown conversation)."""
    summary_pks = "SELECT pk FROM summaries WHERE conversation_id = ?"
    turn_pks = "SELECT pk FROM turns WHERE conversation_id = ?"
    key = (conversation_id,)
    conn.execute(f"DELETE FROM summary_kept WHERE summary_pk IN ({summary_pks})", key)
    conn.execute("DELETE FROM active_plans WHERE conversation_id = ?", key)
    conn.execute("UPDATE conversations SET current_summary = NULL WHERE id = ?", key)
    conn.execute("DELETE FROM summaries WHERE conversation_id = ?", key)
    sources.delete_conversation_runs(conn, conversation_id)
    conn.execute("DELETE FROM plans WHERE conversation_id = ?", key)
    conn.execute(f"DELETE FROM turn_history WHERE turn_pk IN ({turn_pks})", key)
    search_index.unindex(conn, "conversation_id = ?", key)
    turns = conn.execute("DELETE FROM turns WHERE conversation_id = ?", key).rowcount
    conn.execute("DELETE FROM history_boundaries WHERE conversation_id = ?", key)
    conn.execute("DELETE FROM conversations WHERE id = ?", key)
    search_index.scrub(conn)
    return turns
