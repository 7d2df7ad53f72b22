"""LangChain messages in and out of the ledger (optional extra `ledgerfold[langchain]`).

Both directions go through the OpenAI-style dicts of `ledgerfold.adapters._chat` (the same
summary slot, escaping and tool-call groups) and `langchain_core`'s own converters,
`convert_to_messages` and `convert_to_openai_messages` (`text_format="block"`: the ledger
joins text parts without LangChain's newlines). Kept by hand, as they lose it:

- a stored call `convert_to_messages` cannot parse (it raises) goes to `invalid_tool_calls`
  with its raw text, as LangChain records a model's unparsable call; `convert_to_openai_messages`
  drops `invalid_tool_calls`, so they come back as tool calls (after the parsed ones);
- a tool turn answering no call gets `tool_call_id=""` (LangChain requires one) and `""`
  comes back as none;
- a message LangChain splits (`tool_result` blocks) keeps its `id` on its first part.

`langchain_core` is imported only when a function is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ledgerfold._context import AssembledContext
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Turn
from ledgerfold.adapters._chat import from_chat_messages, to_chat_messages

if TYPE_CHECKING:
    # unused-ignore: the ignore is only needed where the extra is not installed.
    from langchain_core.messages import BaseMessage  # type: ignore[import-not-found,unused-ignore]

__all__ = ["chat_messages", "from_langchain_messages", "to_langchain_messages"]

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
    its framing says `recall_history` returns the originals: see `to_chat_messages`); calls
    it cannot parse are `invalid_tool_calls` with their raw text."""
    lc = _messages_module()
    chat = to_chat_messages(context, system_prompt=system_prompt, recall=recall)
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
    others as LangChain `InvalidToolCall`s."""
    parsable: list[Any] = []
    invalid: list[Any] = []
    for call in calls:
        try:
            lc.convert_to_messages([{"role": "assistant", "content": "", "tool_calls": [call]}])
        except _CONVERSION_ERRORS:
            invalid.append(_invalid_call(call))
        else:
            parsable.append(call)
    return parsable, invalid


def _invalid_call(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    name, arguments = function.get("name"), function.get("arguments")
    return {
        "type": "invalid_tool_call",
        "id": call["id"],  # the ledger refuses calls without a string id (toolcalls.py)
        "name": name if isinstance(name, str) else None,
        "args": arguments if isinstance(arguments, str) else None,
        "error": None,
    }


def from_langchain_messages(messages: Iterable[BaseMessage], *, id_prefix: str = "m") -> list[Turn]:
    """Ledger turns from LangChain messages (see `chat_messages` and `from_chat_messages`);
    a message's `id` becomes the turn ID when set."""
    return from_chat_messages(chat_messages(messages), id_prefix=id_prefix)


def chat_messages(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI-style messages for LangChain messages, by `convert_to_openai_messages`, with
    their `id`s and `invalid_tool_calls`. Anything but a `BaseMessage`, or a message LangChain
    cannot convert, raises `InvalidInput` naming `messages[<index>]`."""
    lc = _messages_module()
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidInput(
            "messages: must be an iterable of LangChain messages",
            field="messages",
            problem="wrong-type",
        )
    chat: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, lc.BaseMessage):
            raise InvalidInput(
                f"messages[{index}]: must be a LangChain BaseMessage, got {type(message).__name__}",
                field=f"messages[{index}]",
                problem="wrong-type",
            )
        try:
            converted = lc.convert_to_openai_messages(
                [message], text_format="block", include_id=True
            )
        except _CONVERSION_ERRORS:
            # LangChain's message quotes the content block; ours names the message only.
            raise InvalidInput(
                f"messages[{index}]: langchain_core cannot convert this "
                f"{type(message).__name__} to an OpenAI-style message",
                field=f"messages[{index}]",
                problem="wrong-type",
            ) from None
        first = converted[0]
        if message.id and "id" not in first:
            first["id"] = message.id
        if first.get("tool_call_id") == "":
            del first["tool_call_id"]
        for call in getattr(message, "invalid_tool_calls", []):
            function = {"name": call["name"], "arguments": call["args"]}
            first.setdefault("tool_calls", []).append(
                {"id": call["id"], "type": "function", "function": function}
            )
        chat.extend(converted)
    return chat
