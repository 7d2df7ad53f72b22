"""What a summarizer sees in place of a `recall_history` result (SPEC §17.7).

A tool turn answering a `recall_history` call holds copies of earlier passages: the
summarizer never gets its text (a summary would quote an original a second time, and would
keep quoting it after the original is erased). It sees `recall_history result: k passages`
instead, so its line reads `[seq N tool] recall_history result: k passages`. A result is
recognised through its unit (SPEC §17.2): its `tool_call_id` names a `recall_history` call
of an assistant turn among the turns given; without one, its group holds such a call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ledgerfold import _native
from ledgerfold._model import Turn

__all__ = ["RECALL_TOOL_NAME", "call_name", "recall_result_ids", "stand_in", "tool_calls_of"]

#: The recall tool's function name (SPEC §16.2), published as `ledgerfold.tools.RECALL_TOOL_NAME`:
#: its results are never indexed nor a summary's text (§17.7).
RECALL_TOOL_NAME: Final = "recall_history"


def tool_calls_of(meta: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The call objects of a turn's `tool_calls` meta (none when it is not JSON of a list)."""
    raw = (meta or {}).get("tool_calls")
    if not isinstance(raw, str):
        return []
    try:
        calls = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def call_name(call: Mapping[str, Any]) -> object:
    """A call's function name (`function.name`, or a flat `name`)."""
    function = call.get("function")
    return function.get("name") if isinstance(function, dict) else call.get("name")


def recall_result_ids(turns: Sequence[Turn]) -> frozenset[str]:
    """The IDs of the tool turns among `turns` (in sequence order) that answer a
    `recall_history` call made by an assistant turn among `turns`: with a `tool_call_id`, the
    call it is paired with (SPEC §17.2: the nearest call of its ID before it, so a call ID
    reused for another tool is that tool's) decides by its name; without one, a
    `recall_history` call in its group does."""
    recall_groups = {
        turn.group
        for turn in turns
        if turn.role == "assistant"
        and turn.group is not None
        and any(call_name(call) == RECALL_TOOL_NAME for call in tool_calls_of(turn.meta))
    }
    makers = _native.answer_makers(turns)
    found: set[str] = set()
    for turn, maker in zip(turns, makers, strict=True):
        if turn.role != "tool":
            continue
        call_id = (turn.meta or {}).get("tool_call_id")
        if call_id is not None:
            if maker is not None and any(
                call.get("id") == call_id and call_name(call) == RECALL_TOOL_NAME
                for call in tool_calls_of(turns[maker].meta)
            ):
                found.add(turn.id)
        elif turn.group is not None and turn.group in recall_groups:
            found.add(turn.id)
    return frozenset(found)


def stand_in(body: str) -> str:
    """`recall_history result: k passages`, k the hits the result's JSON holds (0 when it
    holds none: an error, or a result blanked after an erasure)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        parsed = None
    hits = parsed.get("hits") if isinstance(parsed, dict) else None
    count = len(hits) if isinstance(hits, list) else 0
    return f"{RECALL_TOOL_NAME} result: {count} passages"
