"""Input audio through `LedgerfoldSession`: what `get_items` serves is what the Agents SDK
takes. The SDK's form of an audio part is Chat Completions' own (`ResponseInputAudioParam`:
`{"type": "input_audio", "input_audio": {"data", "format"}}`), which its Chat Completions
converter sends as audio and which raises `UserError` there without data and format, at
every run served it (the Responses API takes no audio part in a message at all). So an
audio part the chat adapter kept goes as that form, or not at all (one an older ledgerfold
stored without its audio), and `add_items` refuses one without its audio (`InvalidInput`
naming the part's key, as the chat adapter does: tests/test_chat_input_audio.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.models.chatcmpl_converter import Converter
from openai.types.responses import ResponseInputAudioParam
from pydantic import TypeAdapter

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
NO_AUDIO = [
    {"type": "input_audio", "input_audio": {"data": "UklGRg=="}},  # no format
    {"type": "input_audio", "input_audio": {"url": "https://example.com/a.wav"}},
    {"type": "input_audio", "input_audio": "UklGRg=="},
    {"type": "input_audio"},
]


def _audio_parts(items: list[Any]) -> list[Any]:
    return [
        part
        for item in items
        if isinstance(item.get("content"), list)
        for part in item["content"]
        if part.get("type") == "input_audio"
    ]


@pytest.mark.parametrize("part", [AUDIO, {**AUDIO, "note": "kept by a proxy"}, *NO_AUDIO])
def test_a_chat_audio_part_comes_back_as_the_sdk_takes_it(tmp_path: Path, part: Any) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    content = [{"type": "text", "text": "hear"}, part]
    if part.get("input_audio") == AUDIO["input_audio"]:
        store.append_chat_messages("s", [{"role": "user", "content": content}])
    else:  # the chat adapter refuses it now: as an older ledgerfold stored it
        meta = {"content_parts": json.dumps(content), "omitted_content_parts": '["input_audio"]'}
        store.append("s", "user", "hear", meta=meta)
    items = asyncio.run(LedgerfoldSession("s", store=store).get_items())
    messages = Converter.items_to_messages(items)  # the SDK's Chat Completions conversion
    content: Any = messages[0]["content"]
    sent = [p for p in content if p["type"] == "input_audio"] if isinstance(content, list) else []
    if part.get("input_audio") == AUDIO["input_audio"]:
        assert _audio_parts(items) == sent == [AUDIO]
        TypeAdapter(ResponseInputAudioParam).validate_python(_audio_parts(items)[0])
    else:  # no audio to send: the turn's text
        assert items == [{"role": "user", "content": "hear"}] and sent == []
    store.close()


@pytest.mark.parametrize("part", NO_AUDIO)
def test_add_items_refuses_an_audio_part_without_its_audio(tmp_path: Path, part: Any) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store)
    item = {"role": "user", "content": [{"type": "input_text", "text": "hear"}, part]}
    with pytest.raises(lf.InvalidInput) as raised:
        asyncio.run(session.add_items([{"role": "user", "content": "first"}, item]))
    assert (raised.value.field or "").startswith("items[1].content[1].input_audio")
    assert "UklGRg" not in str(raised.value)
    assert store.load("s").turns == ()
    # The SDK's form is stored and served as it came.
    asyncio.run(session.add_items([{**item, "content": [item["content"][0], AUDIO]}]))
    served = asyncio.run(session.get_items())
    assert _audio_parts(served) == [AUDIO]
    Converter.items_to_messages(served)
    store.close()


def test_a_stored_audio_part_without_its_audio_is_not_sent_to_chat(tmp_path: Path) -> None:
    """An item a session stored before `add_items` refused such a part: `to_chat_messages`
    sends its text, not a part the provider refuses."""
    store = lf.SQLiteStore(tmp_path / "s.db")
    content = [{"type": "input_text", "text": "hear"}, NO_AUDIO[0]]
    item = json.dumps({"role": "user", "content": content})
    meta = {"agents_item": item, "omitted_content_parts": '["input_audio"]'}
    store.append("s", "user", "hear", meta=meta)
    (message,) = lf.to_chat_messages(LedgerfoldSession("s", store=store).context())
    assert message["content"] in ("hear", [{"type": "text", "text": "hear"}])
    store.close()
