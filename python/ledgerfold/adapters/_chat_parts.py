"""A turn's kept content parts (`meta["content_parts"]`, SPEC §8: what a chat message
carried besides its text: an image, input audio, a file) as the content `to_chat_messages`
sends: a user turn's parts of Chat Completions' shape, or, for LangChain, every part; and
a tool turn's stand-in for its parts (`tool_content`), where only text is taken."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ledgerfold.adapters._chat_fields import TEXT_PART_KEYS
from ledgerfold.adapters._input_audio import audio_of

__all__ = [
    "attachments_line",
    "chat_content_parts",
    "sendable_part",
    "session_parts",
    "strict_json",
    "tool_content",
    "user_content",
]

# The parts other than text that a Chat Completions user message takes (the only role whose
# message takes any): those of a user turn's `content_parts` go back with its text.
_USER_PART_TYPES = frozenset({"image_url", "input_audio", "file"})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str) -> Any:
    """`json.loads` that refuses NaN and ±Infinity (not JSON, though Python writes them)."""
    return json.loads(text, parse_constant=_refuse_constant)


def user_content(text: str, stored: str, *, every: bool = False) -> str | list[Any]:
    """A user turn's content from its `meta["content_parts"]`: its parts in their order, each
    text part as a `text` part and the images, input audio and files as they were sent (parts
    of other types, such as the Responses API's `input_image`, or not of Chat Completions'
    shape, which it refuses, stay in meta only; with `every`, for LangChain, which takes its
    own blocks too, every part goes). A turn whose text is no longer that of its parts (an
    edit) sends its text, then those parts; parts that are not as `from_chat_messages` writes
    them, or none to send, give the text alone."""
    try:
        parts = strict_json(stored)
    except (ValueError, RecursionError):
        return text
    if not isinstance(parts, list):
        return text
    converted = chat_content_parts(parts, _every if every else _sendable)
    if converted is None:
        return text
    texts, sent, media = converted
    if not media:
        return text
    if "".join(texts) != text:
        return [{"type": "text", "text": text}, *media] if text else media
    return sent


def chat_content_parts(
    parts: Iterable[Any],
    other: Callable[[Mapping[str, Any]], Any],
    *,
    strings: bool = False,
) -> tuple[list[str], list[Any], list[Any]] | None:
    """Content parts as chat content parts, in their order: each text part
    (`TEXT_PART_KEYS`: `text`, `input_text`, `output_text`, `refusal`; with `strings`, a bare
    str too) as a `text` part, each other part as `other` gives it (None: left out). Returns
    the texts, the parts, and those of them that are not text; None when a part is not a
    mapping (nor a str, with `strings`) or a text part's text is not a str."""
    texts: list[str] = []
    sent: list[Any] = []
    media: list[Any] = []
    for part in parts:
        if strings and isinstance(part, str):
            said: Any = part
        elif not isinstance(part, Mapping):
            return None
        else:
            key = TEXT_PART_KEYS.get(part.get("type"))  # type: ignore[arg-type]
            if key is None:
                converted = other(part)
                if converted is not None:
                    sent.append(converted)
                    media.append(converted)
                continue
            said = part.get(key)
            if not isinstance(said, str):
                return None
        texts.append(said)
        sent.append({"type": "text", "text": said})
    return texts, sent, media


def _every(part: Mapping[str, Any]) -> Any:
    # Every part but an `input_audio` without its audio, which no provider takes.
    return None if part.get("type") == "input_audio" and audio_of(part) is None else part


def _sendable(part: Mapping[str, Any]) -> Any:
    return part if sendable_part(part) else None


def sendable_part(part: Mapping[str, Any]) -> bool:
    """A Chat Completions user content part other than text: its type, with its mapping (an
    `input_audio` part with its audio's data and format, `audio_of`: a part stored before
    the chat adapter refused one without them is not sent)."""
    kind = part.get("type")
    if kind == "input_audio":
        return audio_of(part) is not None
    return kind in _USER_PART_TYPES and isinstance(part.get(kind), dict)


# A part type as the APIs name them (anything else a caller wrote is "part": meta text is
# not sent as it is), and the types that are no attachment (a model's thinking).
_PART_TYPE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_NOT_ATTACHED = frozenset({"thinking", "redacted_thinking", "reasoning"})


def tool_content(text: str, omitted: str | None) -> str:
    """A tool turn's content when it is sent as text (a Chat Completions tool message takes
    text only; to LangChain, a turn none of whose parts can be sent, such as an image by
    file ID only): its text, then, when the result had other parts
    (`meta["omitted_content_parts"]`: a screenshot, a file), one line naming their types, so
    the model knows what it cannot see and an image-only result is never `""`:
    `[image_url not shown: this tool result is sent as text only]`."""
    note = attachments_line(omitted)
    if not note:
        return text
    return f"{text}\n{note}" if text else note


def attachments_line(omitted: str | None) -> str:
    """The line `tool_content` adds after a tool turn's text for its parts of
    `meta["omitted_content_parts"]` (also counted as context tokens:
    `ledgerfold.tokens.context_tokens`); "" when there is none to name."""
    try:
        kinds = json.loads(omitted) if omitted is not None else None
    except (ValueError, RecursionError):
        return ""
    names: list[str] = []
    for kind in kinds if isinstance(kinds, list) else ():
        name = kind if isinstance(kind, str) and _PART_TYPE.fullmatch(kind) else "part"
        if name not in names and name not in _NOT_ATTACHED:
            names.append(name)
    if not names:
        return ""
    return f"[{', '.join(names)} not shown: this tool result is sent as text only]"


#: The meta key of the Agents SDK session's verbatim item (`openai_agents.ITEM_KEY`).
_ITEM_KEY = "agents_item"


def session_parts(role: str, text: str, meta: dict[str, str]) -> str | None:
    """A turn's content parts as `user_content` takes them (JSON text), for a turn the
    Agents SDK session wrote with image, audio or file parts (they are in its item, not in
    `meta["content_parts"]`); None for any other turn."""
    if _ITEM_KEY not in meta or "omitted_content_parts" not in meta:
        return None
    # Imported here: the integration's modules import this package.
    from ledgerfold.integrations._agents_parts import chat_parts

    parts = chat_parts(role, text, meta)
    return None if parts is None else json.dumps(parts, ensure_ascii=False)
