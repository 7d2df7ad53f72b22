"""`LedgerfoldSession.pop_item` takes the item `get_items` serves last, never one it leaves
out: the SDK's rewind (`agents.run_internal.session_persistence.rewind_session_items`) reads
the last `n` items with `get_items(limit=n)`, then pops `n` items and compares each with
them, restoring what it popped at the first mismatch. A reasoning item that no item the
model wrote follows (a run that stopped after it) goes with the item before it; a result
served before a user message (it came after) stays."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner
from agents.run_internal.session_persistence import rewind_session_items
from agents.testing.model import ModelStep, ScriptedModel
from openai.types.responses import ResponseOutputMessage, ResponseOutputText, ResponseReasoningItem

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

SECRET = "okapithought31"


def _reasoning(text: str = "") -> ResponseReasoningItem:
    summary: Any = [{"type": "summary_text", "text": text}] if text else []
    return ResponseReasoningItem(id="rs_1", type="reasoning", summary=summary)


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


async def _stopped_at_reasoning(session: LedgerfoldSession, text: str = "") -> None:
    """A run whose model answered with a reasoning item alone: the SDK ends it (final output
    '') and stores the user's message and that reasoning item, which `get_items` leaves out
    (the API refuses a reasoning item without its following item)."""
    model = ScriptedModel([ModelStep(output=[_reasoning(text)])])
    result = await Runner.run(Agent(name="a", model=model), "hi", session=session)
    assert result.final_output == ""


def test_pop_item_after_a_run_stopped_at_a_reasoning_item(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store)

    async def scenario() -> None:
        await _stopped_at_reasoning(session)
        assert [turn.role for turn in store.load("s").turns] == ["user", "assistant"]
        served = await session.get_items()
        assert served == [{"role": "user", "content": "hi"}]
        assert await session.pop_item() == served[-1]
        assert await session.get_items() == []
        # The reasoning item went with it: no live turn is left for a later item to revive.
        assert store.load("s").turns == ()
        assert await session.pop_item() is None

    asyncio.run(scenario())
    store.close()


def test_the_sdks_rewind_takes_the_items_get_items_serves_last(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store)

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": "before"}])
        await _stopped_at_reasoning(session)
        await rewind_session_items(session, [{"role": "user", "content": "hi"}])
        assert await session.get_items() == [{"role": "user", "content": "before"}]
        assert [turn.role for turn in store.load("s").turns] == ["user"]

    asyncio.run(scenario())
    store.close()


def test_pop_item_after_a_reasoning_answer_pops_what_get_items_served(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store)

    async def scenario() -> None:
        model = ScriptedModel([ModelStep(output=[_reasoning(), _message("Paris.")])])
        await Runner.run(Agent(name="a", model=model), "Capital of France?", session=session)
        kinds = [item.get("type") for item in await session.get_items()]
        assert kinds[1:] == ["reasoning", "message"]
        popped = await session.pop_item()
        assert popped is not None and popped["type"] == "message"
        served = await session.get_items()
        assert served == [{"role": "user", "content": "Capital of France?"}]
        # The next pop is the item served last, not the reasoning item nothing follows.
        assert await session.pop_item() == served[-1]
        assert await session.get_items() == []
        assert await session.pop_item() is None

    asyncio.run(scenario())
    store.close()


def test_pop_item_takes_a_message_served_after_a_later_result(tmp_path: Path) -> None:
    """A result that came after a user message is served before it (SPEC §17.2): the message
    is the item served last, so it is what `pop_item` takes; the result stays."""
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store)
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    result = {"type": "function_call_output", "call_id": "c1", "output": "done"}
    interjection = {"role": "user", "content": "still there?"}

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": "go"}, call])
        await session.add_items([interjection])
        await session.add_items([result])
        assert (await session.get_items())[-3:] == [call, result, interjection]
        assert await session.pop_item() == interjection
        assert (await session.get_items())[-2:] == [call, result]
        assert await session.pop_item() == result

    asyncio.run(scenario())
    store.close()


def test_pop_item_with_erase_erases_the_reasoning_item_taken_with_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = lf.SQLiteStore(path)
    session = LedgerfoldSession("s", store=store)

    async def scenario() -> None:
        await _stopped_at_reasoning(session, f"the user's pin is {SECRET}")
        assert await session.pop_item(erase=True) == {"role": "user", "content": "hi"}

    asyncio.run(scenario())
    assert store.search("s", SECRET, scope="all") == []
    store.close()
    assert not any(
        file.exists() and SECRET.encode() in file.read_bytes()
        for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
    )
