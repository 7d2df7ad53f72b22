"""Turns `LedgerfoldSession` wrote keep a message's image, audio and file parts (and a
result's list output) in the item's verbatim copy only, not in `meta["content_parts"]`:
`to_chat_messages` and the LangChain converters read them from there, so a user's image
reaches a Chat Completions or LangChain model as an image (Responses `input_image` as
`image_url`, `input_file` as `file`), not as its text alone; a tool's screenshot reaches a
LangChain `ToolMessage` too (Chat Completions' tool message takes text: a line names it). An
edited turn sends its text and its parts; a part Chat Completions cannot express (an image
by file ID) stays in the item. Real SQLite files, a real `Runner.run` with a fake model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from langchain_core.messages import HumanMessage, ToolMessage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import ledgerfold as lf
from ledgerfold.adapters import to_langchain_messages
from ledgerfold.integrations.openai_agents import LedgerfoldSession

set_tracing_disabled(True)

DATA = "data:image/png;base64,iVBORw0KGgo="
QUESTION = [
    {"type": "input_text", "text": "What is wrong on this screen?"},
    {"type": "input_image", "image_url": DATA, "detail": "high"},
    {"type": "input_file", "file_id": "file-1", "filename": "log.txt"},
]
AS_CHAT = [
    {"type": "text", "text": "What is wrong on this screen?"},
    {"type": "image_url", "image_url": {"url": DATA, "detail": "high"}},
    {"type": "file", "file": {"file_id": "file-1", "filename": "log.txt"}},
]


class _Answering(Model):
    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        text = ResponseOutputText(annotations=[], text="A red error.", type="output_text")
        message = ResponseOutputMessage(
            id="msg_1", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_a_users_image_goes_to_chat_completions_and_langchain(tmp_path: Path) -> None:
    agent = Agent(name="a", instructions="Be brief.", model=_Answering())
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        session = LedgerfoldSession("s", store=store)
        question = [{"role": "user", "content": QUESTION}]
        asyncio.run(Runner.run(agent, question, session=session))  # type: ignore[arg-type]
        assert "content_parts" not in (store.load("s").turns[0].meta or {})  # in its item
        context = store.context("s", "v1")
        user, reply = lf.to_chat_messages(context)
        assert user == {"role": "user", "content": AS_CHAT}
        assert reply == {"role": "assistant", "content": "A red error."}
        human, _ = to_langchain_messages(context)
        assert isinstance(human, HumanMessage) and human.content == AS_CHAT


def _screenshot(output: list[Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Take a screenshot."},
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]


def test_a_tools_screenshot_goes_to_a_langchain_tool_message(tmp_path: Path) -> None:
    output = [
        {"type": "input_text", "text": "The screen:"},
        {"type": "input_image", "image_url": DATA, "detail": "auto"},
    ]
    with lf.SQLiteStore(tmp_path / "b.db") as store:
        asyncio.run(LedgerfoldSession("s", store=store).add_items(_screenshot(output)))
        context = store.context("s", "v1")
        (result,) = [m for m in to_langchain_messages(context) if isinstance(m, ToolMessage)]
        assert result.content == [
            {"type": "text", "text": "The screen:"},
            {"type": "image_url", "image_url": {"url": DATA, "detail": "auto"}},
        ]
        (sent,) = [m for m in lf.to_chat_messages(context) if m["role"] == "tool"]
        assert sent["content"] == (
            "The screen:\n[input_image not shown: this tool result is sent as text only]"
        )


def test_an_edited_turn_and_a_part_chat_cannot_express(tmp_path: Path) -> None:
    by_id = {"type": "input_image", "file_id": "file-9", "detail": "auto"}
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        session = LedgerfoldSession("s", store=store)
        asyncio.run(session.add_items([{"role": "user", "content": QUESTION}]))
        asyncio.run(session.add_items(_screenshot([by_id])))
        first = store.load("s").turns[0]
        store.edit("s", first.id, body="What is wrong here? [name redacted]")
        context = store.context("s", "v1")
        sent = lf.to_chat_messages(context)
        assert sent[0]["content"] == [
            {"type": "text", "text": "What is wrong here? [name redacted]"},
            *AS_CHAT[1:],
        ]
        # An image by file ID: Chat Completions has no such part; the tool result is named
        # (not ""), to LangChain too; the item keeps it for the Agents SDK.
        note = "[input_image not shown: this tool result is sent as text only]"
        assert sent[-1]["content"] == note
        (result,) = [m for m in to_langchain_messages(context) if isinstance(m, ToolMessage)]
        assert result.content == note
        assert asyncio.run(session.get_items())[-1]["output"] == [by_id]
