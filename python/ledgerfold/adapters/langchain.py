"""LangChain messages in and out of the ledger (optional extra `ledgerfold[langchain]`).

Both directions go through the OpenAI-style dicts of `ledgerfold.adapters.chat`, so the
summary slot, its escaping and the tool-call grouping are exactly the same.
`langchain_core` is imported only when a function is called.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ledgerfold.adapters.chat import from_chat_messages, to_chat_messages
from ledgerfold.context import AssembledContext
from ledgerfold.errors import InvalidInput
from ledgerfold.model import Turn

if TYPE_CHECKING:
    # unused-ignore: the ignore is only needed where the extra is not installed.
    from langchain_core.messages import BaseMessage  # type: ignore[import-not-found,unused-ignore]

__all__ = ["chat_message", "from_langchain_messages", "to_langchain_messages"]


def _messages_module() -> Any:
    try:
        import langchain_core.messages as messages_module  # type: ignore[import-not-found,unused-ignore]
    except ImportError as error:
        raise ImportError(
            "ledgerfold's LangChain adapter needs langchain-core: "
            "pip install 'ledgerfold[langchain]'"
        ) from error
    return messages_module


def to_langchain_messages(context: AssembledContext) -> list[BaseMessage]:
    """LangChain messages for an assembled context (the summary is one `SystemMessage`).

    Tool calls whose `arguments` are not JSON text of an object become
    `invalid_tool_calls`, as LangChain does for unparsable model output.
    """
    lc = _messages_module()
    result: list[BaseMessage] = []
    for message in to_chat_messages(context):
        role = message["role"]
        extra: dict[str, Any] = {}
        if "name" in message:
            extra["name"] = message["name"]
        content = message["content"]
        if role == "system":
            result.append(lc.SystemMessage(content=content, **extra))
        elif role == "user":
            result.append(lc.HumanMessage(content=content, **extra))
        elif role == "tool":
            result.append(
                lc.ToolMessage(
                    content=content, tool_call_id=message.get("tool_call_id", ""), **extra
                )
            )
        elif role == "assistant":
            tool_calls, invalid = _langchain_calls(message.get("tool_calls", []))
            result.append(
                lc.AIMessage(
                    content=content, tool_calls=tool_calls, invalid_tool_calls=invalid, **extra
                )
            )
        else:  # a chat-only role such as "developer"
            result.append(lc.ChatMessage(role=role, content=content, **extra))
    return result


def _langchain_calls(calls: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """OpenAI tool calls as LangChain `ToolCall` / `InvalidToolCall` dicts."""
    valid: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        function = function if isinstance(function, Mapping) else {}
        call_id = call.get("id") if isinstance(call, Mapping) else None
        name = function.get("name")
        arguments = function.get("arguments")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else None
        except ValueError:
            args = None
        if isinstance(args, dict):
            valid.append({"type": "tool_call", "id": call_id, "name": name, "args": args})
        else:
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "id": call_id,
                    "name": name,
                    "args": arguments if isinstance(arguments, str) else None,
                    "error": None,
                }
            )
    return valid, invalid


def from_langchain_messages(messages: Iterable[BaseMessage], *, id_prefix: str = "m") -> list[Turn]:
    """Ledger turns from LangChain messages (see `from_chat_messages`); a message's `id`
    becomes the turn ID when set."""
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
        chat.append(chat_message(message))
    return from_chat_messages(chat, id_prefix=id_prefix)


def chat_message(message: Any) -> dict[str, Any]:
    """The OpenAI-style message for a LangChain message (its `id` and `name` kept; valid and
    invalid tool calls alike as `tool_calls`)."""
    lc = _messages_module()
    content = message.content
    if isinstance(content, list):
        # LangChain allows bare strings among content blocks; OpenAI parts are mappings.
        content = [
            {"type": "text", "text": part} if isinstance(part, str) else part for part in content
        ]
    chat: dict[str, Any] = {"content": content}
    if message.id is not None:
        chat["id"] = message.id
    if message.name is not None:
        chat["name"] = message.name
    if isinstance(message, lc.SystemMessage):
        chat["role"] = "system"
    elif isinstance(message, lc.HumanMessage):
        chat["role"] = "user"
    elif isinstance(message, lc.ToolMessage):
        chat["role"] = "tool"
        chat["tool_call_id"] = message.tool_call_id
    elif isinstance(message, lc.AIMessage):
        chat["role"] = "assistant"
        calls = [
            _openai_call(call["id"], call["name"], json.dumps(call["args"]))
            for call in message.tool_calls
        ] + [
            _openai_call(call["id"], call["name"], call["args"])
            for call in message.invalid_tool_calls
        ]
        if calls:
            chat["tool_calls"] = calls
    elif isinstance(message, lc.ChatMessage):
        chat["role"] = message.role
    else:
        chat["role"] = message.type  # unknown kinds are rejected by from_chat_messages
    return chat


def _openai_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
