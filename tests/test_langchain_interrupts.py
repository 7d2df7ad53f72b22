"""A LangGraph human-in-the-loop interrupt (`HumanInTheLoopMiddleware`, batched or per call)
under `LedgerfoldMiddleware`: the run stops before the tool runs and `after_agent` does not
run, so the model's pending call is not in the ledger while the run waits. It is appended
at the next model call with what followed it, in state order: on resume (approved, edited,
rejected) the call and its result, as one unit; when the thread moves on without resuming
(a new user message), the call alone, which the model's input then leaves out (SPEC §17.2:
a call without its result, with messages after it). Nothing is lost, no result ever lands
without its call, and a restart between the interrupt and the resume changes nothing.
Real SQLite files, a real `create_agent` graph and checkpointer, a fake model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CALL = {"name": "send_email", "args": {"to": "alice", "body": "hi"}, "id": "call-1"}
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t"}}
EDIT = {
    "type": "edit",
    "edited_action": {"name": "send_email", "args": {"to": "bob", "body": "yo"}},
}
DECISIONS = {"approve": {"type": "approve"}, "edit": EDIT, "reject": {"type": "reject"}}


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _agent(store: Any, mode: str, saver: InMemorySaver) -> tuple[Any, Scripted]:
    model = Scripted(replies=[AIMessage("", tool_calls=[CALL]), AIMessage("Done.")])
    gate = HumanInTheLoopMiddleware(interrupt_on={"send_email": True}, interrupt_mode=mode)
    ledger = LedgerfoldMiddleware(store, None, recall=False)
    return create_agent(model, [send_email], middleware=[gate, ledger], checkpointer=saver), model


def _roles(store: lf.SQLiteStore) -> list[str]:
    return [turn.role for turn in store.load("t").turns]


def _resume(mode: str, decision: dict[str, Any], interrupts: Any) -> Command[Any]:
    if mode == "batched":
        return Command(resume={"decisions": [decision]})
    return Command(resume={interrupts[0].id: decision})


@pytest.mark.parametrize("mode", ["batched", "per_call"])
@pytest.mark.parametrize("decision", list(DECISIONS))
@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_the_pending_call_lands_with_its_result_on_resume(
    tmp_path: Path, mode: str, decision: str, run: str
) -> None:
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        agent, model = _agent(store, mode, InMemorySaver())

        def invoke(value: Any) -> Any:
            if run == "invoke":
                return agent.invoke(value, CONFIG, version="v2")
            return asyncio.run(agent.ainvoke(value, CONFIG, version="v2"))

        waiting = invoke({"messages": [{"role": "user", "content": "Email Alice hi."}]})
        assert waiting.interrupts
        assert _roles(store) == ["user"]  # the pending call is in the state only
        invoke(_resume(mode, DECISIONS[decision], waiting.interrupts))
        user, call, result, reply = store.load("t").turns
        assert [user.role, call.role, result.role, reply.body] == [
            "user",
            "assistant",
            "tool",
            "Done.",
        ]
        assert (result.meta or {})["tool_call_id"] == "call-1"
        assert call.group == result.group == "tools:call-1"  # one compaction unit
        assert ((result.meta or {}).get("status") == "error") == (decision == "reject")
        # The model's second call got the call with its result right after it.
        sent = model.inputs[1]
        assert [m.type for m in sent] == ["human", "ai", "tool"]
        assert isinstance(sent[2], ToolMessage) and sent[2].tool_call_id == "call-1"


def test_a_thread_that_moves_on_keeps_the_call_out_of_the_models_input(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "b.db") as store:
        agent, model = _agent(store, "batched", InMemorySaver())
        agent.invoke({"messages": [{"role": "user", "content": "Email Alice hi."}]}, CONFIG)
        agent.invoke({"messages": [{"role": "user", "content": "Never mind."}]}, CONFIG)
        assert _roles(store) == ["user", "assistant", "user", "assistant"]
        assert "call-1" in (store.load("t").turns[1].meta or {})["tool_calls"]
        assert [(m.type, m.content) for m in model.inputs[1]] == [
            ("human", "Email Alice hi."),
            ("human", "Never mind."),
        ]


def test_a_restart_between_the_interrupt_and_the_resume(tmp_path: Path) -> None:
    saver = InMemorySaver()  # the thread's checkpoints outlive the process's middleware
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        agent, _ = _agent(store, "batched", saver)
        agent.invoke({"messages": [{"role": "user", "content": "Email Alice hi."}]}, CONFIG)
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        agent, model = _agent(store, "batched", saver)
        model.replies.pop(0)  # the new process's model is asked once: the reply
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
        assert _roles(store) == ["user", "assistant", "tool", "assistant"]
        assert [m.type for m in model.inputs[0]] == ["human", "ai", "tool"]
