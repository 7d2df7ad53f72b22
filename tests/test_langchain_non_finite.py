"""NaN and ±Infinity in LangChain messages (SPEC §15.6, §15.8): not JSON, so the converters
and the middleware refuse them with `InvalidInput` naming the field, and append nothing, as
`LedgerfoldSession.add_items` refuses them in an item. Stored as they were, LangChain writes
them as `NaN` into a call's `arguments` in every later request, which providers refuse."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from langchain_support import Scripted
from ledgerfold import InvalidInput, SQLiteStore, to_chat_messages
from ledgerfold.adapters import from_langchain_messages, to_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

NAN, INF = float("nan"), float("inf")


def _call(args: dict[str, Any], call_id: str = "c1") -> dict[str, Any]:
    return {"name": "search", "args": args, "id": call_id}


def _state(args: dict[str, Any]) -> list[BaseMessage]:
    return [
        HumanMessage("Find flights under the limit.", id="u1"),
        HumanMessage("Any airline.", id="u2"),
        AIMessage("", id="a1", tool_calls=[_call(args)]),
        ToolMessage("no flights", tool_call_id="c1", id="t1"),
    ]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"limit": NAN}, "messages[2].tool_calls[0].args.limit"),
        ({"range": [1.0, INF]}, "messages[2].tool_calls[0].args.range[1]"),
        ({"filters": {"min": -INF}}, "messages[2].tool_calls[0].args.filters.min"),
    ],
)
def test_from_langchain_messages_refuses_non_finite_arguments(
    args: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        from_langchain_messages(_state(args))
    assert caught.value.field == field
    assert caught.value.problem == "not-allowed"


def test_non_finite_content_is_refused() -> None:
    # A JSON content block and an Anthropic tool_use block: both stored (as text, as a call).
    blocks: list[Any] = [
        [{"type": "json", "json": {"score": NAN}}],
        [{"type": "tool_use", "id": "c9", "name": "search", "input": {"limit": INF}}],
    ]
    fields = ["messages[0].content[0].json.score", "messages[0].content[0].input.limit"]
    for content, field in zip(blocks, fields, strict=True):
        with pytest.raises(InvalidInput) as caught:
            from_langchain_messages([AIMessage(content, id="a1")])
        assert caught.value.field == field


def test_append_new_refuses_and_appends_nothing_of_the_batch() -> None:
    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c")
    state = _state({"limit": NAN})
    assert middleware.append_new(state[:1]) == 1
    with pytest.raises(InvalidInput) as caught:
        middleware.append_new(state)
    # Named by its place in the state (not among the new messages), no text in the error.
    assert caught.value.field == "messages[2].tool_calls[0].args.limit"
    assert "Any airline" not in str(caught.value)
    assert [turn.id for turn in store.load("c").turns] == ["u1"]  # not u2 either
    # Nothing about the refused batch is remembered: fixed, it is appended whole.
    fixed = [*state[:2], AIMessage("", id="a1", tool_calls=[_call({"limit": 500})]), state[3]]
    assert middleware.append_new(fixed) == 3
    messages = to_chat_messages(middleware.compactor.context("c"))
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"limit": 500}


@tool
def search(limit: float) -> str:
    """Search flights."""
    return "no flights" if math.isnan(limit) else "two flights"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_agent_whose_model_calls_with_nan_gets_invalid_input(asynchronous: bool) -> None:
    store = SQLiteStore()
    # Calls `search` with NaN in its arguments (as a model's JSON `NaN` parses), then answers.
    nan_call = AIMessage("", tool_calls=[_call(json.loads('{"limit": NaN}'))])
    model = Scripted(replies=[nan_call, AIMessage("Done.")])
    agent = create_agent(model, tools=[search], middleware=[LedgerfoldMiddleware(store, "c")])
    state = {"messages": [{"role": "user", "content": "Find flights."}]}

    def run() -> object:
        return asyncio.run(agent.ainvoke(state)) if asynchronous else agent.invoke(state)

    with pytest.raises(InvalidInput) as caught:
        run()
    assert caught.value.field == "messages[1].tool_calls[0].args.limit"
    assert len(model.inputs) == 1  # the second model call never went out
    assert [turn.role for turn in store.load("c").turns] == ["user"]


def test_a_call_stored_with_nan_is_served_as_an_invalid_call() -> None:
    """A call stored before NaN was refused (its arguments text holds `NaN`): LangChain would
    parse it back to a float NaN and write `NaN` into the next request; it comes back as an
    invalid tool call with its raw text, as a call LangChain cannot parse does. And a
    middleware meeting that message in the state leaves it be (the ledger is the record)."""
    store = SQLiteStore()
    arguments = '{"limit": NaN}'
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": arguments}}
    ]
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "Find flights.", "id": "u1"},
            {"role": "assistant", "content": "", "tool_calls": calls, "id": "a1"},
            {"role": "tool", "content": "no flights", "tool_call_id": "c1", "id": "t1"},
        ],
    )
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    state = [
        HumanMessage("Find flights.", id="u1"),
        AIMessage("", id="a1", tool_calls=[_call({"limit": NAN})]),
        ToolMessage("no flights", tool_call_id="c1", id="t1"),
        HumanMessage("And tomorrow?", id="u2"),
    ]
    assert middleware.append_new(state) == 1
    for messages in (
        to_langchain_messages(middleware.compactor.context("c")),
        middleware.model_messages(),
    ):
        call = messages[1]
        assert call.tool_calls == []
        assert [(c["id"], c["args"]) for c in call.invalid_tool_calls] == [("c1", arguments)]
