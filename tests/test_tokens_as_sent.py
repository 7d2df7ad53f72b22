"""`context_tokens` counts a turn as `to_chat_messages` sends it (SPEC §15.2: the due check
and the budget count the assembled context). A message's image, audio or file parts are
kept with the list of their types (`meta["omitted_content_parts"]`, JSON text such as
`["image_url"]`), which no adapter sends: it was counted as text all the same. Each test
counts the messages sent and compares. Real SQLite files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
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
