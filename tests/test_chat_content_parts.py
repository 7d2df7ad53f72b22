"""A chat message's image, input audio and file parts are kept in the ledger
(`meta["content_parts"]`) and go back to the model with the user's turn: an image-only
message is not an empty turn with nothing of what the user sent (SPEC §1: nothing is lost;
§8: the adapters restore what the message carried). Real SQLite files, the OpenAI SDK's own
message types, and a LangGraph run whose state lost the message (`RemoveMessage`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from openai.types.chat import (
    ChatCompletionContentPartImageParam,
    ChatCompletionContentPartParam,
    ChatCompletionContentPartTextParam,
    ChatCompletionMessageParam,
    ChatCompletionUserMessageParam,
)
from pydantic import TypeAdapter

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.adapters import from_langchain_messages, to_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.tokens import IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, approx_tokens, context_tokens

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/receipt.png"}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-abc123"}}
SENDABLE = TypeAdapter(list[ChatCompletionMessageParam])


def _store(tmp_path: Path) -> lf.SQLiteStore:
    return lf.SQLiteStore(tmp_path / "parts.db")


def _sent(store: lf.SQLiteStore, conversation: str = "c") -> list[dict[str, Any]]:
    messages = lf.to_chat_messages(store.context(conversation, "v1"))
    SENDABLE.validate_python(messages)  # what the OpenAI SDK takes as messages
    return messages


def test_an_image_only_message_keeps_its_image_and_sends_it_back(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append_chat_messages("c", [{"role": "user", "content": [IMAGE]}])
    (turn,) = store.load("c").turns
    assert turn.body == ""
    assert json.loads((turn.meta or {})["content_parts"]) == [IMAGE]
    assert _sent(store) == [{"role": "user", "content": [IMAGE]}]


def test_parts_keep_their_order_with_the_text(tmp_path: Path) -> None:
    store = _store(tmp_path)
    content = [
        {"type": "text", "text": "What is said here? "},
        AUDIO,
        {"type": "text", "text": "And"},
    ]
    store.append_chat_messages("c", [{"role": "user", "content": [*content, FILE]}])
    (turn,) = store.load("c").turns
    assert turn.body == "What is said here? And"  # the text is searched and summarised
    assert _sent(store) == [{"role": "user", "content": [*content, FILE]}]


def test_the_sdk_message_params_round_trip(tmp_path: Path) -> None:
    store = _store(tmp_path)
    parts: list[ChatCompletionContentPartParam] = [
        ChatCompletionContentPartTextParam(type="text", text="Look:"),
        ChatCompletionContentPartImageParam(
            type="image_url", image_url={"url": "https://example.com/a.png", "detail": "low"}
        ),
    ]
    messages = [ChatCompletionUserMessageParam(role="user", content=parts)]
    store.append_chat_messages("c", messages)
    assert _sent(store) == messages


def test_an_edited_turn_sends_its_text_then_the_parts(tmp_path: Path) -> None:
    store = _store(tmp_path)
    (turn,) = store.append_chat_messages(
        "c", [{"role": "user", "content": [{"type": "text", "text": "my card 4111"}, IMAGE]}]
    )
    store.edit("c", turn.id, body="my card [redacted]")
    assert _sent(store) == [
        {"role": "user", "content": [{"type": "text", "text": "my card [redacted]"}, IMAGE]}
    ]


def test_parts_chat_completions_refuses_are_kept_not_sent(tmp_path: Path) -> None:
    """A Responses API `input_image` in a chat message: kept, but Chat Completions refuses
    it in a request, so the turn goes back as its text."""
    store = _store(tmp_path)
    image = {"type": "input_image", "image_url": "https://example.com/a.png"}
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": [{"type": "input_text", "text": "see"}, image]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, IMAGE]},
        ],
    )
    user, assistant = store.load("c").turns
    assert json.loads((user.meta or {})["content_parts"])[1] == image
    assert json.loads((assistant.meta or {})["content_parts"])[1] == IMAGE
    assert _sent(store) == [
        {"role": "user", "content": "see"},
        {"role": "assistant", "content": "ok"},  # an assistant message takes text only
    ]


def test_a_lone_surrogate_in_a_part_is_refused_naming_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    bad = {"type": "image_url", "image_url": {"url": "https://example.com/\ud800.png"}}
    with pytest.raises(lf.InvalidInput) as raised:
        store.append_chat_messages("c", [{"role": "user", "content": [bad]}])
    assert raised.value.field == "messages[0].content[0].image_url.url"
    assert "example.com" not in str(raised.value)
    assert store.load("c").turns == ()


def test_nan_in_a_part_is_refused(tmp_path: Path) -> None:
    store = _store(tmp_path)
    bad = {"type": "image_url", "image_url": {"url": "u", "detail": float("nan")}}
    with pytest.raises(lf.InvalidInput) as raised:
        store.append_chat_messages("c", [{"role": "user", "content": [bad]}])
    assert (raised.value.field or "").startswith("messages[0].content")


def test_langgraph_state_without_the_image_still_sends_it(tmp_path: Path) -> None:
    """The image message leaves the graph state (`RemoveMessage`), and the process restarts
    (a new middleware over the same database and checkpointer): the ledger kept the image,
    and the model still gets the image the user sent, from the ledger."""
    checkpointer, config = InMemorySaver(), {"configurable": {"thread_id": "t1"}}
    url = IMAGE["image_url"]["url"]
    photo = HumanMessage(id="photo", content=[{"type": "image", "url": url}])
    first = create_agent(
        Scripted(default="Seen."),
        tools=[],
        middleware=[LedgerfoldMiddleware(_store(tmp_path), "c", recall=False)],
        checkpointer=checkpointer,
    )
    first.invoke({"messages": [photo]}, config)
    first.update_state(config, {"messages": [RemoveMessage(id="photo")]})
    model = Scripted(default="Seen.")
    restarted = create_agent(
        model,
        tools=[],
        middleware=[LedgerfoldMiddleware(_store(tmp_path), "c", recall=False)],
        checkpointer=checkpointer,
    )
    restarted.invoke({"messages": [HumanMessage(id="ask", content="What did I send?")]}, config)
    assert "photo" not in [m.id for m in restarted.get_state(config).values["messages"]]
    sent = model.inputs[-1]
    assert [m.type for m in sent] == ["human", "ai", "human"]
    assert sent[0].content == [IMAGE]  # the ledger's rendering: the state has it no more


def test_a_turn_stored_before_parts_were_kept_is_not_a_changed_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ledger written before the parts were kept holds the image message without them:
    the same message in the state is not logged as changed, and still goes to the model."""
    store = _store(tmp_path)
    store.append_many(
        "c",
        [
            {
                "id": "photo",
                "role": "user",
                "body": "",
                "meta": {"omitted_content_parts": '["image_url"]'},
            }
        ],
    )
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    photo = HumanMessage(id="photo", content=[IMAGE])
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        assert middleware.append_new([photo]) == 0
        (sent,) = middleware.model_messages()
    assert "changed" not in caplog.text
    assert sent is photo


def test_an_image_s_data_is_not_counted_as_text_tokens(tmp_path: Path) -> None:
    """A screenshot sent as a data URL (300 KB of base64) is not 75,000 tokens of text: the
    due check and the budget count the turn's text (and other meta), not its parts' data,
    and each image as `IMAGE_TOKENS` (what LangChain's approximate counter charges)."""
    store = _store(tmp_path)
    data = "data:image/png;base64," + "iVBORw0KGgo" * 30_000
    image = {"type": "image_url", "image_url": {"url": data}}
    text = {"type": "text", "text": "What is wrong on this screen?"}
    store.append_chat_messages("c", [{"role": "user", "content": [text, image]}])
    context = store.context("c", "v1")
    assert (
        context_tokens(context.items)
        == MESSAGE_OVERHEAD_TOKENS + approx_tokens(text["text"]) + IMAGE_TOKENS
    )
    compactor = lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=1, trigger_tokens=1000))
    assert not compactor.is_due("c")


def test_a_tool_s_image_goes_back_to_langchain_not_to_chat_completions(tmp_path: Path) -> None:
    """A screenshot a LangChain tool returned: a `ToolMessage` takes image parts (the state
    holds them so), Chat Completions' tool message takes text only: a line names the image
    (`tests/test_chat_tool_attachments.py`)."""
    store = _store(tmp_path)
    call = {"name": "screenshot", "args": {}, "id": "call-1"}
    state = [
        AIMessage("", tool_calls=[call], id="a"),
        ToolMessage([{"type": "image", "url": "https://example.com/s.png"}], tool_call_id="call-1"),
    ]
    store.append_many("c", [turn_spec(turn) for turn in from_langchain_messages(state)])
    context = store.context("c", "v1")
    (back,) = [m for m in to_langchain_messages(context) if isinstance(m, ToolMessage)]
    assert back.content == [
        {"type": "image_url", "image_url": {"url": "https://example.com/s.png"}}
    ]
    assert _sent(store)[1] == {
        "role": "tool",
        "content": "[image_url not shown: this tool result is sent as text only]",
        "tool_call_id": "call-1",
    }


def turn_spec(turn: lf.Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "role": turn.role,
        "body": turn.body,
        "group": turn.group,
        "meta": turn.meta,
    }
