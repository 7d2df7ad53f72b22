"""The meta of tool calls and results, and the small policy, that the compaction-unit tests
share (SPEC §17.2)."""

from __future__ import annotations

import json

import ledgerfold as lf


def calls(*call_ids: str, name: str = "f") -> dict[str, str]:
    """An assistant turn's meta calling `name` once per ID, in order."""
    return {
        "tool_calls": json.dumps(
            [
                {"id": c, "type": "function", "function": {"name": name, "arguments": "{}"}}
                for c in call_ids
            ]
        )
    }


def answer(call_id: str) -> dict[str, str]:
    """A tool turn's meta answering that call ID."""
    return {"tool_call_id": call_id}


def policy(keep_tail: int = 2) -> lf.CompactionPolicy:
    """Compact whatever is outside the tail (`min_new_turns=1`)."""
    return lf.CompactionPolicy("v1", keep_tail=keep_tail, min_new_turns=1)
