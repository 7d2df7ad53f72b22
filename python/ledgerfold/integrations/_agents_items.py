"""Agents SDK items as turns and back (`LedgerfoldSession`'s conversion, SPEC §17.2, §17.6).

Every item becomes one turn holding the item verbatim in `meta["agents_item"]`. What the
turn itself says is what the ledger needs to keep a call with its result and a reasoning
item with what it led to:

- a `message` is a turn of its role, its text the body (a function result's too); its
  image, audio and file parts are recorded by type, as the chat adapter records them;
- an item that makes a call (`_agents_links.LINKS` says which and by what key: the SDK's
  call types, and any other `*_call` item with a `call_id`, but a hosted tool's, which
  nothing answers) is an assistant turn whose `tool_calls` names that call (a custom
  tool's by its name, with its input as the arguments), and its result (`*_call_output`,
  `program_output`, `tool_search_output`) a tool turn answering it, whose text is the
  result's text output (a custom tool's, a local shell's; a shell's stdout and stderr),
  so the two are one compaction unit, also across `add_items` calls (§17.2's tool-call
  link); an `mcp_approval_request` and its `mcp_approval_response` are linked the same way;
- the items of one model response (from the first item the model wrote to the next item it
  reads: a user message, a result) share a group when they hold a call, a reasoning item
  or a server-run tool search (its call and output, paired by order: no `call_id`), so its
  reasoning, its preamble, its parallel calls and (in the same `add_items`) their results
  are compacted together or not at all: a summary never sits between a call and its
  result, nor leaves a call without its reasoning item (the Responses API refuses both).

A turn that no session wrote (an `append`, an import, another integration), or whose
verbatim copy another tool damaged, reads back as items of its role and text: a tool turn
as a `function_call_output` (without `call_id` when it answers no call: left out of
`get_items`, never a user message), an assistant turn with `tool_calls` as its text and one
`function_call` a call, and a user turn whose image, audio and file parts the chat adapter
kept (`meta["content_parts"]`) with them as Responses input parts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ledgerfold._errors import InvalidInput
from ledgerfold._recall_stand_in import tool_calls_of
from ledgerfold._validate import non_finite_at
from ledgerfold.adapters._chat import tool_group
from ledgerfold.adapters._input_audio import audio_of
from ledgerfold.integrations._agents_edits import (
    held_text,
    is_part,
    output_streams,
    reasoning_field,
    text_restored,
)
from ledgerfold.integrations._agents_links import Link, link_of, link_value

__all__ = [
    "CALL_OUTPUTS",
    "ITEM_KEY",
    "RestoredTurn",
    "RestoredTurns",
    "audio_of",
    "is_call",
    "is_input",
    "is_output",
    "item_groups",
    "item_message",
    "kind",
    "link_id",
    "newest_calls",
    "non_finite_at",
    "restored",
    "stored",
]

#: The meta key holding each item's original JSON.
ITEM_KEY = "agents_item"

# The str field of an item that the turn already holds, so the verbatim copy leaves it out.
_MOVED = {
    "message": "content",
    "function_call_output": "output",
    "function_call": "arguments",
    "custom_tool_call": "input",
    "mcp_call": "output",
}
#: The moved fields the turn holds as its call's arguments (the others: as its text).
_AS_ARGUMENTS = ("arguments", "input")
_MOVED_KEY = "__ledgerfold_moved__"


#: The Agents SDK's call item types and their results' (the SDK's own table,
#: `agents.run_internal.items._TOOL_CALL_TO_OUTPUT_TYPE` in 0.24, copied: it is private);
#: what links each call and output is `_agents_links.LINKS`.
CALL_OUTPUTS = {
    "program": "program_output",
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "tool_search_call": "tool_search_output",
}


def kind(item: Mapping[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


def link_id(item: Mapping[str, Any]) -> str | None:
    """The ID that links a call and its result (`_agents_links.LINKS`: `call_id`, a local
    shell output's `id` when it has no `call_id`, an approval request's `id` and its
    response's `approval_request_id`); None when it has none (a non-empty str)."""
    _, value = link_value(item, link_of(kind(item)) or _BY_CALL_ID)
    return value if isinstance(value, str) and value else None


#: What `link_id` reads of an item no link names (a message: no call it makes or answers).
_BY_CALL_ID = Link(("call_id",), output=False, optional=True)


def is_call(item: Mapping[str, Any]) -> bool:
    """The item makes a call (or asks an approval) that another item answers."""
    link = link_of(kind(item))
    return link is not None and not link.output and link_id(item) is not None


def is_output(item: Mapping[str, Any]) -> bool:
    """The item answers a call (or an approval request)."""
    link = link_of(kind(item))
    return link is not None and link.output and link_id(item) is not None


def is_input(item: Mapping[str, Any]) -> bool:
    """An item the model reads rather than writes: a message not the assistant's, a result."""
    if kind(item) == "message":
        return item.get("role") != "assistant"
    return is_output(item)


def _text_of(content: Any) -> str:
    """Text of a message's content: a str, or the text of its parts (input/output text, and
    a refusal's: what the assistant said)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("refusal" if part.get("type") == "refusal" else "text", ""))
            for part in content
            if isinstance(part, Mapping)
        )
    return ""


def _parts(output: list[Any]) -> list[dict[str, Any]]:
    """A result's content parts as chat content parts: its text (and refusal) parts as text,
    an `input_audio` part whole (which the chat adapter checks as it checks its own), the
    others by type only (an image, a file: their data is not text; the chat adapter
    records the types in `meta["omitted_content_parts"]`)."""
    parts: list[dict[str, Any]] = []
    for part in output:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif isinstance(part, Mapping) and part.get("type") == "input_audio":
            parts.append(dict(part))  # checked whole (`check_audio`), as the chat adapter does
        elif isinstance(part, Mapping) and part.get("type") not in _TEXT_PARTS:
            kind_of = part.get("type")
            parts.append({"type": kind_of if isinstance(kind_of, str) and kind_of else "part"})
        elif isinstance(part, Mapping):
            parts.append({"type": "text", "text": _text_of([part])})
    return parts


#: The content parts whose text is the part's text (`_text_of`).
_TEXT_PARTS = frozenset({None, "text", "input_text", "output_text", "refusal"})


def item_message(item: Mapping[str, Any]) -> dict[str, Any]:
    """The chat message an item is stored as (before its verbatim copy is added). An item
    that is not a mapping is `InvalidInput` naming `item`."""
    if type(item) is not dict and not isinstance(item, Mapping):  # a dict: no ABC check
        raise InvalidInput(
            f"item: must be a mapping (a Responses input item), got {type(item).__name__}",
            field="item",
            problem="wrong-type",
        )
    name = kind(item)
    if name == "message":
        role, content = item.get("role"), item.get("content")
        # Parts: its text, and its images, audio and files recorded by type (an image-only
        # message is then no empty turn to the summarizer); the item keeps them whole.
        return {
            "role": role,
            "content": _parts(content) if isinstance(content, list) else _text_of(content),
        }
    if name == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if name == "function_call_output":
        output = item.get("output")
        content = _parts(output) if isinstance(output, list) else output
        if not isinstance(content, (str, list)):
            content = json.dumps(content)
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": content}
    if is_call(item):  # the link (a custom tool's name and input too); the rest stays in
        # the item's verbatim copy
        tool, written = item.get("name"), item.get("input")
        custom = name == "custom_tool_call"
        call = {
            "id": link_id(item),
            "type": "function",
            "function": {
                "name": tool if custom and isinstance(tool, str) and tool else name,
                "arguments": written if custom and isinstance(written, str) else "",
            },
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if is_output(item):
        # Its text (a custom tool's, a shell's output) is the turn's: searched, summarised.
        output = item.get("output")
        said: Any = output if isinstance(output, str) else ""
        if isinstance(output, list) and all(is_part(part) for part in output):
            said = _parts(output)
        elif isinstance(output, list):  # a shell's: each command's stdout and stderr
            said = "\n".join(output_streams(output))
        return {"role": "tool", "tool_call_id": link_id(item), "content": said}
    if name == "reasoning":  # its summary, else (an open-weight model's) its reasoning text
        said = _text_of(item.get("summary")) or _text_of(item.get("content"))
        return {"role": "assistant", "content": said}
    if name == "mcp_call":  # a hosted MCP tool's call and output, one item: its output
        output = item.get("output")
        return {"role": "assistant", "content": output if isinstance(output, str) else ""}
    return {"role": "assistant", "content": ""}


#: The items that make their response one unit though no link names it: a reasoning item (the
#: API refuses one without the item after it), a server-run tool search's call and output.
_ONE_UNIT = frozenset({"reasoning", "tool_search_call", "tool_search_output"})


def item_groups(items: Sequence[Mapping[str, Any]], ids: Sequence[str]) -> list[str | None]:
    """The group of each item's turn (None: no group), as the module says: one group for the
    items of a response holding a call, a reasoning item or a server-run tool search (its
    call and output paired by order, not by a link) (`tool_group` of its first call
    with that call's turn ID `ids[i]`, else a fresh name: never a group of an earlier
    response, also when a model numbers its calls `call_0` in every response), and a result
    in the same `add_items` in its call's group (the nearest call of its ID before it); a
    result whose call came earlier gets None here (`newest_calls`)."""
    groups: list[str | None] = [None] * len(items)
    of_call: dict[str, str] = {}
    at = 0
    while at < len(items):
        if is_input(items[at]):
            linked = link_id(items[at])
            if linked is not None:
                groups[at] = of_call.get(linked)
            at += 1
            continue
        end = at
        while end < len(items) and not is_input(items[end]):
            end += 1
        response = items[at:end]
        calls = [
            (n, call)
            for n, item in enumerate(response, at)
            if is_call(item) and (call := link_id(item)) is not None
        ]
        group: str | None = None
        if calls:
            first, call = calls[0]
            group = tool_group((call,), ids[first], (call,))
        elif len(response) > 1 and any(kind(item) in _ONE_UNIT for item in response):
            group = f"agents-response:{uuid.uuid4().hex}"
        if group is not None:
            groups[at:end] = [group] * len(response)
            of_call.update(dict.fromkeys((call for _, call in calls), group))
        at = end
    return groups


def newest_calls(context_items: Sequence[Any], call_ids: set[str]) -> dict[str, str]:
    """The turn ID of the newest turn among `context_items` (a context's `TurnItem`s, and
    its summaries, skipped) that makes each of `call_ids` (its `meta["tool_calls"]`): the
    call a result appended now answers (SPEC §17.2: the nearest call of its ID before it)."""
    found: dict[str, str] = {}
    for item in reversed(context_items):
        meta = getattr(item, "meta", None)
        if not meta or "tool_calls" not in meta:
            continue
        for call in tool_calls_of(meta):
            made = call.get("id")
            if made in call_ids and made not in found:
                found[made] = item.id
        if len(found) == len(call_ids):
            break
    return found


def stored(item: Mapping[str, Any], body: str | None = None) -> str:
    """The item's verbatim JSON, less the str field the turn holds anyway; with `body` (the
    turn's text), a field the turn holds the text of but not as it is (a list of parts) is
    kept as `_agents_edits.held_text` says (an edit of the turn is then seen)."""
    name = kind(item)
    moved = _MOVED.get(name) if isinstance(name, str) else None
    if moved is None and is_output(item):  # any result's text output is the turn's text
        moved = "output"
    if moved is not None and isinstance(item.get(moved), str) and _MOVED_KEY not in item:
        item = {**{k: v for k, v in item.items() if k != moved}, _MOVED_KEY: moved}
    elif body is not None and (field := _text_field(item)) is not None:
        item = held_text(item, field, body)
    return _ITEM_ENCODER.encode(item)


#: `json.dumps(..., ensure_ascii=False, sort_keys=True, allow_nan=False)`, made once (`dumps`
#: with options builds a new encoder per call, a cost every appended item paid).
_ITEM_ENCODER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, allow_nan=False)


def _text_field(item: Mapping[str, Any]) -> str | None:
    """The field whose text the turn holds when it is not a str (kept in the copy)."""
    name = kind(item)
    if name == "reasoning":
        return reasoning_field(item)
    field = "content" if name == "message" else "output" if is_output(item) else None
    return field if field is not None and field in item else None


def restored(role: str, text: str, meta: Mapping[str, str] | None) -> list[Any]:
    """The item as it came, from a turn's role, text and meta: one item, or, for a turn no
    session wrote, the items its role and text make (see the module)."""
    meta = meta or {}
    verbatim = meta.get(ITEM_KEY)
    if verbatim is None:
        return _foreign(role, text, meta)
    try:
        item = json.loads(verbatim)
        if not isinstance(item, dict):
            raise ValueError("not an item")
        moved = item.pop(_MOVED_KEY, None)
        if moved in _AS_ARGUMENTS:
            item[moved] = json.loads(meta["tool_calls"])[0]["function"]["arguments"]
        elif moved is not None:
            item[moved] = text
        item = text_restored(item, _text_field(item), text)
    except (ValueError, LookupError, TypeError, RecursionError):
        # Another tool rewrote the copy (not JSON, or nested deeper than the parser goes):
        # the turn reads back as one the session did not write (the SDK's own sessions skip
        # a row that is not JSON).
        return _foreign(role, text, meta)
    return [item]


class RestoredTurn:
    """One turn's items as `restored` made them, with what `get_items` asks of each: the
    call it makes and the call it answers (`link_id`, or None). Made once per context item
    and kept while the context serves that turn with the same role, text and meta
    (`RestoredTurns`)."""

    __slots__ = ("flat", "links", "meta", "plain", "role", "source", "templates", "text")

    def __init__(self, source: Any) -> None:
        #: The context's `TurnItem` this was made from.
        self.source = source
        self.role, self.text, self.meta = source.role, source.text, source.meta
        items = restored(self.role, self.text, self.meta)
        #: Every item flat (values str, number, bool or null): `dict(template)` is a full
        #: copy to hand out again; otherwise `items()` decodes them anew (their lists and
        #: objects must not be shared).
        self.flat = all(_flat(item) for item in items)
        self.templates: tuple[Any, ...] = tuple(items) if self.flat else ()
        #: Per item: the call it makes and the call it answers (`link_id`, or None).
        self.links = tuple(_links(item) for item in items)
        #: No item makes or answers a call, none is a reasoning item: `sendable` serves a
        #: context of such turns (and summary messages) as it is (`_agents_served.served`).
        self.plain = all(link == (None, None) for link in self.links) and not any(
            isinstance(item, Mapping) and kind(item) == "reasoning" for item in items
        )

    def decoded(self) -> list[Any]:
        """The items decoded anew (for a turn that is not `flat`: fresh nested objects)."""
        return restored(self.role, self.text, self.meta)


def _links(item: Any) -> tuple[str | None, str | None]:
    if not isinstance(item, Mapping):
        return None, None
    if is_call(item):
        return link_id(item), None
    if kind(item) == "function_call_output" and link_id(item) is None:
        return None, _NO_CALL  # a result answering no call: no call is ever served for it
    return None, (link_id(item) if is_output(item) else None)


#: The call a result without `call_id` answers, for `_agents_served.sendable`: no call has
#: this ID (a call's ID is a non-empty str, `link_id`).
_NO_CALL = ""


class RestoredTurns:
    """One session's memo of its context's turns, restored (`RestoredTurn`): `get_items`
    reads every turn of the context at every call, and a turn the context serves unchanged
    (the same `TurnItem` object: the store's context cache; or one with the same role, text
    and meta: the context read anew after a compaction) is not restored again.
    `keep_only` drops the turns the context no longer shows, so the memo holds no more than
    the context does, and nothing of a turn erased since; `clear_session` empties it."""

    __slots__ = ("_turns",)

    def __init__(self) -> None:
        self._turns: dict[str, RestoredTurn] = {}

    def get(self, item: Any) -> RestoredTurn:
        """The context item `item` (a `TurnItem`), restored."""
        entry = self._turns.get(item.id)
        if entry is None:
            return RestoredTurn(item)
        if entry.source is not item:
            # Another object for the turn (the context read anew, after a compaction): the
            # same items when its role, text and meta are (all `restored` reads).
            if (entry.role, entry.text, entry.meta) != (item.role, item.text, item.meta):
                return RestoredTurn(item)
            entry.source = item
        return entry

    def keep_only(self, turns: dict[str, RestoredTurn]) -> None:
        """From now on the memo is `turns` (those of the context just served)."""
        self._turns = turns

    def clear(self) -> None:
        self._turns = {}

    def __len__(self) -> int:
        return len(self._turns)


def _flat(item: Any) -> bool:
    """A dict whose values are all str, number, bool or null: `dict(item)` is a full copy."""
    return isinstance(item, dict) and all(
        value is None or isinstance(value, (str, int, float)) for value in item.values()
    )


def _foreign(role: str, text: str, meta: Mapping[str, str]) -> list[Any]:
    if role == "tool":
        call_id = meta.get("tool_call_id")
        if call_id:  # a screenshot a tool returned (kept parts) as input parts too
            output = _input_parts(text, meta.get(_PARTS_KEY))
            return [{"type": "function_call_output", "call_id": call_id, "output": output}]
        # A result answering no call: still a result (never the user's message), which
        # `sendable` leaves out, as it leaves out a result whose call is not served.
        return [{"type": "function_call_output", "output": text}]
    if role == "system":  # meta makes a system turn `developer`, nothing else (SPEC §15.6)
        role = "developer" if meta.get("chat_role") == "developer" else "system"
        return [{"role": role, "content": text}]
    content: Any = _input_parts(text, meta.get(_PARTS_KEY)) if role == "user" else text
    items: list[Any] = [{"role": role, "content": content}] if text or role != "assistant" else []
    if role == "assistant":
        items += [
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call.get("function", {}).get("name") or "",
                "arguments": call.get("function", {}).get("arguments") or "",
            }
            for call in tool_calls_of(meta)
            if isinstance(call.get("id"), str) and isinstance(call.get("function", {}), Mapping)
        ]
    return items or [{"role": role, "content": text}]


#: The meta key of a chat message's content parts (the chat adapter's `content_parts`).
_PARTS_KEY = "content_parts"
_DETAILS = frozenset({"low", "high", "auto", "original"})
_FILE_KEYS = ("file_id", "file_data", "filename", "file_url")


def _input_parts(text: str, stored: str | None) -> Any:
    """A user turn's content as Responses input parts when the chat adapter kept its parts
    (an image the user sent through `append_chat_messages` reaches an Agents model too): its
    text parts as `input_text`, Chat Completions' `image_url` and `file` as `input_image` and
    `input_file`, and parts of the Responses form as they are; a turn whose text is no longer
    its parts' (an edit) gives its text, then those parts. Else (no parts, or none to send)
    its text."""
    try:
        parts = json.loads(stored) if stored is not None else None
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return text
    if not isinstance(parts, list) or not all(isinstance(part, Mapping) for part in parts):
        return text
    texts: list[str] = []
    made: list[Any] = []
    media: list[Any] = []
    for part in parts:
        if part.get("type") in _TEXT_PARTS:
            said = _text_of([part])
            texts.append(said)
            made.append({"type": "input_text", "text": said})
            continue
        converted = _input_part(part)
        if converted is not None:
            made.append(converted)
            media.append(converted)
    if not media:
        return text
    if "".join(texts) != text:
        return [{"type": "input_text", "text": text}, *media] if text else media
    return made


def _input_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """One chat content part that is not text as a Responses input part (None: not one). An
    `input_audio` part goes as the SDK's `ResponseInputAudioParam` (its data and format, as
    the SDK's Chat Completions converter takes it), or not at all (`audio_of`)."""
    kind = part.get("type")
    if kind == "input_audio":
        audio = audio_of(part)
        return None if audio is None else {"type": "input_audio", "input_audio": audio}
    if kind in ("input_image", "input_file"):
        return dict(part)
    if kind not in ("image_url", "file"):
        return None
    inner = part.get(kind)
    if not isinstance(inner, Mapping):
        return None
    if kind == "file":
        kept = {key: inner[key] for key in _FILE_KEYS if isinstance(inner.get(key), str)}
        return {"type": "input_file", **kept} if kept else None
    url, detail = inner.get("url"), inner.get("detail")
    if not isinstance(url, str):
        return None
    return {
        "type": "input_image",
        "image_url": url,
        "detail": detail if detail in _DETAILS else "auto",
    }
