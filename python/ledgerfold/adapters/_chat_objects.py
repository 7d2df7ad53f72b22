"""Chat messages given as the objects an SDK returns (`from_chat_messages`,
`SQLiteStore.append_chat_messages`, SPEC §8): the OpenAI SDK's `ChatCompletionMessage`
(`response.choices[0].message`), or any other object with a callable `model_dump` (a
pydantic model), is read as the mapping its own `model_dump(mode="json",
exclude_none=True)` gives (without pydantic's serializer warnings, which quote values; a
call's `function.parsed_arguments`, which the SDK's `parse()` adds and the API refuses,
left out), which then goes through the same rules as a dict.
Duck-typed: nothing here imports openai or pydantic. Bad input raises `InvalidInput`
naming `messages[<index>]`; neither the object nor what its `model_dump` raised reaches
the error."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeAlias

from ledgerfold._errors import InvalidInput
from ledgerfold.adapters._chat_fields import bad

__all__ = ["ChatMessage", "ChatMessageObject", "message_list"]


class ChatMessageObject(Protocol):
    """A message object an SDK returns: its `model_dump` gives the message's mapping."""

    def model_dump(self, *, mode: str = ..., exclude_none: bool = ...) -> Any: ...


#: One OpenAI-style chat message: a mapping, or an object whose `model_dump` gives one.
ChatMessage: TypeAlias = Mapping[str, Any] | ChatMessageObject


def _dumper(value: object) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump if callable(dump) else None


def message_list(messages: object) -> list[Any]:
    """`messages` as a list, each message object replaced by its `model_dump` mapping
    (mappings, and anything else, are left for the caller's checks). One message object
    (not in a list: a pydantic model iterates as its fields) is refused, naming `messages`."""
    if (
        isinstance(messages, (str, bytes, Mapping))
        or not isinstance(messages, Iterable)
        or _dumper(messages) is not None
    ):
        raise InvalidInput(
            "messages: must be an iterable of messages (mappings or message objects; one "
            f"message goes in a list), got {type(messages).__name__}",
            field="messages",
            problem="wrong-type",
        )
    return [_as_mapping(message, index) for index, message in enumerate(messages)]


def _as_mapping(message: object, index: int) -> object:
    if type(message) is dict or isinstance(message, Mapping):  # a dict: no ABC check asked
        return _with_lists(message)
    dump = _dumper(message)
    if dump is None:
        return message
    kind = type(message).__name__
    if _langchain_message(message):  # its dump has `type` ("ai"), not an OpenAI role
        raise bad(
            index,
            "",
            "wrong-type",
            f"a LangChain message ({kind}): convert LangChain messages with "
            "ledgerfold.adapters.from_langchain_messages (into a store: append_many)",
        )
    try:
        dumped = _dumped(dump)
    except Exception as error:  # any framework's: named by its type only, never its text
        raise bad(
            index,
            "",
            "wrong-type",
            f"{kind}.model_dump(mode='json', exclude_none=True) raised {type(error).__name__}",
        ) from None
    if not isinstance(dumped, Mapping):
        raise bad(
            index,
            "",
            "wrong-type",
            f"{kind}.model_dump() must give a mapping, got {type(dumped).__name__}",
        )
    calls = dumped.get("tool_calls")
    if isinstance(calls, list) and any(map(_parsed, calls)):
        return {**dumped, "tool_calls": [_unparsed(call) for call in calls]}
    return dumped


def _with_lists(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """The message with its `content` and `tool_calls` as lists when they are another
    iterable: the OpenAI SDK's message params type them `Iterable`, so a tuple is one, and
    pydantic's validation of those params (`TypeAdapter(ChatCompletionMessageParam)`) makes
    them a one-pass iterator."""
    lazy = {
        key: list(value)
        for key in ("content", "tool_calls")
        # None, a str or a list (the usual) is answered without asking the ABC checks.
        if (value := message.get(key)) is not None
        and type(value) is not str
        and type(value) is not list
        and isinstance(value, Iterable)
        and not isinstance(value, (str, bytes, bytearray, list, Mapping))
    }
    return {**message, **lazy} if lazy else message


def _langchain_message(message: object) -> bool:
    """A LangChain `BaseMessage` (duck-typed by its class: langchain_core is not imported)."""
    return any(
        cls.__name__ == "BaseMessage" and cls.__module__.startswith("langchain_core.")
        for cls in type(message).__mro__
    )


def _dumped(dump: Any) -> Any:
    """`dump(mode="json", exclude_none=True)`, without pydantic's serializer warnings where
    it takes `warnings` (pydantic 2): those quote the values of fields holding another type
    than declared (a model built with `model_construct`), message text included."""
    try:
        return dump(mode="json", exclude_none=True, warnings=False)
    except TypeError:  # a `model_dump` that takes no `warnings`
        return dump(mode="json", exclude_none=True)


# What the SDK's `parse()` adds to a call's function: the client's parse of `arguments`,
# which the API never sent and refuses back ("Unknown parameter"); `arguments` is kept.
_PARSED_ARGUMENTS = "parsed_arguments"


def _parsed(call: object) -> bool:
    function = call.get("function") if isinstance(call, Mapping) else None
    return isinstance(function, Mapping) and _PARSED_ARGUMENTS in function


def _unparsed(call: Any) -> Any:
    if not _parsed(call):
        return call
    function = {k: v for k, v in call["function"].items() if k != _PARSED_ARGUMENTS}
    return {**call, "function": function}
