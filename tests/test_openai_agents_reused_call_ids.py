"""A model that numbers its calls per response (`call_0` in every response, as some local
OpenAI-compatible servers do) through `LedgerfoldSession`: each exchange is its own
compaction unit (SPEC §17.2: a result answers the nearest call of its ID before it), so
compaction summarises the older ones and the context stays bounded, the summary first. The
items are stored and served as the SDK's `SQLiteSession` stores and serves them; the SDK
itself refuses a call ID reused within one run and merges the items of one `call_id` in the
model's input (docs/integrations.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, SQLiteSession, function_tool
from agents.exceptions import ModelBehaviorError
from agents.testing.model import ModelStep, ScriptedModel
from openai.types.responses import ResponseFunctionToolCall

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

POLICY = lf.CompactionPolicy("p", keep_tail=2, trigger_tokens=60, min_new_turns=1)
NEVER = lf.CompactionPolicy("never-due", keep_tail=8, trigger_tokens=10**9)


def _exchange(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n} " + "w " * 20},
        {"type": "function_call", "call_id": "call_0", "name": "look", "arguments": f'{{"n":{n}}}'},
        {"type": "function_call_output", "call_id": "call_0", "output": f"result {n} " + "w " * 20},
        {"role": "assistant", "content": f"answer {n} " + "w " * 20},
    ]


def test_each_exchange_of_a_reused_call_id_is_its_own_unit(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store, policy=POLICY)

    async def scenario() -> None:
        for n in range(6):
            await session.add_items(_exchange(n))
            outcome = await session.wait_compaction()
            assert outcome is not None and outcome.status == "accepted"
            served = await session.get_items()
            # The summary first, then the latest exchange's call, result and answer.
            assert served[0]["role"] == "system"
            assert served[1:] == _exchange(n)[1:]

    asyncio.run(scenario())
    turns = store.load("s").turns
    calls = [turn for turn in turns if turn.meta and "tool_calls" in turn.meta]
    results = [turn for turn in turns if turn.role == "tool"]
    assert len({turn.group for turn in calls}) == len(calls) == 6
    assert [turn.group for turn in results] == [turn.group for turn in calls]
    store.close()


def test_a_later_result_joins_the_nearest_call_of_its_id(tmp_path: Path) -> None:
    """Each call and its result in separate `add_items` calls (a result arriving later)."""
    store = lf.SQLiteStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store, policy=NEVER)
    first, second = _exchange(1), _exchange(2)

    async def scenario() -> None:
        for item in (*first[:3], *second[:3]):
            await session.add_items([item])
        assert await session.get_items() == [*first[:3], *second[:3]]

    asyncio.run(scenario())
    _, call_1, result_1, _, call_2, result_2 = store.load("s").turns
    assert result_1.group == call_1.group != call_2.group == result_2.group
    store.close()


@function_tool
def look(n: int) -> str:
    """Look the number up."""
    return f"found {n}"


def _call(n: int) -> ResponseFunctionToolCall:
    arguments = json.dumps({"n": n})
    return ResponseFunctionToolCall(
        type="function_call", call_id="call_0", name="look", arguments=arguments
    )


def test_the_sdk_serves_reused_call_ids_as_its_sqlite_session_does(tmp_path: Path) -> None:
    """One call per run, `call_0` each time: the runs pass, and before any compaction the
    session serves what `SQLiteSession` serves (the SDK then merges the items of one
    `call_id` in the model's input, for either session). Two calls of one ID in one run
    are the SDK's `ModelBehaviorError`."""
    ours = LedgerfoldSession("s", tmp_path / "ledger.db", policy=NEVER)
    reference = SQLiteSession("s", str(tmp_path / "sdk.db"))

    async def runs(session: Any) -> list[Any]:
        for n in range(3):
            model = ScriptedModel([ModelStep(output=[_call(n)]), ModelStep(output=[])])
            await Runner.run(Agent(name="a", model=model, tools=[look]), f"q{n}", session=session)
        return list(await session.get_items())

    try:
        assert asyncio.run(runs(ours)) == asyncio.run(runs(reference))
        twice = ScriptedModel([ModelStep(output=[_call(1)]), ModelStep(output=[_call(2)])])
        with pytest.raises(ModelBehaviorError):
            asyncio.run(Runner.run(Agent(name="a", model=twice, tools=[look]), "q", session=ours))
    finally:
        ours.close()
        reference.close()
