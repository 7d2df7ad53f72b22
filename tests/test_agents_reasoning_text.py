"""A reasoning item in `LedgerfoldSession`: its turn's text is its summary's, else (an
open-weight model's, whose summary is empty) its `reasoning_text` content's, so the
summarizer and `recall_history` see what the model thought instead of an empty turn. That
text is kept once (as the turn's: the copy keeps each part's length), and the item comes
back as it came (an edited turn as edited). Its `encrypted_content` is opaque: not counted
as context tokens. A real `Runner.run` with a fake model, real SQLite files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from openai.types.responses import ResponseOutputMessage, ResponseOutputText, ResponseReasoningItem
from openai.types.responses.response_reasoning_item import Content

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import ITEM_KEY, LedgerfoldSession
from ledgerfold.tokens import approx_tokens, item_tokens

set_tracing_disabled(True)

THOUGHT = "The user asks for the Geneva locker code; the note from March says it is 5100."
SECRET = "gAAAAB" + "q" * 6000  # what the API returns as encrypted_content: opaque


class _ThinkingModel(Model):
    """An open-weight model: a reasoning item with `reasoning_text` content and no summary."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        reasoning = ResponseReasoningItem(
            id="rs_1",
            summary=[],
            type="reasoning",
            content=[Content(type="reasoning_text", text=THOUGHT)],
            encrypted_content=SECRET,
        )
        text = ResponseOutputText(annotations=[], text="It is 5100.", type="output_text")
        message = ResponseOutputMessage(
            id="msg_1", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[reasoning, message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def _reasoning(**fields: Any) -> dict[str, Any]:
    return {"type": "reasoning", "id": "rs_1", "summary": [], **fields}


def _answer() -> dict[str, Any]:
    text = {"type": "output_text", "text": "It is 5100.", "annotations": []}
    return {"type": "message", "role": "assistant", "id": "m", "content": [text]}


def test_an_open_weight_models_reasoning_text_is_the_turns_text(tmp_path: Path) -> None:
    agent = Agent(name="a", instructions="Be brief.", model=_ThinkingModel())
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        session = LedgerfoldSession("s", store=store)
        asyncio.run(Runner.run(agent, "What is my locker code?", session=session))
        _, reasoning, answer = store.load("s").turns
        assert reasoning.body == THOUGHT and answer.body == "It is 5100."
        (hit,) = store.search("s", "note from March", scope="all")
        assert hit.turn_id == reasoning.id
        request = lf.SummaryRequest("s", "p", "v1", store.context("s", "v1").items, None)
        assert f"[seq 2 assistant] {THOUGHT}" in lf.ExtractiveSummarizer()(request)
        # Served back as the SDK stored it.
        (served,) = [item for item in asyncio.run(session.get_items()) if item.get("id") == "rs_1"]
        assert served["content"] == [{"type": "reasoning_text", "text": THOUGHT}]
        assert served["encrypted_content"] == SECRET and served["summary"] == []


def test_the_text_is_counted_once_and_the_encrypted_content_not_at_all() -> None:
    def tokens(item: dict[str, Any], text: str) -> int:
        store = lf.SQLiteStore()
        session = LedgerfoldSession("s", store=store)
        asyncio.run(session.add_items([{"role": "user", "content": "?"}, item, _answer()]))
        (turn,) = [t for t in store.context("s", "v1").items if t.text == text]
        return item_tokens(turn)

    def content(text: str) -> list[dict[str, str]]:
        return [{"type": "reasoning_text", "text": text}]

    # 6,000 characters of it count as one: the key's name only.
    assert tokens(_reasoning(content=content(THOUGHT), encrypted_content=SECRET), THOUGHT) == (
        tokens(_reasoning(content=content(THOUGHT), encrypted_content="g"), THOUGHT)
    )
    # The text once (the turn's; the copy holds its length): 20 times the text, 19 times its
    # tokens more (and a digit of its length).
    long = THOUGHT * 20
    extra = approx_tokens(long) - approx_tokens(THOUGHT)
    for field, part in (("content", "reasoning_text"), ("summary", "summary_text")):
        short_item = _reasoning(**{field: [{"type": part, "text": THOUGHT}]})
        long_item = _reasoning(**{field: [{"type": part, "text": long}]})
        grown = tokens(long_item, long) - tokens(short_item, THOUGHT)
        assert extra <= grown <= extra + 1, field


def test_items_come_back_as_they_came_and_an_edit_as_edited(tmp_path: Path) -> None:
    both = _reasoning(
        summary=[{"type": "summary_text", "text": "Looked up the code."}],
        content=[{"type": "reasoning_text", "text": THOUGHT}],
        encrypted_content=SECRET,
    )
    split = _reasoning(
        id="rs_2",
        content=[
            {"type": "reasoning_text", "text": "First, "},
            {"type": "reasoning_text", "text": "then."},
        ],
    )
    with lf.SQLiteStore(tmp_path / "b.db") as store:
        session = LedgerfoldSession("s", store=store)
        items = [{"role": "user", "content": "?"}, both, _answer(), split, _answer() | {"id": "n"}]
        asyncio.run(session.add_items(items))
        turns = store.load("s").turns
        assert [turns[1].body, turns[3].body] == ["Looked up the code.", "First, then."]
        assert asyncio.run(session.get_items()) == items
        # A redaction of the reasoning turn is what goes back.
        store.edit("s", turns[3].id, body="[redacted]")
        served = asyncio.run(session.get_items())[3]
        assert served["content"] == [{"type": "reasoning_text", "text": "[redacted]"}]
        store.edit("s", turns[1].id, body="Looked it up.")
        served = asyncio.run(session.get_items())[1]
        assert served["summary"] == [{"type": "summary_text", "text": "Looked it up."}]
        assert served["content"] == both["content"]


def test_a_copy_stored_before_is_served_as_stored(tmp_path: Path) -> None:
    item = _reasoning(content=[{"type": "reasoning_text", "text": THOUGHT}])
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        old = {ITEM_KEY: json.dumps(item, sort_keys=True)}  # an earlier version's: body ""
        store.append_many(
            "s",
            [
                {"id": "u", "role": "user", "body": "?"},
                {"id": "r", "role": "assistant", "body": "", "meta": old},
                {"id": "a", "role": "assistant", "body": "It is 5100."},
            ],
        )
        served = asyncio.run(LedgerfoldSession("s", store=store).get_items())
        assert served[1] == item
