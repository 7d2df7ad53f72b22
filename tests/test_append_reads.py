"""An append costs its new turns, not the ledger (SPEC §15.8 cost): a turn that answers no
tool call does not look for a caller among the ledger's assistant turns."""

from __future__ import annotations

from pathlib import Path

from ledgerfold import SQLiteStore


def test_a_plain_append_does_not_look_for_callers(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append_many(
            "c",
            [{"role": "user" if n % 2 else "assistant", "body": f"turn {n}"} for n in range(300)],
        )
        statements: list[str] = []
        store._connection().set_trace_callback(statements.append)
        try:
            store.append("c", "user", "one more")
            store.append_chat_messages("c", [{"role": "assistant", "content": "and a reply"}])
        finally:
            store._connection().set_trace_callback(None)
        assert statements  # the trace saw the appends
        assert not [s for s in statements if "role = 'assistant' AND meta IS NOT NULL" in s]


def test_a_tool_result_still_finds_its_caller(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
            ],
        )
        statements: list[str] = []
        store._connection().set_trace_callback(statements.append)
        try:
            store.append_chat_messages(
                "c", [{"role": "tool", "tool_call_id": "c1", "content": "r"}]
            )
        finally:
            store._connection().set_trace_callback(None)
        assert [s for s in statements if "role = 'assistant' AND meta IS NOT NULL" in s]
