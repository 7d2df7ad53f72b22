"""A function result of image (or file) parts, as an Agents SDK tool returns a screenshot:
the turn's text is the result's text, and the other parts are recorded by type
(`meta["omitted_content_parts"]`), as the chat adapter records them. The session stored the
parts' JSON as the text, base64 data and all: the summarizer was given it, search indexed
it, and its size counted as tokens towards compaction. The item itself is served as it
came."""

from __future__ import annotations

import asyncio
import json

from ledgerfold import SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession

IMAGE = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUg" * 500
ITEMS = [
    {"role": "user", "content": "Take a screenshot of the login page."},
    {"type": "function_call", "call_id": "c1", "name": "screenshot", "arguments": "{}"},
    {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_image", "image_url": IMAGE, "detail": "auto"}],
    },
    {"type": "function_call", "call_id": "c2", "name": "screenshot", "arguments": "{}"},
    {
        "type": "function_call_output",
        "call_id": "c2",
        "output": [
            {"type": "input_text", "text": "The login page."},
            {"type": "input_file", "file_data": IMAGE, "filename": "page.pdf"},
        ],
    },
]


def test_image_and_file_parts_are_recorded_by_type_not_as_text() -> None:
    with SQLiteStore() as store:
        session = LedgerfoldSession("c", store=store)
        asyncio.run(session.add_items(ITEMS))
        turns = store.load("c").turns
        image_only, mixed = turns[2], turns[4]
        assert image_only.body == ""
        assert json.loads((image_only.meta or {})["omitted_content_parts"]) == ["input_image"]
        assert mixed.body == "The login page."
        assert json.loads((mixed.meta or {})["omitted_content_parts"]) == ["input_file"]
        assert store.search("c", "iVBORw0KGgoAAAANSUhEUg", scope="all") == []
        assert asyncio.run(session.get_items()) == ITEMS  # served as they came
