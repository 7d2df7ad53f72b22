"""`context_tokens` counts a turn as `to_chat_messages` sends it (SPEC §15.2: the due check
and the budget count the assembled context). A message's image, audio or file parts are
kept with the list of their types (`meta["omitted_content_parts"]`, JSON text such as
`["image_url"]`), which no adapter sends: it was counted as text all the same. Each test
counts the messages sent and compares. Real SQLite files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.adapters import to_langchain_messages
from ledgerfold.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    LangChainCounter,
    TokenCounter,
    approx_tokens,
    item_tokens,
)

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
TEXT = {"type": "text", "text": "What is wrong on this screen?"}


def sent_tokens(message: dict[str, Any], counter: TokenCounter) -> int:
    """What a chat message sent costs: its text, each image `IMAGE_TOKENS` (an audio part's
    data is not text either), a tool message's `tool_call_id`, and the framing."""
    content = message["content"]
    parts = [content] if isinstance(content, str) else content
    tokens = MESSAGE_OVERHEAD_TOKENS
    texts = [part if isinstance(part, str) else part.get("text", "") for part in parts]
    tokens += counter("".join(texts))
    tokens += IMAGE_TOKENS * sum(isinstance(p, dict) and p["type"] == "image_url" for p in parts)
    if message["role"] == "tool":
        tokens += counter(message["tool_call_id"])
    return tokens


def test_a_user_turn_with_parts_counts_as_sent(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "u.db") as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": [TEXT, IMAGE]},
                {"role": "user", "content": [IMAGE, IMAGE]},
                {"role": "user", "content": [TEXT, AUDIO]},
            ],
        )
        context = store.context("c", "v1")
    sent = lf.to_chat_messages(context)
    assert [m["content"] for m in sent] == [[TEXT, IMAGE], [IMAGE, IMAGE], [TEXT, AUDIO]]
    for item, message in zip(context.items, sent, strict=True):
        assert item.meta is not None and "omitted_content_parts" in item.meta
        for counter in (approx_tokens, len):
            assert item_tokens(item, counter) == sent_tokens(message, counter)


def _call(call_id: str) -> dict[str, Any]:
    function = {"name": "screenshot", "arguments": "{}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _tool_context(tmp_path: Path) -> lf.AssembledContext:
    with lf.SQLiteStore(tmp_path / "t.db") as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "Take screenshots."},
                _call("c1"),
                {"role": "tool", "tool_call_id": "c1", "content": [IMAGE]},
                _call("c2"),
                {"role": "tool", "tool_call_id": "c2", "content": [TEXT, IMAGE, IMAGE]},
                _call("c3"),
                {"role": "tool", "tool_call_id": "c3", "content": "plain text"},
            ],
        )
        return store.context("c", "v1")


def test_a_tool_turn_s_images_are_not_counted_where_only_text_is_sent(tmp_path: Path) -> None:
    """A Chat Completions tool message takes text only: a tool's screenshot goes as the
    turn's text and a line naming it, and counted 85 tokens an image as well."""
    context = _tool_context(tmp_path)
    sent = lf.to_chat_messages(context)
    tools = [(item, m) for item, m in zip(context.items, sent, strict=True) if item.role == "tool"]
    assert [m["content"] for _, m in tools] == [
        "[image_url not shown: this tool result is sent as text only]",
        f"{TEXT['text']}\n[image_url not shown: this tool result is sent as text only]",
        "plain text",
    ]
    for item, message in tools:
        for counter in (approx_tokens, len):
            assert item_tokens(item, counter) == sent_tokens(message, counter)


def test_to_langchain_a_tool_turn_counts_with_its_images(tmp_path: Path) -> None:
    """A LangChain `ToolMessage` takes the images (`LangChainCounter`, the middleware's)."""
    context = _tool_context(tmp_path)
    sent = to_langchain_messages(context)
    for item, message in zip(context.items, sent, strict=True):
        if item.role != "tool":
            continue
        assert item.meta is not None
        as_dict = {
            "role": "tool",
            "content": message.content,
            "tool_call_id": item.meta["tool_call_id"],
        }
        for counter in (approx_tokens, len):
            assert item_tokens(item, LangChainCounter(counter)) == sent_tokens(as_dict, counter)
