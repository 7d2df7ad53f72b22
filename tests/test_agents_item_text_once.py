"""`LedgerfoldSession` keeps a message item's text parts' text once: the turn holds it, and
the item's verbatim copy (`meta["agents_item"]`) holds each text part's length instead. A
model's reply is a list of `output_text` parts, so before, every reply's text was stored
twice and counted twice as context tokens (the copy is a meta value, which is sent): a
compaction came due at half the context the policy allows. Real SQLite files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import ITEM_KEY, LedgerfoldSession
from ledgerfold.tokens import approx_tokens, item_tokens

REPLY = "The quarterly report shows revenue growth of twelve percent in all regions. " * 20
IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"


def _reply(*texts: str, refusal: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [
        {"type": "output_text", "text": text, "annotations": []} for text in texts
    ]
    if refusal is not None:
        parts.append({"type": "refusal", "refusal": refusal})
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": parts,
    }


LOOK = {
    "role": "user",
    "content": [
        {"type": "input_text", "text": "What is on "},
        {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
        {"type": "input_text", "text": "this chart?"},
    ],
}


def _session(tmp_path: Path) -> tuple[lf.SQLiteStore, LedgerfoldSession]:
    store = lf.SQLiteStore(tmp_path / "s.db")
    return store, LedgerfoldSession("c", store=store)


def _items(store: lf.SQLiteStore, session: LedgerfoldSession) -> list[Any]:
    return store.context("c", session.compactor.policy.version).items  # type: ignore[return-value]


def test_a_reply_s_text_is_stored_and_counted_once(tmp_path: Path) -> None:
    store, session = _session(tmp_path)
    asyncio.run(session.add_items([_reply(REPLY)]))
    (turn,) = _items(store, session)
    assert turn.text == REPLY
    assert "revenue growth" not in turn.meta[ITEM_KEY]
    body = approx_tokens(REPLY)
    # The text once, plus the copy's structure and the message overhead (it was 2× + that).
    assert item_tokens(turn) - body < body // 4


def test_every_item_comes_back_as_it_came(tmp_path: Path) -> None:
    store, session = _session(tmp_path)
    items = [LOOK, _reply("A rising ", "line.", refusal="No more."), _reply("")]
    asyncio.run(session.add_items([json.loads(json.dumps(item)) for item in items]))
    assert asyncio.run(session.get_items()) == items
    texts = [turn.text for turn in _items(store, session)]
    assert texts == ["What is on this chart?", "A rising line.No more.", ""]


def test_an_edited_reply_is_served_as_edited_its_image_kept(tmp_path: Path) -> None:
    store, session = _session(tmp_path)
    asyncio.run(session.add_items([LOOK, _reply(REPLY)]))
    first, second = _items(store, session)
    store.edit("c", first.id, body="What is on this [redacted]?")
    store.edit("c", second.id, body="Growth was [redacted].")
    look, reply = asyncio.run(session.get_items())
    assert look["content"] == [
        {"type": "input_text", "text": "What is on this [redacted]?"},
        LOOK["content"][1],
    ]
    assert [part.get("text") for part in reply["content"]] == ["Growth was [redacted]."]


def test_a_copy_written_with_its_texts_reads_as_written(tmp_path: Path) -> None:
    """A copy stored before the texts were cut (or by another tool): read as it is."""
    store, session = _session(tmp_path)
    item = _reply("Kept whole.")
    store.append("c", "assistant", "Kept whole.", meta={ITEM_KEY: json.dumps(item)})
    assert asyncio.run(session.get_items()) == [item]


def test_a_copy_whose_lengths_are_not_the_text_s_reads_as_the_turn(tmp_path: Path) -> None:
    """Lengths changed outside ledgerfold (the copy is damaged): the turn is served as one
    no session wrote, from its role and text, not cut wrongly and not an error."""
    store, session = _session(tmp_path)
    asyncio.run(session.add_items([_reply("Twelve percent.")]))
    (turn,) = _items(store, session)
    copy = json.loads(turn.meta[ITEM_KEY])
    copy["content"][0]["__ledgerfold_length__"] = 3
    conn = store._connection()
    conn.execute(
        "UPDATE turns SET meta = ? WHERE id = ?",
        (json.dumps({ITEM_KEY: json.dumps(copy, sort_keys=True)}), turn.id),
    )
    store.close()
    store, session = _session(tmp_path)
    (served,) = asyncio.run(session.get_items())
    assert served["role"] == "assistant"
    assert "Twelve percent." in json.dumps(served)
