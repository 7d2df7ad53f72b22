"""LangChain messages in and out of the ledger (optional extra `ledgerfold[langchain]`).

Both directions go through the OpenAI-style dicts of `ledgerfold.adapters._chat` (the same
summary slot, escaping and tool-call groups) and `langchain_core`'s own converters,
`convert_to_messages` and `convert_to_openai_messages` (`text_format="block"`: the ledger
joins text parts without LangChain's newlines). Kept by hand, as they lose it:

- a stored call `convert_to_messages` cannot parse (it raises) goes to `invalid_tool_calls`
  with its raw text, as LangChain records a model's unparsable call; `convert_to_openai_messages`
  drops `invalid_tool_calls`, so they come back as tool calls (after the parsed ones);
- a `ToolMessage`'s `artifact`, when it is plain JSON (`meta["artifact"]`; any other is
  left out and logged by message ID and type);
- a tool turn answering no call gets `tool_call_id=""` (LangChain requires one) and `""`
  comes back as none;
- a message LangChain splits (`tool_result` blocks) keeps its `id` on its first part;
- a call LangChain gives no ID (`ToolCall.id` is optional: `None`, or `""` from some
  providers) gets one the ledger can hold, `unnamed_call_id(<message id>, <index>)`, and a
  `ToolMessage` with `tool_call_id=""` right after it (LangGraph's `ToolNode` answers a `""`
  call so) answers it; `tool_call_id=""` anywhere else still answers no call.

`langchain_core` is imported only when a function is called.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ledgerfold._context import AssembledContext
from ledgerfold._errors import DuplicateId, InvalidInput
from ledgerfold._model import Turn
from ledgerfold._validate import non_finite_at
from ledgerfold.adapters._chat import (
    ChatTurnSpec,
    SummaryContent,
    chat_turn_specs,
    context_messages,
    from_chat_messages,
    summary_content,
)
from ledgerfold.adapters._chat_fields import TEXT_PART_KEYS

if TYPE_CHECKING:
    # unused-ignore: the ignore is only needed where the extra is not installed.
    from langchain_core.messages import BaseMessage  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "chat_messages",
    "from_langchain_messages",
    "langchain_context_messages",
    "langchain_turn_specs",
    "ledger_call_ids",
    "to_langchain_messages",
    "unnamed_call_id",
    "unnamed_results",
]

_log = logging.getLogger("ledgerfold.adapters")

# What langchain_core raises on input it cannot convert (JSONDecodeError and pydantic's
# ValidationError are ValueErrors).
_CONVERSION_ERRORS = (ValueError, TypeError, KeyError, RecursionError)


def _messages_module() -> Any:
    try:
        import langchain_core.messages as messages_module  # type: ignore[import-not-found,unused-ignore]
    except ImportError as error:
        raise ImportError(
            "ledgerfold's LangChain adapter needs langchain-core: "
            "pip install 'ledgerfold[langchain]'"
        ) from error
    return messages_module


def to_langchain_messages(
    context: AssembledContext, *, system_prompt: str | None = None, recall: bool = False
) -> list[BaseMessage]:
    """LangChain messages for an assembled context, by `convert_to_messages`: the summary is
    one `SystemMessage` (with `system_prompt`, the first one, after the prompt; with `recall`,
    its framing says `recall_history` returns the originals a purge has not deleted: see
    `to_chat_messages`); calls it cannot parse are `invalid_tool_calls` with their raw
    text."""
    return langchain_context_messages(context, system_prompt=system_prompt, recall=recall)


def langchain_context_messages(
    context: AssembledContext,
    *,
    system_prompt: str | None = None,
    recall: bool = False,
    content: SummaryContent = summary_content,
) -> list[BaseMessage]:
    """`to_langchain_messages`, the summary's message content made by `content`."""
    lc = _messages_module()
    chat = context_messages(
        context, system_prompt=system_prompt, recall=recall, content=content, tool_names=True
    )
    invalid_calls: list[list[Any]] = []
    for message in chat:
        parsable, invalid = _split_calls(lc, message.pop("tool_calls", []))
        if parsable:
            message["tool_calls"] = parsable
        invalid_calls.append(invalid)
        if message["role"] == "tool":
            message.setdefault("tool_call_id", "")
    result: list[Any] = lc.convert_to_messages(chat)
    for converted, invalid in zip(result, invalid_calls, strict=True):
        if invalid:
            converted.invalid_tool_calls = invalid
    return result


def _split_calls(lc: Any, calls: list[Any]) -> tuple[list[Any], list[Any]]:
    """The calls `convert_to_messages` takes (it decides; its rules are not copied), and the
    others as LangChain `InvalidToolCall`s; so is a call whose arguments text holds NaN or
    Infinity (stored before they were refused): parsed, a provider's client would write them
    back as `NaN`, which is not JSON."""
    parsable: list[Any] = []
    invalid: list[Any] = []
    for call in calls:
        try:
            (parsed,) = lc.convert_to_messages(
                [{"role": "assistant", "content": "", "tool_calls": [call]}]
            )
        except _CONVERSION_ERRORS:
            invalid.append(_invalid_call(call))
            continue
        if any(non_finite_at(done.get("args")) is not None for done in parsed.tool_calls):
            invalid.append(_invalid_call(call))
        else:
            parsable.append(call)
    return parsable, invalid


def _invalid_call(call: Mapping[str, Any]) -> dict[str, Any]:
    # A custom tool call (openai's `type: "custom"`) has `custom.name` and `custom.input`
    # (free text), which LangChain's tool calls cannot hold: its name and input go as these.
    function = call.get("function", call.get("custom"))
    function = function if isinstance(function, Mapping) else {}
    name, arguments = function.get("name"), function.get("arguments", function.get("input"))
    return {
        "type": "invalid_tool_call",
        "id": call["id"],  # the ledger refuses calls without a string id (toolcalls.py)
        "name": name if isinstance(name, str) else None,
        "args": arguments if isinstance(arguments, str) else None,
        "error": None,
    }


def from_langchain_messages(messages: Iterable[BaseMessage], *, id_prefix: str = "m") -> list[Turn]:
    """Ledger turns from LangChain messages (see `chat_messages` and `from_chat_messages`);
    a message's `id` becomes the turn ID when set. Bad input is named by the message's place
    in `messages`."""
    origins: list[int] = []
    chat = chat_messages(messages, origins=origins)
    with _named_by(origins):
        return from_chat_messages(chat, id_prefix=id_prefix)


def langchain_turn_specs(
    messages: Sequence[Any],
    *,
    results: Mapping[int, str] | None = None,
    positions: Sequence[int] | None = None,
) -> list[ChatTurnSpec]:
    """`chat_turn_specs` of `chat_messages(messages, ...)`, bad input named by the message's
    place in `messages` (or `positions`), not in the OpenAI-style list, which has more
    entries when LangChain splits a message (`tool_result` blocks)."""
    origins: list[int] = []
    chat = chat_messages(messages, results=results, positions=positions, origins=origins)
    with _named_by(origins):
        return chat_turn_specs(chat)


_NAMED = re.compile(r"^messages\[(\d+)\]|(?<= of )messages\[(\d+)\]$")


@contextmanager
def _named_by(origins: Sequence[int]) -> Iterator[None]:
    """Re-raise `InvalidInput` about `messages[<i>]` of a converted list as about
    `messages[<origins[i]>]`: the LangChain message it came from."""
    try:
        yield
    except InvalidInput as error:

        def renamed(text: str) -> str:
            def place(found: re.Match[str]) -> str:
                at = int(found.group(1) or found.group(2))
                return f"messages[{origins[at]}]" if at < len(origins) else found.group(0)

            return _NAMED.sub(place, text)

        field = None if error.field is None else renamed(error.field)
        if isinstance(error, DuplicateId):
            raise DuplicateId(
                renamed(str(error)), id=error.id, field=field or "id", problem=error.problem or ""
            ) from None
        raise InvalidInput(renamed(str(error)), field=field, problem=error.problem) from None


def unnamed_call_id(message_id: str, index: int) -> str:
    """The ledger's ID for call `index` of a message (its place in the turn's `tool_calls`:
    parsed calls, then unparsable ones) when LangChain gives the call none: derived from the
    message's ID and the index alone, so the same message always gets the same ID, and made
    of the characters every provider takes in a call ID (`lf_<digest>_<index>`)."""
    digest = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"lf_{digest}_{index}"


def _message_key(message: Any, position: int) -> str:
    # A message without an `id` (not one the middleware appends) is known by its position.
    message_id = getattr(message, "id", None)
    return message_id if isinstance(message_id, str) and message_id else f"#{position}"


def _named(call: Mapping[str, Any]) -> bool:
    call_id = call.get("id")
    return isinstance(call_id, str) and bool(call_id)


def ledger_call_ids(message: Any, position: int = 0) -> tuple[str, ...]:
    """The call IDs the ledger holds for a LangChain message's calls, in its order (parsed
    calls, then unparsable ones): a call's own ID, or `unnamed_call_id` when it has none.
    `position` (the message's place in its list) only matters for a message without `id`."""
    calls = [*getattr(message, "tool_calls", ()), *getattr(message, "invalid_tool_calls", ())]
    if all(map(_named, calls)):
        return tuple(call["id"] for call in calls)
    key = _message_key(message, position)
    return tuple(
        call["id"] if _named(call) else unnamed_call_id(key, index)
        for index, call in enumerate(calls)
    )


def unnamed_results(messages: Sequence[Any]) -> dict[int, str]:
    """Which `ToolMessage`s of `messages` (by position) with `tool_call_id=""` answer a call
    LangChain gave no ID, and the ledger's ID of that call: the results right after an AI
    message (only tool messages between) answer its unnamed calls in order, as LangGraph's
    `ToolNode` returns them. Any other `""` answers no call."""
    results: dict[int, str] = {}
    waiting: list[str] = []
    for position, message in enumerate(messages):
        kind = getattr(message, "type", None)
        if kind == "tool":
            if getattr(message, "tool_call_id", None) == "" and waiting:
                results[position] = waiting.pop(0)
            continue
        waiting = []
        if kind == "ai":
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            waiting = [
                call_id
                for call, call_id in zip(calls, ledger_call_ids(message, position), strict=True)
                if not _named(call)
            ]
    return results


def chat_messages(
    messages: Iterable[Any],
    *,
    results: Mapping[int, str] | None = None,
    positions: Sequence[int] | None = None,
    origins: list[int] | None = None,
) -> list[dict[str, Any]]:
    """OpenAI-style messages for LangChain messages, by `convert_to_openai_messages`, with
    their `id`s and `invalid_tool_calls`; a call without ID gets `unnamed_call_id`, and the
    `ToolMessage`s `results` names (by position; default: `unnamed_results(messages)`) answer
    those calls. Anything but a `BaseMessage`, a message LangChain cannot convert, or NaN or
    ±Infinity in a message's tool call arguments or content (not JSON: LangChain writes them
    as `NaN`, which providers refuse, into every later request) raises `InvalidInput` naming
    `messages[<index>]` (and the field: `messages[1].tool_calls[0].args.x`), where the index
    is the message's place in `messages`, or `positions[<place>]` (its place in the caller's
    list, e.g. a graph state). `origins`, when given, receives that index for each
    OpenAI-style message returned."""
    lc = _messages_module()
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidInput(
            "messages: must be an iterable of LangChain messages",
            field="messages",
            problem="wrong-type",
        )
    messages = list(messages)
    if results is None:
        results = unnamed_results(messages)
    chat: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        named = index if positions is None else positions[index]
        if not isinstance(message, lc.BaseMessage):
            raise InvalidInput(
                f"messages[{named}]: must be a LangChain BaseMessage, got {type(message).__name__}",
                field=f"messages[{named}]",
                problem="wrong-type",
            )
        _refuse_non_finite(message, f"messages[{named}]")
        try:
            converted = lc.convert_to_openai_messages(
                [message], text_format="block", include_id=True
            )
        except _CONVERSION_ERRORS:
            converted = _by_block(lc, message)
        if converted is None:
            # LangChain's message quotes the content block; ours names the message only.
            raise InvalidInput(
                f"messages[{named}]: langchain_core cannot convert this "
                f"{type(message).__name__} to an OpenAI-style message",
                field=f"messages[{named}]",
                problem="wrong-type",
            )
        first = converted[0]
        if message.id and "id" not in first:
            first["id"] = message.id
        if first.get("tool_call_id") == "":
            del first["tool_call_id"]
            if index in results:
                first["tool_call_id"] = results[index]
        # langchain-openai keeps an audio reply (its transcript) where LangChain's converter
        # does not look: the chat adapter takes it from there as from an SDK message.
        audio = getattr(message, "additional_kwargs", {}).get("audio")
        if isinstance(message, lc.AIMessage) and audio is not None and "audio" not in first:
            first["audio"] = audio
        reasoning = getattr(message, "additional_kwargs", {}).get("reasoning_content")
        if isinstance(message, lc.AIMessage) and isinstance(reasoning, str):
            first.setdefault("reasoning_content", reasoning)  # langchain-deepseek's, kept
        cited = _annotations(message) if isinstance(message, lc.AIMessage) else None
        if cited and "annotations" not in first:
            first["annotations"] = cited  # a web search reply's citations (meta, not sent)
        if isinstance(message, lc.ToolMessage) and message.status == "error":
            first["status"] = "error"  # the call failed: kept, which the converter drops
        if isinstance(message, lc.ToolMessage) and message.artifact is not None:
            _keep_artifact(first, message)
        for call in getattr(message, "invalid_tool_calls", []):
            function = {"name": call["name"], "arguments": call["args"]}
            first.setdefault("tool_calls", []).append(
                {"id": call["id"], "type": "function", "function": function}
            )
        for at, call in enumerate(first.get("tool_calls", ())):
            if not _named(call):
                call["id"] = unnamed_call_id(_message_key(message, index), at)
        chat.extend(converted)
        if origins is not None:
            origins += [named] * len(converted)
    return chat


def _by_block(lc: Any, message: Any) -> list[dict[str, Any]] | None:
    """The message as one OpenAI-style message when LangChain's converter refuses it whole:
    a content block it cannot express in that form (a file or audio by URL or file ID, an
    image by file ID, a video, a `text-plain` document: what other providers take) is kept
    as LangChain gave it (plain JSON), the others converted block by block, so the model
    call goes on and the ledger keeps what was sent. None when that cannot be done either
    (a block that is not plain JSON, or one that makes more than one message)."""
    content = message.content
    if not isinstance(content, list):
        return None
    parts: list[Any] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
            continue
        try:
            done = lc.convert_to_openai_messages(
                [message.model_copy(update={"content": [block]})], text_format="block"
            )
        except _CONVERSION_ERRORS:
            if not _keepable(block):
                return None
            parts.append(dict(block))
            continue
        if len(done) != 1:
            return None
        got = done[0].get("content")
        parts += got if isinstance(got, list) else [{"type": "text", "text": got}] if got else []
    try:
        (first,) = lc.convert_to_openai_messages(
            [message.model_copy(update={"content": ""})], text_format="block", include_id=True
        )
    except _CONVERSION_ERRORS:  # (a ValueError too when it makes more than one)
        return None
    first["content"] = parts
    return [first]


def _keepable(block: Any) -> bool:
    """A block kept as LangChain gave it: plain JSON, and not a text block (one the converter
    refuses is malformed: the message stays refused)."""
    return (
        isinstance(block, dict)
        and block.get("type") not in TEXT_PART_KEYS
        and _json_text(block) is not None
    )


def _json_text(value: Any) -> str | None:
    """`value` as strict UTF-8 JSON text, or None when it is not plain JSON."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return None
    return text


def _annotations(message: Any) -> list[Any] | None:
    """An AI message's citations, which LangChain's converter drops: its text blocks'
    `annotations` (a web search reply's URL citations) and `additional_kwargs`' (as
    langchain-openai's Chat Completions replies keep them), when they are plain JSON; the
    model's reply is never refused for them (anything else is left out)."""
    found: list[Any] = []
    kept = message.additional_kwargs.get("annotations")
    if isinstance(kept, list):
        found += kept
    if isinstance(message.content, list):
        for block in message.content:
            cited = block.get("annotations") if isinstance(block, dict) else None
            if isinstance(cited, list):
                found += cited
    if not found:
        return None
    return found if _json_text(found) is not None else None


def _keep_artifact(first: dict[str, Any], message: Any) -> None:
    """A `ToolMessage`'s `artifact` (what the tool returned besides the model's content,
    which the converter drops) kept in the ledger when it is plain JSON
    (`meta["artifact"]`, given back by `to_langchain_messages`); any other (a DataFrame, an
    object) cannot be stored: it is left out, logged with the message's ID and its type,
    and the tool result goes on."""
    if _json_text(message.artifact) is not None:
        first["artifact"] = message.artifact
        return
    _log.warning(
        "ToolMessage artifact not kept in the ledger (not plain JSON): message_id=%s type=%s",
        message.id,
        type(message.artifact).__name__,
    )


def _refuse_non_finite(message: Any, name: str) -> None:
    """`InvalidInput` naming the field when a message's tool call arguments or content hold
    NaN or ±Infinity (the Agents SDK session refuses them in an item the same way)."""
    fields = [("content", message.content)]
    for kind in ("tool_calls", "invalid_tool_calls"):
        fields += [
            (f"{kind}[{at}].args", call.get("args"))
            for at, call in enumerate(getattr(message, kind, ()))
        ]
    for field, value in fields:
        found = non_finite_at(value)
        if found is not None:
            named = f"{name}.{field}{found}"
            raise InvalidInput(
                f"{named}: must not be NaN or Infinity (not JSON)",
                field=named,
                problem="not-allowed",
            )
