"""`LedgerfoldMiddleware` across LangGraph threads and with rich message content: with
`conversation_id=None` each thread is its own conversation (one agent serves many users
apart); the model sees a raw turn as the state holds it (image parts, thinking blocks, a
tool result's status) while the state says what the ledger holds, else as the ledger does."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_support import Scripted
from ledgerfold import InvalidInput, SQLiteStore
from ledgerfold.integrations.langchain import LedgerfoldMiddleware


def _send(agent: Any, message: BaseMessage, thread: str = "t") -> None:
    agent.invoke({"messages": [message]}, {"configurable": {"thread_id": thread}})


def _say(agent: Any, thread: str, text: str) -> None:
    _send(agent, HumanMessage(text), thread)


def _texts(messages: list[BaseMessage]) -> list[Any]:
    return [message.content for message in messages]


def test_without_a_conversation_id_each_thread_is_its_own_conversation() -> None:
    store = SQLiteStore()
    model = Scripted(default="noted")
    middleware = LedgerfoldMiddleware(store)
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    _say(agent, "alice", "Alice here, my card PIN is 4821")
    _say(agent, "bob", "Bob here, hello")
    _say(agent, "alice", "What did I say?")
    assert _texts(model.inputs[1]) == ["Bob here, hello"]
    assert _texts(model.inputs[2]) == [
        "Alice here, my card PIN is 4821",
        "noted",
        "What did I say?",
    ]
    assert store.conversation_ids() == ["alice", "bob"]
    assert [hit.turn_id for hit in store.search("bob", "PIN", scope="all")] == []


def test_a_fixed_conversation_serving_two_threads_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = create_agent(
        Scripted(default="noted"),
        tools=[],
        middleware=[LedgerfoldMiddleware(SQLiteStore(), "shared")],
        checkpointer=InMemorySaver(),
    )
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        for thread in ("alice", "bob", "carol", "bob"):
            _say(agent, thread, f"hello from {thread}")
    warned = [r.getMessage() for r in caplog.records if "several LangGraph threads" in r.message]
    assert len(warned) == 1 and "thread_id=bob" in warned[0]
    assert "hello" not in warned[0]


def test_without_a_conversation_id_a_call_outside_a_run_is_refused() -> None:
    middleware = LedgerfoldMiddleware(SQLiteStore())
    with pytest.raises(InvalidInput) as raised:
        middleware.append_new([HumanMessage("hi", id="h1")])
    assert raised.value.field == "conversation_id"
    assert middleware.append_new([HumanMessage("hi", id="h1")], "c") == 1  # named: fine


IMAGE: dict[str, Any] = {
    "type": "image_url",
    "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
}


def test_the_model_sees_the_image_the_user_sent() -> None:
    model = Scripted(default="noted")
    agent = create_agent(
        model,
        tools=[],
        middleware=[LedgerfoldMiddleware(SQLiteStore(), "c")],
        checkpointer=InMemorySaver(),
    )
    content: list[str | dict[Any, Any]] = [
        {"type": "text", "text": "What is in this photo?"},
        IMAGE,
    ]
    _send(agent, HumanMessage(content))
    assert model.inputs[0][-1].content == content


def _state() -> list[BaseMessage]:
    thinking = {"type": "thinking", "thinking": "plan", "signature": "SIG"}
    return [
        HumanMessage("hi", id="h1"),
        AIMessage(
            content=[thinking, {"type": "text", "text": "calling"}],
            tool_calls=[{"name": "f", "args": {}, "id": "tu1"}],
            id="a1",
        ),
        ToolMessage("boom", tool_call_id="tu1", id="t1", status="error", artifact={"code": 7}),
    ]


def test_thinking_blocks_and_a_tool_results_status_reach_the_model() -> None:
    middleware = LedgerfoldMiddleware(SQLiteStore(), "c")
    state = _state()
    middleware.append_new(state)
    _, ai, tool = middleware.model_messages()
    assert ai is state[1] and tool is state[2]
    assert isinstance(tool, ToolMessage) and tool.status == "error"
    assert tool.artifact == {"code": 7}
    assert isinstance(ai.content, list) and ai.content[0] == state[1].content[0]


def test_a_turn_edited_in_the_ledger_or_changed_in_the_state_is_sent_as_the_ledger_has_it() -> None:
    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c")
    state = _state()
    middleware.append_new(state)
    store.edit("c", "t1", body="fixed")
    assert middleware.model_messages()[2].content == "fixed"
    # A state rewrite of a message already seen is not an edit: the ledger's text is sent.
    rewritten = [state[0].model_copy(update={"content": "rewritten"}), *state[1:]]
    middleware.append_new(rewritten)
    assert middleware.model_messages()[0].content == "hi"


def test_a_call_whose_arguments_were_edited_in_the_ledger_goes_out_as_the_ledger_has_it() -> None:
    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c")
    state = _state()
    middleware.append_new(state)
    call = {"id": "tu1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    calls = json.dumps([call])
    store.edit("c", "a1", meta={"tool_calls": calls})
    ai = middleware.model_messages()[1]
    assert ai is not state[1] and isinstance(ai, AIMessage)
    assert ai.tool_calls[0]["args"] == {"a": 1}


def test_a_message_the_ledger_split_in_two_goes_out_as_the_ledger_has_it() -> None:
    # An Anthropic `tool_result` block in a human message is stored as a tool turn of its
    # own; the state's message, block and all, must not stand in for the user turn.
    middleware = LedgerfoldMiddleware(SQLiteStore(), "c", recall=False)
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}
    thanks = HumanMessage([result, {"type": "text", "text": "thanks"}], id="h1")
    call = {"type": "tool_use", "id": "c1", "name": "w", "input": {}}
    middleware.append_new(
        [
            HumanMessage("weather?", id="h0"),
            AIMessage(
                [{"type": "text", "text": "checking"}, call],
                id="a1",
                tool_calls=[{"id": "c1", "name": "w", "args": {}}],
            ),
            thanks,
        ]
    )
    sent = middleware.model_messages()
    assert all(message is not thanks for message in sent)
    assert [m.content for m in sent if m.type == "human"] == ["weather?", "thanks"]
