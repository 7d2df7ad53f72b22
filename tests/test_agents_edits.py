"""An edited turn goes out as the ledger has it (SPEC §17.6: the ledger is the record), also
when its Agents SDK item holds its text in a list (a message's content parts, a result's
list output, a shell's output): the session served the item's original copy, so a
redaction (`store.edit`) of a message with an image never reached the model. Items that
were not edited come back exactly as they came; a copy stored before is served as stored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

IMAGE = {"type": "input_image", "image_url": "https://example.com/card.png", "detail": "auto"}
SHELL = {"stdout": "card 4111 1111", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "input_text", "text": "My card is 4111 1111."}, IMAGE]},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Card 4111 1111 saved.", "annotations": []}],
    },
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
    {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "card 4111 1111 on file"}],
    },
    {"type": "shell_call", "call_id": "s1", "action": {"commands": ["cat"]}, "status": "completed"},
    {"type": "shell_call_output", "call_id": "s1", "output": [SHELL]},
]


def _session(path: Path) -> tuple[lf.SQLiteStore, LedgerfoldSession]:
    store = lf.SQLiteStore(path)
    session = LedgerfoldSession("s", store=store)
    asyncio.run(session.add_items(ITEMS))
    return store, session


def test_unedited_items_come_back_as_they_came(tmp_path: Path) -> None:
    _, session = _session(tmp_path / "a.db")
    assert asyncio.run(session.get_items()) == ITEMS


def test_an_edit_of_each_is_what_the_model_gets(tmp_path: Path) -> None:
    store, session = _session(tmp_path / "b.db")
    turns = store.load("s").turns
    for at, body in [
        (0, "My card is [redacted]."),
        (1, "Card [redacted] saved."),
        (3, "card [redacted] on file"),
        (5, "card [redacted]"),
    ]:
        store.edit("s", turns[at].id, body=body)
    user, answer, _, result, _, shell = asyncio.run(session.get_items())
    assert user["content"] == [{"type": "input_text", "text": "My card is [redacted]."}, IMAGE]
    assert answer["content"] == [
        {"type": "output_text", "text": "Card [redacted] saved.", "annotations": []}
    ]
    assert result["output"] == [{"type": "input_text", "text": "card [redacted] on file"}]
    assert shell["output"] == [{**SHELL, "stdout": "card [redacted]"}]
    assert "4111" not in json.dumps([user, answer, result, shell])


def test_a_copy_stored_before_is_served_as_stored(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "c.db")
    item = ITEMS[0]
    store.append_many(
        "s",
        [
            {
                "id": "u",
                "role": "user",
                "body": "My card is 4111 1111.",
                "meta": {"agents_item": json.dumps(item)},
            }
        ],
    )
    assert asyncio.run(LedgerfoldSession("s", store=store).get_items()) == [item]
