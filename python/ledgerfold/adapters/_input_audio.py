"""An `input_audio` content part, checked once for both ways in (SPEC §8, §17.6): the chat
adapter's (`from_chat_messages`, `append_chat_messages`: `messages[i].content[j]...`) and
the Agents SDK session's (`LedgerfoldSession.add_items`: `items[i].content[j]...`).

The part is Chat Completions' `ChatCompletionContentPartInputAudioParam`, which is also
the Agents SDK's `ResponseInputAudioParam`: `{"type": "input_audio", "input_audio":
{"data": <base64 str>, "format": "wav" | "mp3"}}`. Without its data and format the part can
never be sent: Chat Completions refuses it, and so does the SDK's Chat Completions
converter (`UserError` at every run served it). The format is not held to OpenAI's two:
OpenAI-compatible servers (vLLM, for one) take others, and the ledger is theirs too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledgerfold._errors import InvalidInput

__all__ = ["audio_fault", "audio_of", "check_audio"]

#: The keys of a part's `input_audio`, each a non-empty str.
_AUDIO_KEYS = ("data", "format")


def audio_fault(part: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """What is wrong with an `input_audio` part, as (the field under the part, the problem,
    the detail), or None when it holds its audio: `input_audio` a mapping whose `data` and
    `format` are non-empty str. Names no value of the part (its data is the user's)."""
    audio = part.get("input_audio")
    if not isinstance(audio, Mapping):
        got = "nothing" if audio is None else type(audio).__name__
        detail = f"must be a mapping holding the audio's data and format, got {got}"
        return "input_audio", "wrong-type", detail
    for key in _AUDIO_KEYS:
        value = audio.get(key)
        field = f"input_audio.{key}"
        if isinstance(value, str) and value:
            continue
        if isinstance(value, str):
            return field, "empty", "must not be empty"
        got = "nothing" if value is None else type(value).__name__
        return field, "wrong-type", f"must be a non-empty str, got {got}"
    return None


def audio_of(part: Mapping[str, Any]) -> dict[str, str] | None:
    """An `input_audio` part's audio, `{"data", "format"}`, as Chat Completions and the Agents
    SDK take it; None when the part holds no such audio (`audio_fault`: a URL, a bare part,
    a part an older ledgerfold stored before `check_audio` refused it)."""
    if audio_fault(part) is not None:
        return None
    audio = part["input_audio"]
    return {"data": audio["data"], "format": audio["format"]}


def check_audio(part: Mapping[str, Any], field: str) -> None:
    """`InvalidInput` naming the wrong key under `field` (the part's own name:
    `messages[0].content[1]`, `items[0].content[1]`) when the part does not hold its audio
    (`audio_fault`)."""
    fault = audio_fault(part)
    if fault is None:
        return
    key, problem, detail = fault
    named = f"{field}.{key}"
    raise InvalidInput(f"{named}: {detail}", field=named, problem=problem)
