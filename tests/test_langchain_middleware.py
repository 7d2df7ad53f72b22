"""`LedgerfoldMiddleware` with `create_agent`, and as LangGraph's `pre_model_hook`, over a
fake chat model in a tool-using session; against LangChain's `SummarizationMiddleware`."""

from __future__ import annotations

import warnings
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_support import LookingUp, lookup
from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CONSTRAINT = "Never pay with the Visa card."


def _run(agent: Any, turns: int) -> list[BaseMessage]:
    config = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [{"role": "user", "content": f"{CONSTRAINT} Look up R1."}]}, config)
    for turn in range(2, turns + 1):
        agent.invoke({"messages": [{"role": "user", "content": f"Look up R{turn}."}]}, config)
    messages: list[BaseMessage] = agent.get_state(config).values["messages"]
    return messages


def test_ledgerfold_middleware_keeps_state_and_the_constraint() -> None:
    store = SQLiteStore()
    policy = CompactionPolicy("v1", keep_tail=3, trigger_tokens=100, min_new_turns=2)
    middleware = LedgerfoldMiddleware(store, "c", policy=policy)
    model = LookingUp()
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    state = _run(agent, 5)
    # Graph state untouched: every message is still there, the first one included.
    assert CONSTRAINT in state[0].content
    assert len(state) == 5 * 4  # user, call, result, answer per turn
    # The ledger holds them all by message id (the final reply: at the end of the run); a
    # summary covers the early ones.
    assert [turn.id for turn in store.load("c").turns] == [message.id for message in state]
    assert store.current_summary("c") is not None
    last_input = model.inputs[-1]
    assert len(last_input) < len(state)  # the model got the compacted context
    assert "<ledgerfold-summary>" in last_input[0].content
    assert "Visa" in last_input[0].content
    # Tool results stay with their calls in what the model sees.
    seen: set[str] = set()
    for message in last_input:
        seen.update(call["id"] for call in getattr(message, "tool_calls", []))
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in seen


def test_langchain_summarization_middleware_loses_the_constraint() -> None:
    # What a summary model may well write: the constraint is not in it.
    summary_model = GenericFakeChatModel(
        messages=iter([AIMessage(content="The user looked up bookings.")] * 20)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summarization = SummarizationMiddleware(
            summary_model, trigger=("messages", 6), keep=("messages", 2)
        )
    model = LookingUp()
    agent = create_agent(
        model, tools=[lookup], middleware=[summarization], checkpointer=InMemorySaver()
    )
    state = _run(agent, 5)
    # LangChain deletes the history from the graph state, and the constraint with it.
    assert not any("Visa" in str(message.content) for message in state)
    assert not any("Visa" in str(message.content) for message in model.inputs[-1])


def test_the_same_as_a_langgraph_pre_model_hook() -> None:
    from langgraph.prebuilt import create_react_agent

    store = SQLiteStore()
    policy = CompactionPolicy("v1", keep_tail=3, trigger_tokens=100, min_new_turns=2)
    middleware = LedgerfoldMiddleware(store, "c", policy=policy)
    model = LookingUp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph v1
        agent = create_react_agent(
            model, [lookup], pre_model_hook=middleware.pre_model_hook, checkpointer=InMemorySaver()
        )
    state = _run(agent, 5)
    assert CONSTRAINT in state[0].content
    assert store.current_summary("c") is not None
    assert "Visa" in model.inputs[-1][0].content
    assert len(model.inputs[-1]) < len(state)


def test_an_unparsable_tool_call_keeps_its_record_and_group() -> None:
    # langchain_core's convert_to_openai_messages drops invalid_tool_calls; the ledger keeps
    # the call, so its error result stays grouped with it.
    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c")
    bad = {"type": "invalid_tool_call", "id": "c9", "name": "f", "args": "{no", "error": None}
    state = [
        AIMessage(content="", invalid_tool_calls=[bad], id="a1"),
        ToolMessage(content="error: bad arguments", tool_call_id="c9", id="t1"),
    ]
    assert middleware.append_new(state) == 2
    assert middleware.append_new(state) == 0  # appended once, by message id
    first, second = store.load("c").turns
    assert first.group == second.group == "tools:c9"
    ai, result = middleware.model_messages()
    assert [call["args"] for call in ai.invalid_tool_calls] == ["{no"]
    assert result.tool_call_id == "c9"


def test_a_system_prompt_kept_in_the_state_and_the_summary_are_one_system_message() -> None:
    """LangGraph's common pattern: the prompt is the state's first message, and the agent
    has none of its own. With a summary, the model still gets one system message."""
    from langchain_core.messages import HumanMessage, SystemMessage

    policy = CompactionPolicy("v", keep_tail=2, trigger_tokens=None, min_new_turns=2)
    middleware = LedgerfoldMiddleware(SQLiteStore(), "c", policy=policy)
    state: list[BaseMessage] = [SystemMessage("You are a bank assistant.", id="s0")]
    for n in range(5):
        state += [HumanMessage(f"q{n}", id=f"h{n}"), AIMessage(f"a{n}", id=f"a{n}")]
    middleware.append_new(state)
    assert middleware.compactor.compact("c").status == "accepted"
    messages = middleware.model_messages()
    assert [m.type for m in messages] == ["system", "human", "ai"]
    assert str(messages[0].content).startswith("You are a bank assistant.\n\n")
    assert "q0" in str(messages[0].content)  # the summary follows the prompt


class ReusingModel(LookingUp):
    """`LookingUp` numbering its calls per response, as some OpenAI-compatible servers
    do: every call is `call_0`."""

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        reply = super().reply(messages)
        if reply.tool_calls:
            reply.tool_calls[0]["id"] = "call_0"
        return reply


def test_a_model_reusing_call_ids_gets_its_exchanges_compacted_and_valid_inputs() -> None:
    store = SQLiteStore()
    policy = CompactionPolicy("v1", keep_tail=3, trigger_tokens=100, min_new_turns=2)
    middleware = LedgerfoldMiddleware(store, "c", policy=policy)
    model = ReusingModel()
    agent = create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver()
    )
    state = _run(agent, 5)
    calls = [m for m in state if isinstance(m, AIMessage) and m.tool_calls]
    assert {m.tool_calls[0]["id"] for m in calls} == {"call_0"}
    # Each exchange is its own unit: the early ones are summarised while the last is raw.
    summary = store.current_summary("c")
    assert summary is not None
    assert calls[0].id in summary.source_ids and calls[-1].id not in summary.source_ids
    # Every model input pairs each result with the call just before it.
    for model_input in model.inputs:
        open_calls: set[str] = set()
        for message in model_input:
            if isinstance(message, ToolMessage):
                assert message.tool_call_id in open_calls
                open_calls.discard(message.tool_call_id)
            else:
                open_calls = {call["id"] for call in getattr(message, "tool_calls", [])}
