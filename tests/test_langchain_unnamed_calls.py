"""Tool calls LangChain gives no ID (`ToolCall.id` is `Optional[str]`: `None`, or `""` from
some providers; an unparsable call's `InvalidToolCall.id` too), with `create_agent`, a fake
chat model and `LedgerfoldMiddleware`: the run goes on, the ledger keeps each such call
under `unnamed_call_id(<message id>, <index>)`, a `tool_call_id=""` result LangGraph's
`ToolNode` gave it answers it, and what the model receives is a sequence a provider takes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_support import Scripted
from ledgerfold import SQLiteStore
from ledgerfold.adapters import from_langchain_messages
from ledgerfold.adapters._langchain import unnamed_call_id
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CONFIG = {"configurable": {"thread_id": "t1"}}


@tool(response_format="content_and_artifact")
def lookup(code: str) -> tuple[str, dict[str, str]]:
    """Look a reservation up."""
    return f"reservation {code}: economy", {"code": code}


def _blocks(text: str) -> list[str | dict[Any, Any]]:
    """Content as text blocks: the state's own message keeps them, the ledger's is a str."""
    return [{"type": "text", "text": text}]


def _agent(model: Scripted, store: SQLiteStore) -> tuple[Any, LedgerfoldMiddleware]:
    middleware = LedgerfoldMiddleware(store, "c")
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    return agent, middleware


def _state(agent: Any) -> list[BaseMessage]:
    return list(agent.get_state(CONFIG).values["messages"])


def _provider_takes(messages: list[BaseMessage]) -> bool:
    """What a chat provider accepts of tool calls: every call has a non-empty string ID; an
    AI message calling tools is followed by one result per call (only its results between)
    unless it is the last message; a tool message answers a call of that block."""
    waiting: set[str] | None = None
    for message in messages:
        if isinstance(message, ToolMessage):
            if waiting is None or message.tool_call_id not in waiting:
                return False
            waiting.discard(message.tool_call_id)
            continue
        if waiting:
            return False
        waiting = None
        if isinstance(message, AIMessage):
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            ids = [call.get("id") for call in calls]
            if not all(isinstance(call_id, str) and call_id for call_id in ids):
                return False
            waiting = set(ids) if ids else None  # type: ignore[arg-type]
    return True


def _as_in_state(sent: list[BaseMessage], state: list[BaseMessage]) -> bool:
    """Every message sent is the state's (content blocks and all), not the ledger's text."""
    by_id = {message.id: message for message in state}
    return all(message.content == by_id[message.id].content for message in sent)


@pytest.mark.parametrize("call_id", [None, ""])
def test_an_earlier_call_without_id_does_not_stop_the_agent(call_id: str | None) -> None:
    # A history with a call nothing answered, then the user goes on (a thread imported
    # from elsewhere, or written by another tool node).
    store = SQLiteStore()
    model = Scripted()
    agent, _ = _agent(model, store)
    call = {"name": "lookup", "args": {"code": "R1"}, "id": call_id}
    history = [
        HumanMessage(_blocks("Look up R1."), id="h1"),
        AIMessage("Looking.", tool_calls=[call], id="a1"),
        HumanMessage(_blocks("Never mind, thanks."), id="h2"),
    ]
    agent.invoke({"messages": history}, CONFIG)
    state = _state(agent)
    assert [m.id for m in state[:3]] == ["h1", "a1", "h2"] and state[3].content == "done"
    # The ledger keeps the call, under the ID derived from its message's ID and its index.
    derived = unnamed_call_id("a1", 0)
    call_turn = store.get_turns("c", ["a1"])[0]
    assert derived in (call_turn.meta or {})["tool_calls"]
    assert call_turn.group == f"tools:{derived}"
    # Unanswered and followed by a user message: the chat rule leaves it out of the input.
    (sent,) = model.inputs
    assert [m.id for m in sent] == ["h1", "h2"]
    assert _provider_takes(sent)
    assert _as_in_state(sent, state)


def test_an_unparsable_call_without_id_keeps_its_record_and_the_run_goes_on() -> None:
    # The model's call could not be parsed and its provider gave no ID: LangChain records it
    # in `invalid_tool_calls` with `id=None`; the agent ends the run (nothing to execute).
    store = SQLiteStore()
    bad = {"type": "invalid_tool_call", "id": None, "name": "lookup", "args": "{no", "error": None}
    model = Scripted(replies=[AIMessage("", invalid_tool_calls=[bad])])
    agent, _ = _agent(model, store)
    agent.invoke({"messages": [HumanMessage(_blocks("Look up R1."))]}, CONFIG)
    agent.invoke({"messages": [HumanMessage(_blocks("Well?"))]}, CONFIG)
    state = _state(agent)
    assert [m.type for m in state] == ["human", "ai", "human", "ai"]
    # The unparsable call is in the ledger with its raw text, under the derived ID.
    call_turn = store.get_turns("c", [state[1].id])[0]
    assert '"{no"' in (call_turn.meta or {})["tool_calls"]
    assert unnamed_call_id(str(state[1].id), 0) in (call_turn.meta or {})["tool_calls"]
    sent = model.inputs[-1]
    assert [m.id for m in sent] == [state[0].id, state[2].id]
    assert _provider_takes(sent)
    assert _as_in_state(sent, state)


def test_a_call_with_an_empty_id_is_answered_by_its_tool_node_result() -> None:
    # Some providers send `"id": ""`; LangGraph's ToolNode runs the call and answers it with
    # `tool_call_id=""`. The model must see the call with its result, or it calls again.
    store = SQLiteStore()
    call = {"name": "lookup", "args": {"code": "R1"}, "id": ""}
    thinking = {"type": "thinking", "thinking": "plan", "signature": "SIG"}
    reply = AIMessage([thinking, *_blocks("Looking.")], tool_calls=[call])
    model = Scripted(replies=[reply])
    agent, middleware = _agent(model, store)
    agent.invoke({"messages": [HumanMessage(_blocks("Look up R1."))]}, CONFIG)
    state = _state(agent)
    assert [m.type for m in state] == ["human", "ai", "tool", "ai"]
    assert state[-1].content == "done"
    derived = unnamed_call_id(str(state[1].id), 0)
    call_turn, result_turn = store.get_turns("c", [state[1].id, state[2].id])
    assert derived in (call_turn.meta or {})["tool_calls"]
    assert (result_turn.meta or {})["tool_call_id"] == derived
    assert call_turn.group == result_turn.group == f"tools:{derived}"
    human, ai, result = model.inputs[-1]
    assert _provider_takes([human, ai, result])
    assert [c["id"] for c in ai.tool_calls] == [derived] and result.tool_call_id == derived
    # The state's messages, carrying the ledger's call ID only (thinking block, artifact).
    assert _as_in_state([human, ai, result], state)
    assert ai.tool_calls[0]["args"] == {"code": "R1"}
    assert result.artifact == {"code": "R1"}
    # Next turn: the same, and nothing is appended twice.
    agent.invoke({"messages": [{"role": "user", "content": "Thanks."}]}, CONFIG)
    assert _provider_takes(model.inputs[-1])
    assert len(store.load("c").turns) == 6  # each run's final reply at its end
    assert middleware.append_new(_state(agent)) == 0  # the last reply is in already


def test_a_result_answers_a_call_without_id_appended_in_an_earlier_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    call = {"name": "lookup", "args": {"code": "R1"}, "id": ""}
    state: list[BaseMessage] = [
        HumanMessage("Look up R1.", id="h1"),
        AIMessage("", tool_calls=[call, {**call, "args": {"code": "R2"}}], id="a1"),
    ]
    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c")
    assert middleware.append_new(state) == 2
    state += [
        ToolMessage("economy", tool_call_id="", id="t1", status="error"),
        ToolMessage("business", tool_call_id="", id="t2"),
    ]
    assert middleware.append_new(state) == 2
    first, second = unnamed_call_id("a1", 0), unnamed_call_id("a1", 1)
    answered = [(t.meta or {})["tool_call_id"] for t in store.get_turns("c", ["t1", "t2"])]
    assert answered == [first, second]  # in order, as ToolNode returns them
    groups = {turn.group for turn in store.get_turns("c", ["a1", "t1", "t2"])}
    assert groups == {f"tools:{first}"}  # one unit: compaction keeps them together
    sent = middleware.model_messages()
    assert _provider_takes(sent)
    assert [m.tool_call_id for m in sent[2:]] == [first, second]
    assert sent[2].status == "error"  # the state's message, with the ledger's call ID
    # Another instance over the same ledger reads the state alike: nothing changed, nothing
    # new, nothing logged.
    with caplog.at_level(logging.WARNING, logger="ledgerfold.integrations.langchain"):
        other = LedgerfoldMiddleware(store, "c")
        assert other.append_new(state) == 0
    assert "changed" not in caplog.text
    assert _provider_takes(other.model_messages())


def test_a_result_naming_no_call_is_kept_and_left_out_of_the_input() -> None:
    store = SQLiteStore()
    model = Scripted()
    agent, _ = _agent(model, store)
    history = [
        HumanMessage(_blocks("Look up R1."), id="h1"),
        ToolMessage("economy", tool_call_id="call-gone", id="t1"),
        HumanMessage(_blocks("Well?"), id="h2"),
    ]
    state = agent.invoke({"messages": history}, CONFIG)["messages"]
    assert [turn.id for turn in store.load("c").turns] == ["h1", "t1", "h2", state[-1].id]
    (sent,) = model.inputs
    assert [m.id for m in sent] == ["h1", "h2"]
    assert _as_in_state(sent, _state(agent))


@pytest.mark.parametrize("call_id", [None, ""])
def test_the_adapter_converts_calls_without_id(call_id: str | None) -> None:
    call = {"name": "f", "args": {}, "id": call_id}
    bad = {"type": "invalid_tool_call", "id": call_id, "name": "g", "args": "{no", "error": None}
    turns = from_langchain_messages(
        [
            AIMessage(
                "", tool_calls=[call, {**call, "id": "c2"}], invalid_tool_calls=[bad], id="a1"
            ),
            ToolMessage("r", tool_call_id="", id="t1"),
            ToolMessage("r2", tool_call_id="c2", id="t2"),
            HumanMessage("next", id="h1"),
            ToolMessage("orphan", tool_call_id="", id="t3"),  # after no call: answers none
        ]
    )
    ids = [unnamed_call_id("a1", 0), "c2", unnamed_call_id("a1", 2)]
    assert all(call_id in (turns[0].meta or {})["tool_calls"] for call_id in ids)
    answered = [(t.meta or {}).get("tool_call_id") for t in turns[1:]]
    assert answered == [ids[0], "c2", None, None]
    # Without a message ID, a message is known by its place in the list.
    (turn,) = from_langchain_messages([AIMessage("", tool_calls=[call])])
    assert unnamed_call_id("#0", 0) in (turn.meta or {})["tool_calls"]
