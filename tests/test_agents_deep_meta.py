"""`LedgerfoldSession.get_items` reads a turn's stored JSON meta: a chat message's kept
parts (`meta["content_parts"]`, for a user turn and a tool result) and the session's own
copy of an item (`meta["agents_item"]`). Meta is any text `append` takes: JSON nested deeper
than Python's parser follows raised RecursionError there, so every `get_items` of the
conversation failed (and the agent's run with it). Such a value now reads as text that is
not JSON does: the turn's text, as a turn the session did not write. Real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

DEEP = "[" * 100_000 + "]" * 100_000
CALLS = json.dumps([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])


def _items(path: Path, role: str, meta: dict[str, str]) -> list[Any]:
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "Start.", id="s")
        if role == "tool":
            store.append("c", "assistant", "", id="a", meta={"tool_calls": CALLS})
            meta = {**meta, "tool_call_id": "c1"}
        store.append("c", role, "look", id="t", meta=meta)
        return asyncio.run(LedgerfoldSession("c", store=store).get_items())


@pytest.mark.parametrize("role", ["user", "tool"])
def test_deeply_nested_content_parts_read_as_the_turn_s_text(tmp_path: Path, role: str) -> None:
    deep = _items(tmp_path / "deep.db", role, {"content_parts": DEEP})
    not_json = _items(tmp_path / "text.db", role, {"content_parts": "not JSON"})
    assert deep == not_json
    assert deep[-1] == (
        {"role": "user", "content": "look"}
        if role == "user"
        else {"type": "function_call_output", "call_id": "c1", "output": "look"}
    )


def test_a_deeply_nested_item_copy_reads_as_a_turn_the_session_did_not_write(
    tmp_path: Path,
) -> None:
    deep = _items(tmp_path / "deep.db", "user", {"agents_item": DEEP})
    not_json = _items(tmp_path / "text.db", "user", {"agents_item": "not JSON"})
    assert deep == not_json
    assert deep[-1] == {"role": "user", "content": "look"}
