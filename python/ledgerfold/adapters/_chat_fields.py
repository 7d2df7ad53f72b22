"""Reading the fields of one OpenAI-style chat message for the ledger (`from_chat_messages`,
SPEC §8, §15.6): its text (content parts, an audio reply's transcript, a refusal), its tool
calls (arguments as the JSON text the API requires) and its other fields. Bad input raises
`InvalidInput` naming the message index and field; message content never reaches the
error."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ledgerfold._errors import InvalidInput
from ledgerfold._validate import NOT_UTF8, unencodable_at
from ledgerfold.adapters._input_audio import check_audio

__all__ = [
    "TEXT_PART_KEYS",
    "annotations_json",
    "audio_id",
    "bad",
    "compact_json",
    "content_parts_json",
    "content_text",
    "explicit_id",
    "optional_text",
    "reasoning_text",
    "role_missing",
    "tool_calls",
]


def bad(index: int, field: str, problem: str, detail: str) -> InvalidInput:
    # Names the message index and field only: message content never reaches the error.
    name = f"messages[{index}].{field}" if field else f"messages[{index}]"
    return InvalidInput(f"{name}: {detail}", field=name, problem=problem)


def optional_text(message: Mapping[str, Any], index: int, key: str) -> str | None:
    value = message.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(index, key, "wrong-type", f"must be str, got {type(value).__name__}")
    if not value:
        raise bad(index, key, "empty", "must not be empty")
    _require_utf8(value, index, key)
    return value


# An item's `type` as the Responses API names them (`function_call`, `reasoning`, …): quoted
# in the error when it has this form only, so no other text of the item reaches it.
_ITEM_TYPE = re.compile(r"[a-z][a-z_]{0,63}")


def role_missing(message: Mapping[str, Any], role: object) -> str:
    """Why a message without a str `role` is refused: a mapping with a `type` and no role
    is a Responses API item (`response.output`, the Agents SDK's items), not a Chat
    Completions message, and the error says so."""
    kind = message.get("type")
    if role is not None or not isinstance(kind, str):
        return f"must be str, got {type(role).__name__}"
    named = f" ({kind!r})" if _ITEM_TYPE.fullmatch(kind) else ""
    return (
        f"missing: an item with a type{named}, as the Responses API gives, is not a Chat "
        "Completions message (the OpenAI Agents SDK's items go to "
        "ledgerfold.integrations.openai_agents.LedgerfoldSession)"
    )


def _require_utf8(value: str, index: int, field: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad(index, field, "not-utf8", NOT_UTF8) from None


def content_text(message: Mapping[str, Any], index: int) -> tuple[str, list[str]]:
    """The message text and the types of any non-text content parts left out of it. An
    assistant's audio reply (its `audio.transcript`) and refusal (Chat Completions'
    `refusal`, or `refusal` parts) are what it said: part of its text, each after any
    other text on a line of its own."""
    text, omitted = _parts_text(message, index)
    assistant = message.get("role") == "assistant"
    extra = [_audio_transcript(message, index), message.get("refusal")] if assistant else []
    for field, said in zip(("audio.transcript", "refusal"), extra, strict=False):
        if said is None:
            continue
        if not isinstance(said, str):
            raise bad(index, field, "wrong-type", "must be str")
        _require_utf8(said, index, field)
        text = f"{text}\n{said}" if text and said else text or said
    return text, omitted


def _audio_transcript(message: Mapping[str, Any], index: int) -> object:
    audio = message.get("audio")
    if audio is None:
        return None
    if not isinstance(audio, Mapping):
        raise bad(index, "audio", "wrong-type", f"must be a mapping, got {type(audio).__name__}")
    return audio.get("transcript")


def reasoning_text(message: Mapping[str, Any], index: int) -> str | None:
    """An assistant's `reasoning_content` (what reasoning models served by DeepSeek, vLLM and
    other OpenAI-compatible servers return beside the answer), kept in meta: it is not sent
    back (those servers refuse it in a request), but it is not lost either."""
    value = message.get("reasoning_content") if message.get("role") == "assistant" else None
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise bad(
            index, "reasoning_content", "wrong-type", f"must be str, got {type(value).__name__}"
        )
    _require_utf8(value, index, "reasoning_content")
    return value


def audio_id(message: Mapping[str, Any], index: int) -> str | None:
    """The id of an assistant's audio reply (`audio.id`), kept in meta as `audio_id`: the
    audio itself is not kept, and is not sent back (its id expires, the ledger does not)."""
    audio = message.get("audio") if message.get("role") == "assistant" else None
    if audio is None:
        return None
    audio_id = audio.get("id")  # a mapping: `content_text` checked it
    if not isinstance(audio_id, str) or not audio_id:
        raise bad(index, "audio.id", "wrong-type", "must be a non-empty str")
    _require_utf8(audio_id, index, "audio.id")
    return audio_id


# The content parts that hold text, and its key: Chat Completions' `text` and `refusal`
# parts, and the Responses API's `input_text` and `output_text` (its message items, and
# LangChain blocks from it), whose text would otherwise be left out with the images.
TEXT_PART_KEYS = {"text": "text", "refusal": "refusal", "input_text": "text", "output_text": "text"}


def annotations_json(message: Mapping[str, Any], index: int) -> str | None:
    """An assistant's `annotations` (a web search reply's URL citations), kept in meta as
    their compact JSON text when there are any: a request's message has no `annotations`,
    so they are not sent back, but they are not lost either."""
    value = message.get("annotations") if message.get("role") == "assistant" else None
    if value is None or (isinstance(value, list) and not value):
        return None
    if not isinstance(value, list):
        raise bad(index, "annotations", "wrong-type", f"must be a list, got {type(value).__name__}")
    at = unencodable_at(value)
    if at is not None:
        raise bad(index, f"annotations{at}", "not-utf8", NOT_UTF8)
    return compact_json(value, index, "annotations")


def _parts_text(message: Mapping[str, Any], index: int) -> tuple[str, list[str]]:
    content = message.get("content")
    if content is None:
        return "", []
    if isinstance(content, str):
        _require_utf8(content, index, "content")
        return content, []
    if not isinstance(content, list):
        raise bad(
            index,
            "content",
            "wrong-type",
            f"must be str, None or a list of content parts, got {type(content).__name__}",
        )
    texts: list[str] = []
    omitted: list[str] = []
    for part_index, part in enumerate(content):
        field = f"content[{part_index}]"
        if not isinstance(part, Mapping):
            raise bad(index, field, "wrong-type", "must be a content part mapping")
        part_type = part.get("type")
        if not isinstance(part_type, str) or not part_type:
            raise bad(index, f"{field}.type", "wrong-type", "must be a non-empty str")
        key = TEXT_PART_KEYS.get(part_type)
        if key is None:
            if part_type == "input_audio":  # never sendable without its audio
                check_audio(part, f"messages[{index}].{field}")
            omitted.append(part_type)
            continue
        text = part.get(key)
        if not isinstance(text, str):
            raise bad(index, f"{field}.{key}", "wrong-type", "must be str")
        _require_utf8(text, index, f"{field}.{key}")
        texts.append(text)
    # Text parts are one message: joined as the model reads them, without separators.
    return "".join(texts), omitted


def content_parts_json(message: Mapping[str, Any], index: int) -> str | None:
    """The message's content parts as JSON text (text parts included, for their order) when
    any part is not text (an image, input audio, a file): the ledger keeps them, so an
    image-only message is not an empty turn with nothing of what was sent. None otherwise.
    Called once `content_text` has checked the parts' types and texts."""
    content = message.get("content")
    if not isinstance(content, list) or all(part.get("type") in TEXT_PART_KEYS for part in content):
        return None
    at = unencodable_at(content)
    if at is not None:
        raise bad(index, f"content{at}", "not-utf8", NOT_UTF8)
    try:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        compact_json(content, index, "content")  # raises, naming what is wrong
        raise  # pragma: no cover - compact_json refuses what json.dumps refused


def tool_calls(message: Mapping[str, Any], index: int) -> list[Mapping[str, Any]]:
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise bad(index, "tool_calls", "wrong-type", "must be a list")
    for call_index, call in enumerate(calls):
        field = f"tool_calls[{call_index}]"
        if not isinstance(call, Mapping):
            raise bad(index, field, "wrong-type", "must be a mapping")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise bad(index, f"{field}.id", "wrong-type", "must be a non-empty str")
        _check_function(call.get("function"), index, f"{field}.function")
    texts = [_with_text_arguments(call, index, f"tool_calls[{n}]") for n, call in enumerate(calls)]
    for call_index, call in enumerate(texts):
        # Stored as ASCII JSON, a lone surrogate would pass and come back unsendable.
        at = unencodable_at(call)
        if at is not None:
            raise bad(index, f"tool_calls[{call_index}]{at}", "not-utf8", NOT_UTF8)
    return texts


def _check_function(function: Any, index: int, field: str) -> None:
    """A call's `function`, when it has one, is a mapping whose `name` is a str (or None, as
    LangChain's unparsable calls may have it): the API refuses any other, so the call would
    come back unsendable in every later request."""
    if function is None:
        return
    if not isinstance(function, Mapping):
        detail = f"must be a mapping, got {type(function).__name__}"
        raise bad(index, field, "wrong-type", detail)
    name = function.get("name")
    if name is not None and not isinstance(name, str):
        raise bad(index, f"{field}.name", "wrong-type", f"must be str, got {type(name).__name__}")


def _with_text_arguments(call: Mapping[str, Any], index: int, field: str) -> Mapping[str, Any]:
    """The call with `function.arguments` as the JSON text Chat Completions requires: a
    mapping (as a developer writes it by hand) becomes its compact JSON text, so what is
    sent back is valid; a str is kept as it is, and so is None (LangChain's invalid tool
    calls have no arguments); anything else is refused."""
    function = call.get("function")
    if not isinstance(function, Mapping) or "arguments" not in function:
        return call
    arguments = function["arguments"]
    field = f"{field}.function.arguments"
    if arguments is None or isinstance(arguments, str):
        return call
    if not isinstance(arguments, Mapping):
        raise bad(
            index,
            field,
            "wrong-type",
            f"must be a JSON str (or a mapping), got {type(arguments).__name__}",
        )
    try:
        text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        compact_json(arguments, index, field)  # raises, naming what is wrong
        raise  # pragma: no cover - compact_json refuses what json.dumps refused
    _require_utf8(text, index, field)
    return {**call, "function": {**function, "arguments": text}}


def compact_json(value: Any, index: int, field: str) -> str:
    # Strict JSON only: NaN and Infinity would make every later `to_chat_messages` output
    # invalid JSON (SPEC §15.6, §15.8).
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except RecursionError:
        raise bad(index, field, "not-allowed", "is nested too deeply") from None
    except (TypeError, ValueError):
        pass
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        raise bad(index, field, "wrong-type", "must be JSON-serialisable") from None
    raise bad(index, field, "not-allowed", "must not hold NaN or Infinity (not JSON)")


def explicit_id(message: Mapping[str, Any], index: int) -> str | None:
    value = message.get("id")
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad(index, "id", "wrong-type", f"must be str, got {type(value).__name__}")
    if not value.strip():
        raise bad(index, "id", "empty", "must not be blank")
    _require_utf8(value, index, "id")
    return value
