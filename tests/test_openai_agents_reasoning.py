"""`LedgerfoldSession` never serves a `reasoning` item without the item it led to (the
Responses API refuses one: "Item 'rs_…' of type 'reasoning' was provided without its
required following item"). `pop_item` takes the newest item, which may be the message or call
a reasoning item came with: the reasoning item stays in the ledger but is left out of
`get_items`, as a result whose call is not served is (SPEC §17.2), and the next
`Runner.run` is one the API takes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, Usage, set_tracing_disabled
from openai.types.responses import (
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from ledgerfold import SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession

set_tracing_disabled(True)


def _reasoning(n: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "opaque"}


def _answer(n: int) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{n}",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
    }


def _lone_reasoning(items: list[dict[str, Any]]) -> list[int]:
    """Where a reasoning item is not followed by an item the model wrote (the API's rule)."""
    lone = []
    for at, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        after = items[at + 1] if at + 1 < len(items) else None
        if (
            after is None
            or after.get("role") in ("user", "system", "developer")
            or str(after.get("type", "")).endswith("output")
        ):
            lone.append(at)
    return lone


def test_a_reasoning_item_whose_answer_was_popped_is_not_served(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        session = LedgerfoldSession("s", store=store)
        user = {"role": "user", "content": "What is 2+2?"}

        async def scenario() -> list[Any]:
            await session.add_items([user, _reasoning(1), _answer(1)])
            assert await session.pop_item() == _answer(1)
            return await session.get_items()

        assert asyncio.run(scenario()) == [user]
        assert len(store.load("s").turns) == 2  # the ledger keeps the reasoning item
        # Items of a response stay as they came: reasoning before its call or message.
        again = {"role": "user", "content": "Sorry: what is 3+3?"}
        asyncio.run(session.add_items([again, _reasoning(2), _reasoning(3), _answer(3)]))
        served = [user, again, _reasoning(2), _reasoning(3), _answer(3)]
        assert asyncio.run(session.get_items()) == served


class _ReasoningModel(Model):
    """Answers every input with a reasoning item and a message; records each input."""

    def __init__(self) -> None:
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        self.inputs.append([dict(item) for item in input] if isinstance(input, list) else [])
        n = len(self.inputs)
        reasoning = ResponseReasoningItem(id=f"rs_{n}", summary=[], type="reasoning")
        text = ResponseOutputText(annotations=[], text=f"answer {n}", type="output_text")
        message = ResponseOutputMessage(
            id=f"msg_{n}", content=[text], role="assistant", status="completed", type="message"
        )
        return ModelResponse(output=[reasoning, message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_runner_after_popping_a_reasoning_models_answer(tmp_path: Path) -> None:
    """The SDK's "correct the last answer" pattern: pop the answer, ask again."""
    model = _ReasoningModel()
    agent = Agent(name="agent", instructions="Be brief.", model=model)
    with SQLiteStore(tmp_path / "s.db") as store:
        session = LedgerfoldSession("s", store=store)

        async def scenario() -> None:
            await Runner.run(agent, "What is 2+2?", session=session)
            assert (await session.pop_item() or {}).get("type") == "message"
            await Runner.run(agent, "Sorry: what is 3+3?", session=session)

        asyncio.run(scenario())
        assert [_lone_reasoning(items) for items in model.inputs] == [[], []]
        assert [item.get("content") for item in model.inputs[1]] == [
            "What is 2+2?",
            "Sorry: what is 3+3?",
        ]
