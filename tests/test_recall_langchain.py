"""`LedgerfoldMiddleware`'s recall tool (SPEC §16.2, §17.6) under a real `create_agent` whose
fake chat model calls `recall_history` and then answers: the ToolMessage holds the passage
the summary dropped, the slot says recall is offered, the async path runs the search on the
store's worker thread, and `recall=False` (or a store without search) offers no tool."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field
from tests.integration_stores import RecordingStore

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.tools import RECALL_TOOL

CONVERSATION = "c"
POLICY = lf.CompactionPolicy("recall-lc-v1", keep_tail=4, min_new_turns=1)
FACT = "My locker code for the Geneva office is 5100."


class RecallingModel(Scripted):
    """Calls `recall_history` for the newest user message when it was bound to it, then
    answers; records its inputs and the names of the tools it was bound to."""

    arguments: dict[str, Any] = Field(default_factory=lambda: {"query": "Geneva locker code"})

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content="Answered from the recalled passage.")
        if not self.bound or "recall_history" not in self.bound[-1]:
            return AIMessage(content="I cannot look back.")
        call = {"name": "recall_history", "args": self.arguments, "id": "call-recall"}
        return AIMessage(content="", tool_calls=[call])


def _history() -> list[dict[str, str]]:
    messages = [{"role": "user", "content": FACT}]
    for n in range(12):
        messages.append({"role": "assistant" if n % 2 else "user", "content": f"Small talk {n}."})
    return messages


def _agent(store: Any, **options: Any) -> tuple[Any, LedgerfoldMiddleware, RecallingModel]:
    middleware = LedgerfoldMiddleware(
        store,
        CONVERSATION,
        policy=POLICY,
        summarizer=lf.ExtractiveSummarizer(max_turns=2),
        **options,
    )
    model = RecallingModel()
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    return agent, middleware, model


def _seed(agent: Any, middleware: LedgerfoldMiddleware) -> dict[str, Any]:
    """Put the history in the graph state and the ledger, and compact it (FACT dropped)."""
    config: dict[str, Any] = {"configurable": {"thread_id": "t1"}}
    agent.update_state(config, {"messages": _history()})
    middleware.append_new(agent.get_state(config).values["messages"])
    middleware.compactor.compact(CONVERSATION, force=True)
    summary = middleware.store.current_summary(CONVERSATION)
    assert summary is not None and "5100" not in summary.text
    return config


def _recall_result(state: list[BaseMessage]) -> dict[str, Any]:
    (result,) = [m for m in state if isinstance(m, ToolMessage)]
    assert result.name == "recall_history"
    parsed: dict[str, Any] = json.loads(str(result.content))
    return parsed


def test_create_agent_calls_recall_history_and_gets_the_passage(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        agent, middleware, model = _agent(store)
        assert isinstance(middleware.recall_tool, BaseTool)
        assert middleware.recall_tool.name == "recall_history"
        config = _seed(agent, middleware)
        agent.invoke({"messages": [{"role": "user", "content": "What is my locker code?"}]}, config)
        state = agent.get_state(config).values["messages"]
        hits = _recall_result(state)["hits"]
        assert hits[0]["text"] == FACT and hits[0]["sequence"] == 1
        assert state[-1].content == "Answered from the recalled passage."
        # The model was bound to the tool, and its context's slot says recall is offered.
        assert model.bound and "recall_history" in model.bound[0]
        (slot,) = [m for m in model.inputs[0] if m.type == "system"]
        assert "can be fetched with the recall_history tool" in str(slot.content)
        # The tool's answer reached the next model call.
        assert isinstance(model.inputs[1][-1], ToolMessage)
        assert FACT in str(model.inputs[1][-1].content)


def test_the_async_tool_runs_on_the_store_worker_thread(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "b.db")
    agent, middleware, _ = _agent(store)
    config = _seed(agent, middleware)
    store.calls.clear()
    question = {"messages": [{"role": "user", "content": "What is my locker code?"}]}
    asyncio.run(agent.ainvoke(question, config))
    hits = _recall_result(agent.get_state(config).values["messages"])["hits"]
    assert hits[0]["text"] == FACT
    (thread,) = [thread for name, thread in store.calls if name == "search"]
    assert thread is not threading.main_thread()
    assert thread.name.startswith("ledgerfold-store")


def _run(agent: Any, question: dict[str, Any], config: dict[str, Any], run: str) -> None:
    if run == "invoke":
        agent.invoke(question, config)
    else:
        asyncio.run(agent.ainvoke(question, config))


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_bad_model_arguments_are_an_error_result(tmp_path: Path, run: str) -> None:
    # The LangChain way: the ToolMessage says `status="error"` (a `ToolException` the tool
    # handles), its content the `{"error": ...}` JSON run_recall gives; the run goes on.
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        agent, middleware, model = _agent(store)
        model.arguments = {"query": "locker", "limit": 99}
        config = _seed(agent, middleware)
        _run(agent, {"messages": [{"role": "user", "content": "Locker?"}]}, config, run)
        state = agent.get_state(config).values["messages"]
        assert _recall_result(state) == {"error": "'limit' must be an integer from 1 to 20"}
        (result,) = [m for m in state if isinstance(m, ToolMessage)]
        assert result.status == "error"
        assert state[-1].content == "Answered from the recalled passage."
        # The ledger keeps the failed call's status (meta), as for any failed tool.
        (turn,) = [t for t in store.load(CONVERSATION).turns if t.id == result.id]
        assert (turn.meta or {}).get("status") == "error"


class _FailingSearch(RecordingStore):
    def __getattr__(self, name: str) -> Any:
        if name == "search":

            def search(*args: Any, **kwargs: Any) -> Any:
                raise lf.StoreError("disk I/O error")

            return search
        return super().__getattr__(name)


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_store_error_is_an_error_result(tmp_path: Path, run: str) -> None:
    store = _FailingSearch(tmp_path / "f.db")
    agent, middleware, _ = _agent(store)
    config = _seed(agent, middleware)
    _run(agent, {"messages": [{"role": "user", "content": "Locker?"}]}, config, run)
    state = agent.get_state(config).values["messages"]
    assert _recall_result(state) == {"error": "recall unavailable (database error)"}
    assert [m.status for m in state if isinstance(m, ToolMessage)] == ["error"]


def test_hits_are_a_success_and_so_is_no_hit(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "s.db") as store:
        tool = LedgerfoldMiddleware(store, "unknown").recall_tool
        assert tool is not None
        call = {"type": "tool_call", "id": "x", "name": "recall_history", "args": {"query": "a"}}
        result = tool.invoke(call)
        assert result.status == "success" and json.loads(result.content)["hits"] == []
        # Called with bare arguments (not a tool call), the error is the text all the same.
        assert json.loads(tool.invoke({"limit": 3}))["error"].startswith("'query'")


@pytest.mark.parametrize("key", ["self", "config", "run_manager", "arguments"])
@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_unknown_keys_named_like_the_tools_own_parameters_are_ignored(
    tmp_path: Path, key: str, run: str
) -> None:
    # SPEC §16.5: unknown keys are ignored. `self` used to reach `StructuredTool._run` as a
    # keyword and raise TypeError out of the agent's tool node.
    with lf.SQLiteStore(tmp_path / "k.db") as store:
        agent, middleware, model = _agent(store)
        model.arguments = {"query": "Geneva locker code", key: 1}
        config = _seed(agent, middleware)
        question = {"messages": [{"role": "user", "content": "What is my locker code?"}]}
        _run(agent, question, config, run)
        hits = _recall_result(agent.get_state(config).values["messages"])["hits"]
        assert hits[0]["text"] == FACT


def test_the_tool_schema_is_recall_tools() -> None:
    middleware = LedgerfoldMiddleware(lf.SQLiteStore(), CONVERSATION)
    assert middleware.recall_tool is not None
    assert middleware.recall_tool.args_schema == RECALL_TOOL["function"]["parameters"]
    assert middleware.tools == [middleware.recall_tool]


def test_recall_false_offers_no_tool(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "d.db") as store:
        agent, middleware, model = _agent(store, recall=False)
        assert middleware.recall_tool is None and middleware.tools == []
        config = _seed(agent, middleware)
        agent.invoke({"messages": [{"role": "user", "content": "Locker?"}]}, config)
        assert "recall_history" not in (model.bound[0] if model.bound else [])
        (slot,) = [m for m in model.inputs[0] if m.type == "system"]
        assert "recall_history tool" not in str(slot.content)
        assert agent.get_state(config).values["messages"][-1].content == "I cannot look back."


def test_a_store_without_search_offers_no_recall(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "e.db", search=False)
    middleware = LedgerfoldMiddleware(store, CONVERSATION)
    assert middleware.recall is False and middleware.recall_tool is None
    with pytest.raises(lf.InvalidInput) as raised:
        LedgerfoldMiddleware(store, CONVERSATION, recall=True)
    assert raised.value.field == "store"
    with pytest.raises(lf.InvalidInput) as raised:
        LedgerfoldMiddleware(lf.SQLiteStore(), CONVERSATION, recall="yes")  # type: ignore[arg-type]
    assert raised.value.field == "recall"
