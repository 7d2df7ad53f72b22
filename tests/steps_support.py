"""Counting a store call's work without timing it: SQLite VM steps (in tens) on the store's
connection, for the tests that check a cost follows the new work, not the ledger."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

T = TypeVar("T")


def vm_steps(store: SQLiteStore, call: Callable[[], T]) -> tuple[int, T]:
    """`call()`'s SQLite VM steps on `store`'s connection (in tens), and its result."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store._connection().set_progress_handler(count, 10)
    try:
        result = call()
    finally:
        store._connection().set_progress_handler(None, 0)
    return steps[0], result


def chat_call(call_id: str) -> dict[str, object]:
    """An OpenAI-style tool call of `call_id`."""
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def answered_calls(ids: list[str]) -> list[dict[str, object]]:
    """Chat messages: each call of `ids` made and answered at once."""
    messages: list[dict[str, object]] = []
    for n, call_id in enumerate(ids):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [chat_call(call_id)]},
            {"role": "tool", "tool_call_id": call_id, "content": f"result {n}"},
        ]
    return messages


def compact_all(store: SQLiteStore, keep_tail: int, conversation_id: str = "c") -> None:
    """Compact until nothing is left to fold, so the summary covers all but the tail."""
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=keep_tail, min_new_turns=1))
    while compactor.compact(conversation_id).accepted:
        pass
