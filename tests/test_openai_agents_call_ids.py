"""`LedgerfoldSession.add_items` refuses a call or result item without its `call_id`, as it
refuses a `function_call` without one: `InvalidInput` naming `items[i].call_id`, and none of
the batch is stored. The SDK writes a `call_id` on every call and result it makes (its
Responses types require one); without it a `function_call_output` was stored and never
served (no call is paired with it), and a `custom_tool_call` lost its input."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

WITHOUT_CALL_ID = [
    {"type": "function_call_output", "output": "found"},
    {"type": "custom_tool_call", "name": "patch", "input": "diff"},
    {"type": "custom_tool_call_output", "output": "applied"},
    {"type": "computer_call_output", "output": {"type": "input_image"}},
    {"type": "program_output", "output": "1"},
]


@pytest.mark.parametrize("item", WITHOUT_CALL_ID, ids=lambda item: item["type"])
def test_a_call_or_result_without_call_id_is_refused(tmp_path: Path, item: Any) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store)

    async def scenario() -> None:
        with pytest.raises(lf.InvalidInput) as raised:
            await session.add_items([{"role": "user", "content": "look"}, item])
        assert raised.value.field == "items[1].call_id"
        assert raised.value.problem == "wrong-type"
        assert await session.get_items() == []  # none of the batch

    asyncio.run(scenario())
    assert store.load("s").turns == ()
    store.close()


@pytest.mark.parametrize(
    ("call_id", "problem"), [("", "empty"), (7, "wrong-type"), (None, "wrong-type")]
)
def test_a_results_call_id_must_be_a_non_empty_str(
    tmp_path: Path, call_id: Any, problem: str
) -> None:
    session = LedgerfoldSession("s", tmp_path / "s.db")
    item = {"type": "custom_tool_call_output", "call_id": call_id, "output": "applied"}
    with pytest.raises(lf.InvalidInput) as raised:
        asyncio.run(session.add_items([item]))
    assert (raised.value.field, raised.value.problem) == ("items[0].call_id", problem)
    session.close()
