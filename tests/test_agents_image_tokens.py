"""An image sent inline (a base64 data URL) in an Agents SDK item is not counted as text
tokens: the session keeps the item whole in meta, and the due check counted the copy's
base64 (a 330 KB screenshot: about 82,000 tokens), so every `add_items` found compaction
due while the image stayed in the context. The turn's text and the item's other fields
still count."""

from __future__ import annotations

import asyncio
from pathlib import Path

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from ledgerfold.tokens import IMAGE_TOKENS, context_tokens

SCREENSHOT = "data:image/png;base64," + "iVBORw0KGgo" * 30_000
ITEM = {
    "role": "user",
    "content": [
        {"type": "input_text", "text": "What is wrong on this screen?"},
        {"type": "input_image", "image_url": SCREENSHOT, "detail": "auto"},
    ],
}


def test_a_screenshot_is_not_counted_as_text(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    policy = lf.CompactionPolicy("v1", keep_tail=1, trigger_tokens=1000, min_new_turns=1)
    session = LedgerfoldSession("s", store=store, policy=policy)
    asyncio.run(session.add_items([{"role": "user", "content": "Hello."}, ITEM]))
    assert context_tokens(session.context().items) < 200
    outcome = asyncio.run(session.wait_compaction())
    assert outcome is not None and outcome.status == "skipped"
    assert asyncio.run(session.get_items())[1] == ITEM  # the image itself is kept


def test_text_in_meta_still_counts() -> None:
    turn = lf.TurnItem("t", "tool", "", 1, {"agents_item": '{"output": "' + "word " * 400 + '"}'})
    assert context_tokens([turn]) > 400


def test_each_image_still_counts_what_a_model_charges_for_it(tmp_path: Path) -> None:
    """Not counting an image's data must not make it free: a budget that saw none of a
    computer-use agent's screenshots would send a model more than its window. Each counts
    `IMAGE_TOKENS` (LangChain's `count_tokens_approximately` charges the same), in an Agents
    item's copy and in a chat message's kept parts alike."""
    store = lf.SQLiteStore(tmp_path / "b.db")
    session = LedgerfoldSession("s", store=store)
    asyncio.run(session.add_items([ITEM]))
    (agents,) = session.context().items
    without = lf.TurnItem("t", "user", agents.text, 1, {"agents_item": "{}"})
    assert context_tokens([agents]) - context_tokens([without]) >= IMAGE_TOKENS
    two = {**ITEM, "content": [*ITEM["content"], ITEM["content"][1]]}  # type: ignore[list-item]
    asyncio.run(session.add_items([two]))
    assert context_tokens(session.context().items[1:]) - context_tokens([agents]) >= IMAGE_TOKENS
    parts = '[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}'
    chat = lf.TurnItem("u", "user", "a", 1, {"content_parts": parts + "]"})
    plain = lf.TurnItem("u", "user", "a", 1, None)
    assert context_tokens([chat]) == context_tokens([plain]) + IMAGE_TOKENS
    broken = lf.TurnItem("u", "user", "a", 1, {"content_parts": '["image_url"'})
    assert context_tokens([broken]) == context_tokens([plain])
