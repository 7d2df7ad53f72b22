"""What `to_chat_messages` sends is what the OpenAI SDK's message params allow (SPEC §8,
§15.6): each message has only the keys of `ChatCompletion<Role>MessageParam` for its role
(strict providers refuse any other), checked against the installed SDK's TypedDicts, over
a real file ledger written by `append_chat_messages`."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionDeveloperMessageParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)

from ledgerfold import SQLiteStore, to_chat_messages
from ledgerfold.adapters import to_langchain_messages

POLICY = "v1"

# The keys the SDK's message param of each role has.
PARAM_KEYS = {
    role: set(typing.get_type_hints(param))
    for role, param in {
        "system": ChatCompletionSystemMessageParam,
        "developer": ChatCompletionDeveloperMessageParam,
        "user": ChatCompletionUserMessageParam,
        "assistant": ChatCompletionAssistantMessageParam,
        "tool": ChatCompletionToolMessageParam,
    }.items()
}


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def _named_messages() -> list[dict[str, Any]]:
    """One message of every role, each with a `name` (a tool message too: a framework's
    result, or a message written before the Chat Completions tool message lost its name)."""
    return [
        {"role": "system", "content": "be brief", "name": "ops"},
        {"role": "developer", "content": "use tools", "name": "dev"},
        {"role": "user", "content": "where is order 7?", "name": "ann"},
        {"role": "assistant", "content": "checking", "name": "bot", "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "shipped", "name": "lookup"},
        {"role": "assistant", "content": "It shipped.", "name": "bot"},
    ]


def test_every_message_has_only_its_sdk_params_keys(tmp_path: Path) -> None:
    assert "name" not in PARAM_KEYS["tool"]  # the SDK this test runs against
    with SQLiteStore(tmp_path / "ledger.db") as store:
        store.append_chat_messages("c", _named_messages())
    with SQLiteStore(tmp_path / "ledger.db") as store:
        sent = to_chat_messages(store.context("c", POLICY))
        turns = store.load("c").turns
    assert [m["role"] for m in sent] == [m["role"] for m in _named_messages()]
    for message in sent:
        assert set(message) <= PARAM_KEYS[message["role"]], message["role"]
    # Every role that has `name` sends it; the tool turn keeps it in meta (nothing lost).
    assert [m.get("name") for m in sent] == ["ops", "dev", "ann", "bot", None, "bot"]
    assert turns[4].meta == {"tool_call_id": "c1", "name": "lookup"}
    assert sent[4] == {"role": "tool", "content": "shipped", "tool_call_id": "c1"}


def test_a_message_only_calling_tools_has_null_content(tmp_path: Path) -> None:
    """As the API returns it: `content` null (not "", which some providers refuse) on an
    assistant message with tool calls and no text; "" stays "" everywhere else."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "assistant", "content": "", "tool_calls": [_call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "found"},
        {"role": "assistant", "content": "one more", "tool_calls": [_call("c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "done"},
        {"role": "assistant", "content": ""},
    ]
    with SQLiteStore(tmp_path / "ledger.db") as store:
        store.append_chat_messages("c", messages)
        turns = store.load("c").turns
        context = store.context("c", POLICY)
    sent = to_chat_messages(context)
    assert [turn.body for turn in turns[:4]] == ["", "", "", ""]  # the ledger keeps ""
    assert [m["content"] for m in sent] == ["", None, "", None, "found", "one more", "done", ""]
    assert json.loads(json.dumps(sent)) == sent  # null in JSON
    # LangChain takes no None content: its AIMessage gets "" (and its calls).
    back = to_langchain_messages(context)
    assert [m.content for m in back] == [m["content"] or "" for m in sent]
    assert [len(getattr(m, "tool_calls", ())) for m in back] == [0, 1, 0, 1, 0, 1, 0, 0]
