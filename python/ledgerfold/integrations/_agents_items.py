"""Agents SDK items as turns and back (`LedgerfoldSession`'s conversion, SPEC §17.2, §17.6).

Every item becomes one turn holding the item verbatim in `meta["agents_item"]`. What the
turn itself says is what the ledger needs to keep a call with its result and a reasoning
item with what it led to:

- a `message` is a turn of its role, its text the body;
- an item that makes a call (`function_call`, and any other `*_call` item with a `call_id`:
  custom tool, computer, local shell, shell, apply-patch calls) is an assistant turn whose
  `tool_calls` names that call, and its `*_call_output` a tool turn answering it, so the
  two are one compaction unit, also across `add_items` calls (§17.2's tool-call link);
- calls read back to back (one model response's parallel calls) share a group, so they and
  their results are compacted together or not at all: a summary never sits between a call
  and its result;
- an `mcp_approval_request` and its `mcp_approval_response` share a group;
- a `reasoning` item shares the group of the item after it (a call, or the message it led
  to), which the Responses API wants sent with it.

A turn that no session wrote (an `append`, an import, another integration) reads back as
items of its role and text: a tool turn as a `function_call_output`, an assistant turn
with `tool_calls` as its text and one `function_call` a call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ledgerfold.adapters._chat import tool_group

__all__ = [
    "ITEM_KEY",
    "is_call",
    "is_output",
    "item_groups",
    "item_message",
    "kind",
    "restored",
    "stored",
]

#: The meta key holding each item's original JSON.
ITEM_KEY = "agents_item"

# The str field of an item that the turn already holds, so the verbatim copy leaves it out.
_MOVED = {"message": "content", "function_call_output": "output", "function_call": "arguments"}
_MOVED_KEY = "__ledgerfold_moved__"


def kind(item: Mapping[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


def is_call(item: Mapping[str, Any]) -> bool:
    """The item makes a call that a `*_call_output` item answers."""
    name = kind(item)
    return isinstance(name, str) and name.endswith("_call") and _call_id(item) is not None


def is_output(item: Mapping[str, Any]) -> bool:
    """The item is the result of a call (`*_call_output`)."""
    name = kind(item)
    return isinstance(name, str) and name.endswith("_call_output") and _call_id(item) is not None


def _call_id(item: Mapping[str, Any]) -> str | None:
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def _text_of(content: Any) -> str:
    """Text of a message's content: a str, or the text of its parts (input/output text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def item_message(item: Mapping[str, Any]) -> dict[str, Any]:
    """The chat message an item is stored as (before its verbatim copy is added)."""
    name = kind(item)
    if name == "message":
        role = item.get("role")
        return {"role": role, "content": _text_of(item.get("content"))}
    if name == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if name == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output) or json.dumps(output)
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": text}
    if is_call(item):  # the link only: the item itself stays in its verbatim copy
        call = {
            "id": _call_id(item),
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if is_output(item):
        return {"role": "tool", "tool_call_id": _call_id(item), "content": ""}
    if name == "reasoning":
        return {"role": "assistant", "content": _text_of(item.get("summary"))}
    return {"role": "assistant", "content": ""}


def item_groups(items: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """The group of each item's turn (None: no group), as the module says. A call's group is
    `tool_group` of the first call ID of its run, so an `add_items` that brings one call and
    a later one that brings its result give them one group."""
    groups: list[str | None] = [None] * len(items)
    of_call: dict[str, str] = {}
    run: str | None = None
    for at, item in enumerate(items):
        if is_call(item):
            call_id = _call_id(item)
            assert call_id is not None
            run = run or tool_group((call_id,))
            groups[at] = of_call[call_id] = run
            continue
        run = None
        name = kind(item)
        if is_output(item):
            call_id = _call_id(item)
            assert call_id is not None
            groups[at] = of_call.get(call_id) or tool_group((call_id,))
        elif name == "mcp_approval_request" and isinstance(item.get("id"), str):
            groups[at] = tool_group((item["id"],))
        elif name == "mcp_approval_response" and isinstance(item.get("approval_request_id"), str):
            groups[at] = tool_group((item["approval_request_id"],))
    for at in range(len(items) - 2, -1, -1):  # from the end: reasoning before reasoning
        if kind(items[at]) == "reasoning":
            follower = groups[at + 1] or f"agents-reasoning:{uuid.uuid4().hex}"
            groups[at] = groups[at + 1] = follower
    return groups


def stored(item: Mapping[str, Any]) -> str:
    """The item's verbatim JSON, less the str field the turn holds anyway."""
    moved = _MOVED.get(kind(item))
    if moved is not None and isinstance(item.get(moved), str) and _MOVED_KEY not in item:
        item = {**{k: v for k, v in item.items() if k != moved}, _MOVED_KEY: moved}
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def restored(role: str, text: str, meta: Mapping[str, str] | None) -> list[Any]:
    """The item as it came, from a turn's role, text and meta: one item, or, for a turn no
    session wrote, the items its role and text make (see the module)."""
    meta = meta or {}
    verbatim = meta.get(ITEM_KEY)
    if verbatim is None:
        return _foreign(role, text, meta)
    item = json.loads(verbatim)
    moved = item.pop(_MOVED_KEY, None) if isinstance(item, dict) else None
    if moved == "arguments":
        item[moved] = json.loads(meta["tool_calls"])[0]["function"]["arguments"]
    elif moved is not None:
        item[moved] = text
    return [item]


def _foreign(role: str, text: str, meta: Mapping[str, str]) -> list[Any]:
    if role == "tool":
        call_id = meta.get("tool_call_id")
        if call_id:
            return [{"type": "function_call_output", "call_id": call_id, "output": text}]
        return [{"role": "user", "content": text}]
    if role == "system":
        return [{"role": meta.get("chat_role") or "system", "content": text}]
    items: list[Any] = [{"role": role, "content": text}] if text or role != "assistant" else []
    if role == "assistant":
        items += [
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call.get("function", {}).get("name") or "",
                "arguments": call.get("function", {}).get("arguments") or "",
            }
            for call in _calls(meta.get("tool_calls"))
        ]
    return items or [{"role": role, "content": text}]


def _calls(text: str | None) -> list[Mapping[str, Any]]:
    """The calls of a `tool_calls` meta value that name an ID (others are left out)."""
    try:
        calls = json.loads(text) if text else []
    except ValueError:
        return []
    if not isinstance(calls, list):
        return []
    return [
        call
        for call in calls
        if isinstance(call, Mapping)
        and isinstance(call.get("id"), str)
        and isinstance(call.get("function", {}), Mapping)
    ]
