"""Compaction units split by tool-call links (SPEC §15.4, §17.2): a summary that covers
part of a unit (a call without its results, or a result without its call) is stale
(`group-split`). The checks and the eager marks run inside the caller's transaction: at an
append or edit (`mark_group_split`), at a commit (`calls_split`), at a context read and a
revalidation of a database written before the rule (`split_unit`, `split_by_links`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold._context import TurnItem
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Turn
from ledgerfold._toolcalls import tool_call_ids
from ledgerfold.store._schema import LIVE_ACCEPTED, STALE, TURN_LIVE

__all__ = ["calls_in", "calls_split", "mark_group_split", "split_by_links", "split_unit"]

#: How many assistant turns back an appended result's caller is looked for (newest first).
_CALLER_SCAN = 2000


def split_unit(
    conn: sqlite3.Connection, conversation_id: str, summary_pk: int, items: Iterable[object]
) -> str | None:
    """The ID of a raw context item whose compaction unit holds a source of the summary
    (SPEC §17.2), or None: the context's own check, for a database written before tool-call
    links made units (appends mark such summaries stale now). Only a raw result whose call
    is not raw, or a raw call whose results are not all raw, is looked up among the sources
    (groups were marked at write time already)."""
    links = (
        (item.id, item.role, item.meta)
        for item in items
        if isinstance(item, TurnItem) and item.meta
    )
    return split_by_links(conn, conversation_id, summary_pk, links)


def split_by_links(
    conn: sqlite3.Connection,
    conversation_id: str,
    summary_pk: int,
    raw: Iterable[tuple[str, str, Mapping[str, Any] | None]],
) -> str | None:
    """`split_unit` over `(id, role, meta)` of the raw turns (revalidation reads these
    without any body or summary text). Works on a connection returning text as bytes too."""
    raw_calls: dict[str, str] = {}  # call ID -> the raw turn that made it
    raw_answers: dict[str, str] = {}  # call ID -> a raw turn answering it
    for turn_id, role, meta in raw:
        if not meta:
            continue
        answered = meta.get("tool_call_id")
        if role == "tool" and isinstance(answered, str):
            raw_answers.setdefault(answered, turn_id)
        elif role == "assistant":
            for call_id in calls_in(meta.get("tool_calls")):
                raw_calls.setdefault(call_id, turn_id)
    orphan_answers = {c: i for c, i in raw_answers.items() if c not in raw_calls}
    open_calls = {c: i for c, i in raw_calls.items() if c not in raw_answers}
    if orphan_answers:
        for (meta,) in conn.execute(
            "SELECT t.meta FROM summary_sources ss JOIN turns t"
            " ON t.conversation_id = ? AND t.id = ss.turn_id WHERE ss.summary_pk = ?"
            " AND t.state = ? AND t.role = 'assistant' AND t.meta IS NOT NULL",
            (conversation_id, summary_pk, TURN_LIVE),
        ):
            for call_id in _named_calls(meta) & orphan_answers.keys():
                return orphan_answers[call_id]
    if open_calls:
        row = conn.execute(
            "SELECT CASE WHEN json_valid(t.meta) THEN json_extract(t.meta, '$.tool_call_id')"
            " END AS answered FROM summary_sources ss JOIN turns t"
            " ON t.conversation_id = ? AND t.id = ss.turn_id WHERE ss.summary_pk = ?"
            " AND t.state = ? AND t.role = 'tool'"
            " AND answered IN (SELECT value FROM json_each(?)) LIMIT 1",
            (conversation_id, summary_pk, TURN_LIVE, json.dumps(sorted(open_calls))),
        ).fetchone()
        if row is not None:
            answered = row[0].decode() if isinstance(row[0], bytes) else row[0]
            return open_calls[answered]
    return None


def mark_group_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    joined: Sequence[Turn],
    *,
    answers_too: bool = False,
) -> list[str]:
    """A turn that joins a group holding a summary's source, without being a source itself,
    splits the group (SPEC §15.4): every version citing a member goes stale (`group-split`)
    in the same transaction; returns their IDs. A late tool result is the usual case;
    tool-call links count as groups do (SPEC §17.2). With `answers_too` (an edit), a
    joining assistant turn's results are looked up too (a read of the conversation's tool
    turns: appends skip it, since a call's results come after it)."""
    joined_ids = json.dumps([turn.id for turn in joined], ensure_ascii=False)
    stale = _mark_call_split(conn, conversation_id, joined, joined_ids, answers_too)
    groups = sorted({turn.group for turn in joined if turn.group is not None})
    if not groups:
        return stale
    marks = ",".join("?" * len(groups))
    # Versions citing a member of the group, but not the joining turn itself.
    return stale + [
        str(row[0])
        for row in conn.execute(
            f"UPDATE summaries SET status = '{STALE}', reason = 'group-split'"
            f" WHERE conversation_id = ? AND status IN {LIVE_ACCEPTED}"
            " AND pk IN (SELECT ss.summary_pk FROM turns AS t"
            " JOIN summary_sources AS ss ON ss.turn_id = t.id"
            f" WHERE t.conversation_id = ? AND t.grp IN ({marks}) AND t.state = ?)"
            " AND pk NOT IN (SELECT summary_pk FROM summary_sources"
            " WHERE turn_id IN (SELECT value FROM json_each(?))) RETURNING id",
            (conversation_id, conversation_id, *groups, TURN_LIVE, joined_ids),
        ).fetchall()
    ]


def _mark_call_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    joined: Sequence[Turn],
    joined_ids: str,
    answers_too: bool = False,
) -> list[str]:
    """SPEC §17.2: a tool turn answering a call joins the caller's unit whatever its group,
    so versions citing the caller but not the answer go stale (`group-split`). The caller
    is searched from the newest assistant turn back, so a result arriving after its call
    costs a row or two (a result whose call never was made reads them all)."""
    wanted = {
        turn.meta["tool_call_id"]
        for turn in joined
        if turn.role == "tool" and turn.meta and "tool_call_id" in turn.meta
    }
    callers: list[str] = []
    # Bounded, so an app writing results for calls it never records does not pay a read of
    # the ledger per append; a caller further back is caught by the context's own check.
    # No result among the new turns: no query at all.
    rows = (
        conn.execute(
            "SELECT id, meta FROM turns WHERE conversation_id = ? AND state = ?"
            " AND role = 'assistant' AND meta IS NOT NULL ORDER BY sequence DESC LIMIT ?",
            (conversation_id, TURN_LIVE, _CALLER_SCAN),
        )
        if wanted
        else ()
    )
    for turn_id, meta in rows:
        named = _named_calls(meta)
        if named & wanted:
            callers.append(str(turn_id))
            wanted -= named
            if not wanted:
                break
    made: set[str] = set()
    for turn in joined if answers_too else ():
        if turn.role == "assistant" and turn.meta:
            made |= calls_in(turn.meta.get("tool_calls"))
    if made:
        callers.extend(
            str(row[0])
            for row in conn.execute(
                "SELECT id FROM turns WHERE conversation_id = ? AND state = ? AND role = 'tool'"
                " AND CASE WHEN json_valid(meta) THEN json_extract(meta, '$.tool_call_id') END"
                " IN (SELECT value FROM json_each(?))",
                (conversation_id, TURN_LIVE, json.dumps(sorted(made), ensure_ascii=False)),
            )
        )
    if not callers:
        return []
    return [
        str(row[0])
        for row in conn.execute(
            f"UPDATE summaries SET status = '{STALE}', reason = 'group-split'"
            f" WHERE conversation_id = ? AND status IN {LIVE_ACCEPTED}"
            " AND pk IN (SELECT summary_pk FROM summary_sources"
            " WHERE turn_id IN (SELECT value FROM json_each(?)))"
            " AND pk NOT IN (SELECT summary_pk FROM summary_sources"
            " WHERE turn_id IN (SELECT value FROM json_each(?))) RETURNING id",
            (conversation_id, json.dumps(callers, ensure_ascii=False), joined_ids),
        ).fetchall()
    ]


def calls_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    new_turns: Sequence[Turn],
    sources: Sequence[str],
) -> bool:
    """Whether turns newly covered by a summary leave part of their compaction unit out of
    `sources` through a tool-call link (SPEC §17.2; groups are checked by the caller): the
    caller of a covered result, or a result (at or after the first new turn, so the read is
    O(new turns + tail)) of a covered call."""
    answered = {
        turn.meta["tool_call_id"]
        for turn in new_turns
        if turn.role == "tool" and turn.meta and "tool_call_id" in turn.meta
    }
    calls: set[str] = set()
    for turn in new_turns:
        if turn.role == "assistant" and turn.meta:
            calls |= calls_in(turn.meta.get("tool_calls"))
    if not answered and not calls:
        return False
    covered = set(sources)
    wanted = answered - calls
    if wanted:
        for turn_id, meta in conn.execute(
            "SELECT id, meta FROM turns WHERE conversation_id = ? AND state = ?"
            " AND role = 'assistant' AND meta IS NOT NULL ORDER BY sequence DESC",
            (conversation_id, TURN_LIVE),
        ):
            named = _named_calls(meta)
            if named & wanted:
                if turn_id not in covered:
                    return True
                wanted -= named
                if not wanted:
                    break
    if calls:
        first = min(turn.sequence for turn in new_turns)
        for (turn_id,) in conn.execute(
            "SELECT id FROM turns WHERE conversation_id = ? AND state = ? AND sequence >= ?"
            " AND role = 'tool' AND CASE WHEN json_valid(meta)"
            " THEN json_extract(meta, '$.tool_call_id') END IN (SELECT value FROM json_each(?))",
            (conversation_id, TURN_LIVE, first, json.dumps(sorted(calls), ensure_ascii=False)),
        ):
            if turn_id not in covered:
                return True
    return False


def _named_calls(meta_text: str) -> set[str]:
    """The call IDs a stored meta's `tool_calls` names (none when either is malformed)."""
    try:
        meta = json.loads(meta_text)
    except ValueError:
        return set()
    return calls_in(meta.get("tool_calls") if isinstance(meta, dict) else None)


def calls_in(raw: object) -> set[str]:
    """The call IDs of `tool_calls` text (none when it is not text of a list of calls)."""
    try:
        return set(tool_call_ids(raw)) if isinstance(raw, str) else set()
    except InvalidInput:
        return set()
