"""A custom tool call (the OpenAI SDK's `ChatCompletionMessageCustomToolCall`, `type:
"custom"`, whose `custom.input` is free text the model wrote) keeps its name and input
wherever the ledger's calls are read: the summarizers name the tool (the extractive one wrote
the turn as "(empty)", the LLM ones' request had `name: null, arguments: null`), and the
LangChain rendering carries them (as an invalid tool call: LangChain's calls hold JSON
arguments only), instead of a call with no name and no arguments."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import AIMessage
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam
from pydantic import TypeAdapter

import ledgerfold as lf
from ledgerfold.adapters import to_langchain_messages
from ledgerfold.summarizers._chat_completions import frame_request

SQL = "SELECT total FROM orders WHERE id = 'PO-9302'"
REPLY = ChatCompletionMessage.model_validate(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "cc1", "type": "custom", "custom": {"name": "run_sql", "input": SQL}}
        ],
    }
)


def _store(tmp_path: Path) -> lf.SQLiteStore:
    store = lf.SQLiteStore(tmp_path / "custom.db")
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "What did PO-9302 cost?"},
            REPLY,
            {"role": "tool", "tool_call_id": "cc1", "content": "112.50"},
        ],
    )
    return store


def _request(store: lf.SQLiteStore) -> lf.SummaryRequest:
    items = tuple(
        lf.TurnItem(turn.id, turn.role, turn.body, turn.sequence, turn.meta)
        for turn in store.load("c").turns
    )
    return lf.SummaryRequest("c", "p", "v1", items, None)


def test_the_call_goes_back_as_it_came(tmp_path: Path) -> None:
    messages = lf.to_chat_messages(_store(tmp_path).context("c", "v1"))
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(messages)
    assert (
        messages[1]["tool_calls"] == REPLY.model_dump(mode="json", exclude_none=True)["tool_calls"]
    )


def test_the_extractive_summary_names_the_tool(tmp_path: Path) -> None:
    lines = lf.ExtractiveSummarizer()(_request(_store(tmp_path))).splitlines()
    assert lines[1] == "[seq 2 assistant] calls: run_sql"


def test_the_llm_summarizers_request_has_its_name_and_input(tmp_path: Path) -> None:
    framed = frame_request(_request(_store(tmp_path)))
    block = framed[framed.index("<turns>") + len("<turns>") : framed.index("</turns>")]
    call = json.loads(block)[1]["tool_calls"][0]
    assert call == {"id": "cc1", "name": "run_sql", "arguments": SQL}


def test_the_langchain_rendering_keeps_its_name_and_input(tmp_path: Path) -> None:
    message = to_langchain_messages(_store(tmp_path).context("c", "v1"))[1]
    assert isinstance(message, AIMessage)
    (call,) = message.invalid_tool_calls
    assert (call["id"], call["name"], call["args"]) == ("cc1", "run_sql", SQL)
