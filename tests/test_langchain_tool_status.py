"""A failed tool call's result (LangChain's `ToolMessage(status="error")`, as `ToolNode`
returns a tool's error) keeps its status in the ledger (`meta["status"]`): the model gets it
back from the ledger when the state no longer holds the message, and the summary says the
call failed. Chat Completions' tool message has no status: `to_chat_messages` sends none.
Real SQLite files and a real `create_agent` run with a fake model."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.adapters import from_langchain_messages, to_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CALL = {"name": "charge", "args": {"amount": 12}, "id": "call-1"}


@tool
def charge(amount: int) -> str:
    """Charge the card."""
    raise ToolException("card declined")


charge.handle_tool_error = True


def test_a_failed_call_s_status_is_kept_and_comes_back(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    agent = create_agent(
        Scripted(replies=[AIMessage("", tool_calls=[CALL]), AIMessage("Ok.")]),
        tools=[charge],
        middleware=[middleware],
    )
    state = agent.invoke({"messages": [{"role": "user", "content": "Pay 12."}]})
    result = state["messages"][2]
    assert isinstance(result, ToolMessage) and result.status == "error"
    middleware.append_new(state["messages"])
    (turn,) = [turn for turn in store.load("c").turns if turn.role == "tool"]
    assert turn.meta == {"tool_call_id": "call-1", "name": "charge", "status": "error"}
    # The state is gone (a restart): the ledger's rendering says the call failed.
    sent = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "a.db"), "c").model_messages()
    (back,) = [message for message in sent if isinstance(message, ToolMessage)]
    assert back.status == "error" and back.content == "card declined"


def test_round_trip_and_chat_completions() -> None:
    messages = [
        HumanMessage("Pay 12.", id="u"),
        AIMessage("", tool_calls=[CALL], id="a"),
        ToolMessage("card declined", tool_call_id="call-1", status="error", id="t"),
    ]
    turns = from_langchain_messages(messages)
    assert (turns[2].meta or {})["status"] == "error"
    context = lf.assemble_context(lf.Conversation("c", 0, turns), None, "v1")
    back = to_langchain_messages(context)[2]
    assert isinstance(back, ToolMessage) and back.status == "error"
    # Chat Completions' tool message has only role, content and tool_call_id.
    assert lf.to_chat_messages(context)[2] == {
        "role": "tool",
        "content": "card declined",
        "tool_call_id": "call-1",
    }
    ok = from_langchain_messages([ToolMessage("fine", tool_call_id="x", id="t2")])
    assert "status" not in (ok[0].meta or {})


def test_the_summary_says_the_call_failed() -> None:
    turns = from_langchain_messages(
        [
            AIMessage("", tool_calls=[CALL], id="a"),
            ToolMessage("card declined", tool_call_id="call-1", status="error", id="t"),
        ]
    )
    items = tuple(lf.TurnItem(t.id, t.role, t.body, t.sequence, t.meta) for t in turns)
    text = lf.ExtractiveSummarizer()(lf.SummaryRequest("c", "p", "v1", items, None))
    assert text.splitlines()[-1].endswith("(13 chars of output, the call failed)")


def test_a_result_stored_before_its_status_was_kept_is_not_changed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lf.SQLiteStore(tmp_path / "b.db")
    store.append_chat_messages(
        "c",
        [
            {
                "id": "a",
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "charge", "arguments": "{}"},
                    }
                ],
            },
            {"id": "t", "role": "tool", "tool_call_id": "call-1", "content": "card declined"},
        ],
    )
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    state = [
        AIMessage("", tool_calls=[{**CALL, "args": {}}], id="a"),
        ToolMessage("card declined", tool_call_id="call-1", status="error", id="t"),
    ]
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        assert middleware.append_new(state) == 0
    assert "changed" not in caplog.text
