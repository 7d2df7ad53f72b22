"""Which tool turns answer a `recall_history` call (SPEC §17.7), known through their unit
(§17.2) among the turns being written and the stored ones: such a result is never indexed
(`search_index`), and is blanked when an original it returned is erased (`recall_results`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import RECALL_TOOL_NAME, call_name, tool_calls_of

__all__ = ["NO_BATCH", "BatchCalls", "answers_recall", "stored_meta"]


def stored_meta(raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class BatchCalls:
    """The tool calls of the assistant turns among a batch being written, by call ID and by
    group: built once per batch, so that checking each of its tool turns costs that turn,
    not the batch (an `append_many` of 10,000 turns checked every tool turn against every
    assistant turn before)."""

    __slots__ = ("_by_group", "_by_id")

    def __init__(self, batch: Sequence[Turn] = ()) -> None:
        self._by_id: dict[str, list[Mapping[str, Any]]] = {}
        self._by_group: dict[str, list[Mapping[str, Any]]] = {}
        for turn in batch:
            if turn.role != "assistant":
                continue
            calls = tool_calls_of(turn.meta)
            for call in calls:
                call_id = call.get("id")
                if isinstance(call_id, str):
                    self._by_id.setdefault(call_id, []).append(call)
            if turn.group is not None:
                self._by_group.setdefault(turn.group, []).extend(calls)

    def with_id(self, call_id: str) -> list[Mapping[str, Any]]:
        return self._by_id.get(call_id, [])

    def in_group(self, group: str) -> list[Mapping[str, Any]]:
        return self._by_group.get(group, [])


#: No turn being written alongside.
NO_BATCH = BatchCalls()


def answers_recall(
    conn: sqlite3.Connection,
    conversation_id: str,
    role: str,
    group: str | None,
    meta: Mapping[str, Any],
    batch: BatchCalls,
) -> bool:
    """Whether a tool turn answers a `recall_history` call (SPEC §17.7), known through its
    unit, as `ledgerfold._recall_stand_in.recall_result_ids` knows it: with a `tool_call_id`,
    the call of that ID decides by its name (`function.name`, or a flat `name`), wherever it
    is (looked for in `batch`, then in the turn's group, then among every stored assistant
    turn); without one, any `recall_history` call in its group does (a copy is never indexed
    by mistake)."""
    if role != "tool":
        return False
    call_id = meta.get("tool_call_id")
    if isinstance(call_id, str):
        named = batch.with_id(call_id)
        if not named and group is not None:
            named = [call for call in _stored_group_calls(conn, conversation_id, group)
                     if call.get("id") == call_id]  # fmt: skip
        if named:
            return any(call_name(call) == RECALL_TOOL_NAME for call in named)
        # The call is outside the batch and the group: looked up among the stored turns.
        row = conn.execute(
            "SELECT 1 FROM turns AS t, json_each(json_extract(t.meta, '$.tool_calls')) AS c"
            " WHERE t.conversation_id = ? AND t.role = 'assistant'"
            " AND json_valid(json_extract(t.meta, '$.tool_calls'))"
            " AND json_extract(c.value, '$.id') = ?"
            " AND CASE WHEN json_type(c.value, '$.function') = 'object'"
            " THEN json_extract(c.value, '$.function.name')"
            " ELSE json_extract(c.value, '$.name') END = ? LIMIT 1",
            (conversation_id, call_id, RECALL_TOOL_NAME),
        ).fetchone()
        return row is not None
    if group is None:
        return False
    calls = [*batch.in_group(group), *_stored_group_calls(conn, conversation_id, group)]
    return any(call_name(call) == RECALL_TOOL_NAME for call in calls)


def _stored_group_calls(
    conn: sqlite3.Connection, conversation_id: str, group: str
) -> list[Mapping[str, Any]]:
    """The tool calls of the stored assistant turns of a group."""
    calls: list[Mapping[str, Any]] = []
    for row in conn.execute(
        "SELECT meta FROM turns WHERE conversation_id = ? AND grp = ? AND role = 'assistant'",
        (conversation_id, group),
    ):
        calls += tool_calls_of(stored_meta(row[0]))
    return calls
