"""`assemble_context` leaves the cycle collector alone: no process-wide
`gc.disable()`, which two threads interleaving could leave off for good. Instead the objects
that cannot be part of a cycle (a context's `TurnItem`s, the `Turn`s read from a store) are
not tracked by it, so a large context triggers no full collections."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import pytest

import ledgerfold as lf


def _conversation(n: int) -> lf.Conversation:
    turns = [lf.Turn(f"t{i}", i + 1, "user", f"body {i}", meta={"k": "v"}) for i in range(n)]
    return lf.Conversation("c", 1, turns)


def test_the_collector_switch_is_never_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    touched: list[str] = []

    def disable() -> None:
        touched.append("disable")

    def enable() -> None:
        touched.append("enable")

    monkeypatch.setattr(gc, "disable", disable)
    monkeypatch.setattr(gc, "enable", enable)
    context = lf.assemble_context(_conversation(50), None, "v")
    assert len(context.items) == 50
    assert touched == []


def test_threads_interleaving_leave_the_collector_on() -> None:
    conversation = _conversation(200)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work() -> None:
        try:
            start.wait()
            for _ in range(300):
                lf.assemble_context(conversation, None, "v")
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        lf.assemble_context(_conversation(10), None, "v")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_context_turn_items_are_not_tracked() -> None:
    conversation = _conversation(30)
    raw = lf.assemble_context(conversation, None, "v")
    assert raw.fallback == "no-summary"
    assert [gc.is_tracked(item) for item in raw.items] == [False] * 30


def test_untracked_items_are_freed_with_the_context() -> None:
    # Untracked objects are freed by reference counting alone: the ledger turns' bodies
    # are shared by the items and get their references back once the context is gone.
    conversation = _conversation(20)
    body = conversation.turns[5].body
    before = sys.getrefcount(body)
    context = lf.assemble_context(conversation, None, "v")
    texts = [item.text for item in context.items]
    assert texts[5] is body
    del texts, context
    assert sys.getrefcount(body) == before


def test_turns_read_from_a_store_are_not_tracked(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        store.append_many("c", [{"role": "user", "body": f"body {i}"} for i in range(5)])
        turns = store.load("c").turns
    assert len(turns) == 5
    assert not any(gc.is_tracked(turn) for turn in turns)
