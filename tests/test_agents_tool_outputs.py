"""The text of every kind of Agents SDK tool result is its turn's text (SPEC §16.1: only
bodies are searched; §16.3: summaries are made from them): a custom tool's output, a local
shell's, a shell's stdout and stderr. They were tool turns with no text, the output only in
the item's verbatim copy: `recall_history` could not find a command's output, and the
summary said "(0 chars of output)". A custom tool call is named by its tool (with its input
as the arguments), not as `custom_tool_call`. Items still come back exactly as they came."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from ledgerfold.tools import run_recall

SHELL_RESULT = {
    "stdout": "invoice_PO-9302.pdf",
    "stderr": "du: warning",
    "outcome": {"type": "exit", "exit_code": 0},
}
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Find the invoice."},
    {"type": "custom_tool_call", "call_id": "cc1", "name": "run_sql", "input": "SELECT 1"},
    {"type": "custom_tool_call_output", "call_id": "cc1", "output": "total 112.50 EUR"},
    {
        "type": "local_shell_call",
        "call_id": "ls1",
        "id": "lsc_1",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    {"type": "local_shell_call_output", "call_id": "ls1", "output": "archive_QZ-704.zip"},
    {"type": "shell_call", "call_id": "sh1", "action": {"commands": ["ls"]}, "status": "completed"},
    {"type": "shell_call_output", "call_id": "sh1", "output": [SHELL_RESULT]},
]


def _session(tmp_path: Path) -> tuple[lf.SQLiteStore, LedgerfoldSession]:
    store = lf.SQLiteStore(tmp_path / "outputs.db")
    session = LedgerfoldSession("s", store=store, policy=lf.CompactionPolicy("v1", keep_tail=1))
    asyncio.run(session.add_items(ITEMS))
    return store, session


def test_each_result_s_text_is_its_turn_s_text(tmp_path: Path) -> None:
    store, session = _session(tmp_path)
    tools = [turn for turn in store.load("s").turns if turn.role == "tool"]
    assert [turn.body for turn in tools] == [
        "total 112.50 EUR",
        "archive_QZ-704.zip",
        "invoice_PO-9302.pdf\ndu: warning",
    ]
    assert asyncio.run(session.get_items()) == ITEMS  # as they came


def test_recall_finds_a_command_s_output(tmp_path: Path) -> None:
    store, _ = _session(tmp_path)
    for query, turn_text in [
        ("QZ-704 archive", "archive_QZ-704.zip"),
        ("PO-9302 invoice", "invoice_PO-9302.pdf\ndu: warning"),
        ("112.50", "total 112.50 EUR"),
    ]:
        hits = json.loads(run_recall(store, "s", {"query": query}))["hits"]
        assert hits and hits[0]["text"] == turn_text


def test_the_summary_names_the_custom_tool_and_the_output(tmp_path: Path) -> None:
    store, session = _session(tmp_path)
    session.compactor.compact("s", force=True)
    summary = store.current_summary("s")
    assert summary is not None
    lines = summary.text.splitlines()
    assert "[seq 2 assistant] calls: run_sql" in lines
    assert "[seq 3 tool] total 112.50 EUR (16 chars of output)" in lines


def test_an_item_stored_before_keeps_coming_back(tmp_path: Path) -> None:
    """A result stored by an earlier version (its output in the verbatim copy, the turn's
    text empty) is served as it was stored."""
    store = lf.SQLiteStore(tmp_path / "old.db")
    call, result = ITEMS[1], ITEMS[2]
    store.append_many(
        "s",
        [
            {
                "id": "a",
                "role": "assistant",
                "body": "",
                "group": "tools:cc1",
                "meta": {
                    "agents_item": json.dumps(call),
                    "tool_calls": json.dumps(
                        [
                            {
                                "id": "cc1",
                                "type": "function",
                                "function": {"name": "custom_tool_call", "arguments": ""},
                            }
                        ]
                    ),
                },
            },
            {
                "id": "t",
                "role": "tool",
                "body": "",
                "group": "tools:cc1",
                "meta": {"agents_item": json.dumps(result), "tool_call_id": "cc1"},
            },
        ],
    )
    assert asyncio.run(LedgerfoldSession("s", store=store).get_items()) == [call, result]


def test_a_hosted_mcp_call_s_output_is_its_turn_s_text(tmp_path: Path) -> None:
    """A hosted MCP tool's call and output come as one `mcp_call` item: its output is the
    turn's text (found by recall, seen by the summary), and an edit of it is served."""
    store = lf.SQLiteStore(tmp_path / "mcp.db")
    session = LedgerfoldSession("s", store=store)
    mcp = {
        "type": "mcp_call",
        "id": "mcp_1",
        "name": "get_order",
        "server_label": "shop",
        "arguments": '{"id": "PO-9302"}',
        "output": "order PO-9302: 3 chairs, delivered to Geneva",
        "status": "completed",
    }
    asyncio.run(session.add_items([{"role": "user", "content": "Where is my order?"}, mcp]))
    turn = store.load("s").turns[1]
    assert (turn.role, turn.body) == ("assistant", mcp["output"])
    hits = json.loads(run_recall(store, "s", {"query": "chairs Geneva"}))["hits"]
    assert hits[0]["text"] == mcp["output"]
    assert asyncio.run(session.get_items())[1] == mcp
    store.edit("s", turn.id, body="order PO-9302: [redacted]")
    assert asyncio.run(session.get_items())[1] == {**mcp, "output": "order PO-9302: [redacted]"}
