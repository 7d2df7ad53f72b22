"""The image, audio and file parts of a turn `LedgerfoldSession` wrote, as chat content parts
(SPEC §8), for `to_chat_messages` and the LangChain converters: the session keeps a
message's parts (and a result's list output) in the item's verbatim copy only, not in
`meta["content_parts"]` as the chat adapter does, so without this a user's image would go
to a Chat Completions or LangChain model as its text alone. The inverse of
`_agents_items._input_part`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledgerfold.adapters._chat_parts import chat_content_parts
from ledgerfold.integrations._agents_items import audio_of, is_output, kind, restored

__all__ = ["chat_parts"]

# Chat Completions' image details (not the Responses API's "original").
_DETAILS = frozenset({"low", "high", "auto"})
_FILE_KEYS = ("file_id", "file_data", "filename")


def chat_parts(role: str, text: str, meta: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The chat content parts of the item a session turn holds (a message's `content`, a
    result's `output`), from the item as `get_items` serves it (its text parts' text
    refilled; an edited turn's text in place of theirs): text parts as `text`, an
    `input_image` with a URL as `image_url`, an `input_file` with an ID or data as `file`,
    `input_audio` with its data and format; a part Chat Completions cannot express (an image
    by file ID, a file by URL, audio without data) is left out (it stays in the item). None
    when the item holds no such list."""
    items = restored(role, text, meta)
    item = items[0] if len(items) == 1 else None
    if not isinstance(item, Mapping):
        return None
    field = "content" if kind(item) == "message" else "output" if is_output(item) else None
    value = item.get(field) if field is not None else None
    if not isinstance(value, list):
        return None
    converted = chat_content_parts(value, _chat_part, strings=True)
    return None if converted is None else converted[1]


def _chat_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """One Responses input part that is not text as a chat content part (None: none)."""
    name = part.get("type")
    if name == "input_image":
        url, detail = part.get("image_url"), part.get("detail")
        if not isinstance(url, str) or not url:
            return None
        image = {"url": url, **({"detail": detail} if detail in _DETAILS else {})}
        return {"type": "image_url", "image_url": image}
    if name == "input_file":
        kept = {key: part[key] for key in _FILE_KEYS if isinstance(part.get(key), str)}
        return {"type": "file", "file": kept} if "file_id" in kept or "file_data" in kept else None
    audio = audio_of(part) if name == "input_audio" else None
    return None if audio is None else {"type": "input_audio", "input_audio": audio}
