"""`LedgerfoldSession` under a real `agents.Runner.run` with a fake `Model` (no network)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import (
    Agent,
    Model,
    ModelResponse,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession

# No network: traces are never exported.
set_tracing_disabled(True)


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        content=[ResponseOutputText(annotations=[], text=text, type="output_text")],
        role="assistant",
        status="completed",
        type="message",
    )


class ScriptedModel(Model):
    """Each user turn: first call a tool, then answer; records every input it was given."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []
        self.calls = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        items = [dict(item) for item in input] if isinstance(input, list) else []
        self.inputs.append(items)
        self.calls += 1
        last = items[-1] if items else {}
        if last.get("type") == "function_call_output":
            output: Any = _message(f"Done: {last['output']}")
        else:
            output = ResponseFunctionToolCall(
                arguments=json.dumps({"code": f"R{self.calls}"}),
                call_id=f"call-{self.calls}",
                name="lookup",
                type="function_call",
                id=f"fc-{self.calls}",
                status="completed",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@function_tool
def lookup(code: str) -> str:
    """Look a reservation up."""
    return f"reservation {code}: economy, 2 bags"


def test_runner_over_a_compacting_session() -> None:
    model = ScriptedModel()
    agent = Agent(name="agent", instructions="Help.", model=model, tools=[lookup])
    policy = CompactionPolicy("v1", keep_tail=3, trigger_tokens=120, min_new_turns=2)
    session = LedgerfoldSession("s1", policy=policy)
    assert isinstance(session, Session)

    async def run_all() -> None:
        await Runner.run(agent, "Never pay with the Visa card. Look up R1.", session=session)
        for turn in range(2, 7):
            await Runner.run(agent, f"Now look up booking number {turn}.", session=session)

    asyncio.run(run_all())
    store = session.store
    summary = store.current_summary("s1")
    assert summary is not None
    # The constraint from the first turn is in the summary the model now sees.
    last_input = model.inputs[-1]
    assert last_input[0]["role"] == "system"
    assert "<ledgerfold-summary>" in last_input[0]["content"]
    assert "Visa" in last_input[0]["content"]
    # Every tool output the model sees comes with its call.
    for items in model.inputs:
        seen = {item["call_id"] for item in items if item.get("type") == "function_call"}
        for item in items:
            if item.get("type") == "function_call_output":
                assert item["call_id"] in seen
    # Calls and outputs share a group in the ledger, named after the call and its turn.
    turns = store.load("s1").turns
    groups = {turn.meta["tool_call_id"]: turn.group for turn in turns if turn.role == "tool"}
    for turn in turns:
        if turn.meta and "tool_calls" in turn.meta:
            (call,) = json.loads(turn.meta["tool_calls"])
            assert groups[call["id"]] == turn.group == f"tools:{call['id']}@{turn.id}"
    # get_items(limit) is the tail of the context, items as they came.
    tail = asyncio.run(session.get_items(2))
    assert tail == asyncio.run(session.get_items())[-2:]
    assert tail[-1]["role"] == "assistant"


def test_items_come_back_as_they_came_and_pop_and_clear() -> None:
    store = SQLiteStore()
    session = LedgerfoldSession("s", store=store)
    items: list[Any] = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc"},
        {"type": "mystery_call", "payload": {"x": [1, 2]}},
    ]

    async def scenario() -> None:
        await session.add_items(items)
        await session.add_items([{"type": "function_call_output", "call_id": "c1", "output": "ok"}])
        assert await session.get_items() == [
            *items,
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ]
        turns = store.load("s").turns
        assert turns[0].role == "system" and turns[1].body == "hi" and turns[2].body == "t"
        assert turns[5].group == turns[3].group == f"tools:c1@{turns[3].id}"  # a later add
        popped = await session.pop_item()
        assert popped == {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        assert await session.pop_item() == items[-1]
        assert len(await session.get_items()) == 4
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None

    asyncio.run(scenario())


def test_an_items_text_is_stored_once() -> None:
    from ledgerfold.tokens import approx_tokens, item_tokens

    session = LedgerfoldSession("s")
    text = "word " * 800  # 4000 characters, about 1000 tokens
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": text, "id": "x"}
    items: list[Any] = [
        {"role": "user", "content": text, "type": "message"},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": text},
    ]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    for item in session.context().items:
        # The text once (plus the item's few other fields), not twice.
        assert item_tokens(item) < approx_tokens(text) * 1.2
    assert asyncio.run(session.pop_item()) == items[-1]
    assert asyncio.run(session.pop_item()) == call
