"""A message item's image, audio and file parts in `LedgerfoldSession` (SPEC §17.6): the
item is kept whole and served as it came, and its turn records the parts by type, as the
chat adapter does (`meta["omitted_content_parts"]`), so an image-only message is not an
empty turn to the summarizer. Under a real `Runner.run` with a fake model (no network)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

set_tracing_disabled(True)

IMAGE = {"type": "input_image", "image_url": "https://example.com/receipt.png", "detail": "auto"}
FILE = {"type": "input_file", "file_id": "file-abc123"}
PHOTO = {"role": "user", "content": [IMAGE]}
MIXED = {"role": "user", "content": [{"type": "input_text", "text": "The contract:"}, FILE]}


class Answering(Model):
    """Answers every call; records every input."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        self.inputs.append(list(input) if isinstance(input, list) else [input])
        message = ResponseOutputMessage(
            id="msg",
            content=[ResponseOutputText(annotations=[], text="Seen.", type="output_text")],
            role="assistant",
            status="completed",
            type="message",
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_parts_are_recorded_by_type_and_served_as_they_came(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    session = LedgerfoldSession("s", store=store)
    asyncio.run(session.add_items([PHOTO, MIXED]))
    photo, mixed = store.load("s").turns
    assert photo.body == "" and mixed.body == "The contract:"
    assert json.loads((photo.meta or {})["omitted_content_parts"]) == ["input_image"]
    assert json.loads((mixed.meta or {})["omitted_content_parts"]) == ["input_file"]
    assert "content_parts" not in (photo.meta or {})  # the item itself is kept whole
    assert asyncio.run(session.get_items()) == [PHOTO, MIXED]


def test_an_image_only_message_is_not_empty_in_the_summary(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "b.db")
    policy = lf.CompactionPolicy("v1", keep_tail=1, min_new_turns=1)
    session = LedgerfoldSession("s", store=store, policy=policy)
    asyncio.run(session.add_items([PHOTO, {"role": "assistant", "content": "A receipt."}]))
    session.compactor.compact("s", force=True)
    summary = store.current_summary("s")
    assert summary is not None
    assert "[seq 1 user] (attached: input_image)" in summary.text


def test_a_run_s_image_reaches_the_next_run_s_model(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "c.db")
    session = LedgerfoldSession("s", store=store)
    model = Answering()
    agent = Agent(name="a", model=model)
    asyncio.run(Runner.run(agent, [PHOTO], session=session))  # type: ignore[list-item]
    asyncio.run(Runner.run(agent, "What did I send?", session=session))
    first = model.inputs[-1][0]
    assert dict(first)["content"] == [IMAGE]
    assert json.loads((store.load("s").turns[0].meta or {})["omitted_content_parts"]) == [
        "input_image"
    ]


def test_a_chat_message_s_image_reaches_an_agents_model(tmp_path: Path) -> None:
    """A turn no session wrote (`append_chat_messages`, an import) with an image: the session
    serves its parts as Responses input parts, so the model gets the image, not ""."""
    store = lf.SQLiteStore(tmp_path / "d.db")
    url = "https://example.com/receipt.png"
    store.append_chat_messages(
        "s",
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "My receipt:"},
                    {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
                    {"type": "file", "file": {"file_id": "file-1"}},
                ],
            },
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]},
        ],
    )
    session = LedgerfoldSession("s", store=store)
    model = Answering()
    asyncio.run(Runner.run(Agent(name="a", model=model), "Total?", session=session))
    first, second = (dict(item) for item in model.inputs[-1][:2])
    assert first["content"] == [
        {"type": "input_text", "text": "My receipt:"},
        {"type": "input_image", "image_url": url, "detail": "high"},
        {"type": "input_file", "file_id": "file-1"},
    ]
    assert second["content"] == [{"type": "input_image", "image_url": url, "detail": "auto"}]
    turn = store.load("s").turns[0]
    store.edit("s", turn.id, body="My receipt (redacted):")
    (edited, *_) = asyncio.run(session.get_items())
    assert edited["content"][0] == {"type": "input_text", "text": "My receipt (redacted):"}
    assert [part["type"] for part in edited["content"]] == [
        "input_text",
        "input_image",
        "input_file",
    ]


def test_a_chat_tool_result_s_image_reaches_an_agents_model(tmp_path: Path) -> None:
    """A tool result written by `append_chat_messages` with an image (a screenshot) is served
    as a `function_call_output` of input parts, not as its text alone."""
    store = lf.SQLiteStore(tmp_path / "e.db")
    url = "https://example.com/screen.png"
    call = {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
    store.append_chat_messages(
        "s",
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [
                    {"type": "text", "text": "Login page:"},
                    {"type": "image_url", "image_url": {"url": url}},
                ],
            },
        ],
    )
    result = asyncio.run(LedgerfoldSession("s", store=store).get_items())[-1]
    assert result == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [
            {"type": "input_text", "text": "Login page:"},
            {"type": "input_image", "image_url": url, "detail": "auto"},
        ],
    }
