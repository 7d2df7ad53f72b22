"""Blanking the `recall_history` results that returned an erased turn (SPEC §16.5, §17.7).

A recall result stored back in the ledger (the tool turn answering a `recall_history` call)
is a copy of the passages it returned: when an original is erased (`retract(...,
erase=True)`) or purged (`purge_through`, retention), every result that returned it gets a
placeholder body, so the passage leaves the file. The tool turn stays, so its call stays
answered; its earlier versions go; its digest is the new body's, so a summary citing it goes
stale (`source-modified`) as after an edit. Results are found by their JSON body naming the
erased turn's ID among its hits, and confirmed through their unit (`recall_answers`): a
`recall_history` call among the live and retracted turns answers it, or no call does any
more (its call was purged, or retracted while it stayed: a result without a call ID). Such a
copy may be in the search index (the live rule, SPEC §16.5, counts live calls only): its
passages go before its body changes, and the placeholder follows the rule.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from ledgerfold._model import Turn
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._ledger import bump_revision, mark_citing_stale
from ledgerfold.store._recall_answers import NO_BATCH, answers_no_call, answers_recall
from ledgerfold.store._rows import TURN_COLUMNS, meta_json, turn_from_row
from ledgerfold.store._schema import RECALL_SHAPE, TURN_LIVE, TURN_RETRACTED

__all__ = ["ERASED_RESULT", "blank_recall_results"]

#: The body a blanked result keeps: still a result the model can read, with no passage.
ERASED_RESULT: Final = json.dumps(
    {"hits": [], "note": "This recall_history result was removed: a message it quoted was erased."}
)


def blank_recall_results(
    conn: sqlite3.Connection,
    conversation_id: str,
    erased_ids_sql: str,
    params: tuple[Any, ...],
    spared_pks_sql: str | None = None,
    spared_params: tuple[Any, ...] = (),
) -> int:
    """Give every live or retracted recall result of the conversation that returned one of
    the selected turn IDs the placeholder body (results among `spared_pks_sql`, which the
    caller blanks itself, are left alone). Returns how many were blanked."""
    spared = f" AND pk NOT IN ({spared_pks_sql})" if spared_pks_sql is not None else ""
    # Only bodies shaped as recall results are read, through the indexes over them
    # (`_schema.RECALL_TURNS_INDEX`, `RECALL_HISTORY_INDEX`, whose conditions these repeat):
    # the conversation's recall results and the few edited ones, not its every turn. A
    # result edited since it returned the turn (its body, or even its role) still holds the
    # quote in its history.
    rows = conn.execute(
        f"SELECT pk, state, {TURN_COLUMNS} FROM turns WHERE pk IN"
        f" (SELECT pk FROM turns WHERE conversation_id = ? AND role = 'tool' AND {RECALL_SHAPE}"
        f" AND {_NAMES.format(erased=erased_ids_sql)}"
        f" UNION SELECT turn_pk FROM turn_history WHERE role = 'tool' AND {RECALL_SHAPE}"
        f" AND {_NAMES.format(erased=erased_ids_sql)})"
        # `+`: the rows are read by pk, never by a walk of the conversation.
        f" AND +conversation_id = ? AND state IN ({TURN_LIVE}, {TURN_RETRACTED}){spared}"
        " ORDER BY pk",
        (conversation_id, *params, *params, conversation_id, *spared_params),
    ).fetchall()
    blanked: list[str] = []
    live: list[tuple[int, Turn]] = []
    for pk, state, *columns in rows:
        turn = turn_from_row(tuple(columns))
        as_result = turn if turn.role == "tool" else turn.replace(role="tool")
        if not _a_copy(conn, conversation_id, as_result, live=state == TURN_LIVE):
            continue  # a tool result that merely looks like one
        new = turn.replace(body=ERASED_RESULT)
        conn.execute("DELETE FROM turn_history WHERE turn_pk = ?", (pk,))
        # A body is never changed behind the index's back.
        search_index.unindex(conn, "pk = ?", (pk,))
        conn.execute(
            "UPDATE turns SET body = ?, meta = ?, digest = ? WHERE pk = ?",
            (new.body, meta_json(new.meta), new.digest, pk),
        )
        blanked.append(turn.id)
        if state == TURN_LIVE:
            live.append((pk, new))
    # One that no live call makes a recall result is a tool turn to search: its placeholder.
    search_index.redecide(conn, conversation_id, live)
    if blanked:
        marks = ",".join("?" * len(blanked))
        mark_citing_stale(conn, conversation_id, marks, tuple(blanked), "source-modified")
        if live:
            bump_revision(conn, conversation_id)
    return len(blanked)


#: SQL: whether `body` is a recall result whose hits name a selected turn (`{erased}`: the
#: selection). One expression that never fails: the hits are read only when `body` has
#: their shape, and a hit's `turn_id` only when the hit is an object (a tool's output of
#: that shape may list strings or numbers, which are no JSON text to read a key of).
_NAMES = (
    f"CASE WHEN {RECALL_SHAPE} THEN EXISTS (SELECT 1 FROM json_each(body, '$.hits') AS h"
    " WHERE CASE WHEN h.type = 'object' THEN json_extract(h.value, '$.turn_id') END"
    " IN ({erased})) END"
)


def _a_copy(conn: sqlite3.Connection, conversation_id: str, turn: Turn, *, live: bool) -> bool:
    """Whether a tool turn whose body looks like a recall result is one to blank: a
    `recall_history` call answers it among the live turns (a live result) or among the live
    and retracted ones, or no call answers it any more."""
    meta = turn.meta or {}
    return any(
        answers_recall(
            conn,
            conversation_id,
            turn.role,
            turn.group,
            meta,
            NO_BATCH,
            turn.sequence,
            live=view,
        )
        for view in ((True, False) if live else (False,))
    ) or answers_no_call(conn, conversation_id, turn.group, meta, turn.sequence)
