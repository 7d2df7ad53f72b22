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

__all__ = ["answers_recall", "stored_meta"]


def stored_meta(raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def answers_recall(
    conn: sqlite3.Connection,
    conversation_id: str,
    role: str,
    group: str | None,
    meta: Mapping[str, Any],
    batch: Sequence[Turn],
) -> bool:
    """Whether a tool turn answers a `recall_history` call (SPEC §17.7), known through its
    unit: the assistant turns of its group (in `batch` or stored), else the stored call its
    `tool_call_id` names. With a `tool_call_id`, that call's name decides; without one, any
    `recall_history` call in the group does (a copy is never indexed by mistake)."""
    if role != "tool":
        return False
    call_id = meta.get("tool_call_id")
    assistants: list[Mapping[str, Any]] = [
        turn.meta or {} for turn in batch if turn.role == "assistant" and turn.meta
    ]
    if group is not None:
        assistants = [
            turn.meta or {} for turn in batch if turn.role == "assistant" and turn.group == group
        ]
        assistants += [
            stored_meta(row[0])
            for row in conn.execute(
                "SELECT meta FROM turns WHERE conversation_id = ? AND grp = ?"
                " AND role = 'assistant'",
                (conversation_id, group),
            )
        ]
    calls = [call for assistant in assistants for call in tool_calls_of(assistant)]
    if isinstance(call_id, str):
        named = [call for call in calls if call.get("id") == call_id]
        if not named and group is None:
            # No group: the call is looked up among the stored assistant turns.
            row = conn.execute(
                "SELECT 1 FROM turns AS t, json_each(json_extract(t.meta, '$.tool_calls')) AS c"
                " WHERE t.conversation_id = ? AND t.role = 'assistant'"
                " AND json_valid(json_extract(t.meta, '$.tool_calls'))"
                " AND json_extract(c.value, '$.id') = ?"
                " AND json_extract(c.value, '$.function.name') = ? LIMIT 1",
                (conversation_id, call_id, RECALL_TOOL_NAME),
            ).fetchone()
            return row is not None
        return any(call_name(call) == RECALL_TOOL_NAME for call in named)
    return group is not None and any(call_name(call) == RECALL_TOOL_NAME for call in calls)
