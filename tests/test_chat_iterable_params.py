"""The OpenAI SDK types a message's `content` parts and `tool_calls` as `Iterable`: a tuple
is one, and validating messages with the SDK's own types
(`TypeAdapter(list[ChatCompletionMessageParam])`) makes them one-pass iterators. Both are
read as the lists they stand for (they were refused as not a list of content parts), and
what they held is in the ledger and comes back."""

from __future__ import annotations

from pathlib import Path

from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

import ledgerfold as lf

PARAMS = TypeAdapter(list[ChatCompletionMessageParam])
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "Look:"}, IMAGE]},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "found"}]},
]


def _sent(store: lf.SQLiteStore) -> list[dict[str, object]]:
    return lf.to_chat_messages(store.context("c", "v1"))


def test_messages_validated_by_the_sdk_s_types(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    store.append_chat_messages("c", PARAMS.validate_python(MESSAGES))
    sent = _sent(store)
    assert sent[0]["content"] == MESSAGES[0]["content"]
    assert sent[1]["tool_calls"] == [CALL]
    assert sent[2] == {"role": "tool", "content": "found", "tool_call_id": "c1"}


def test_tuples(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "b.db")
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": ({"type": "text", "text": "Look:"}, IMAGE)},
            {"role": "assistant", "content": None, "tool_calls": (CALL,)},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
    )
    assert _sent(store)[:2] == [
        MESSAGES[0],
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
    ]
