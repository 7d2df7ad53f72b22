"""The integrations report what their compactor does (SPEC §17.8): `LedgerfoldMiddleware(...,
on_event=hook)` and `LedgerfoldSession(..., on_event=hook)` hand the hook to the `Compactor`
they make, so an agent run through LangChain/LangGraph or the Agents SDK emits the same
`compaction.*` and `context.fallback` events as `Compactor(..., on_event=hook)`; and a hook
that is not callable is `InvalidInput` naming `on_event`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import ledgerfold as lf
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.integrations.openai_agents import LedgerfoldSession

SECRET = "SECRET-51d0-integration-body"
POLICY = lf.CompactionPolicy("integration-events-v1", keep_tail=2, min_new_turns=2)


def _no_text(events: list[lf.Event]) -> None:
    assert all(SECRET not in repr(event) for event in events)


def test_the_middleware_reports_its_compactions_and_fallbacks(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    with lf.SQLiteStore(tmp_path / "m.db") as store:
        middleware = LedgerfoldMiddleware(store, "c", policy=POLICY, on_event=events.append)
        state: list[Any] = [HumanMessage(f"{SECRET} q0", id="h0")]
        middleware.pre_model_hook({"messages": state})  # one turn: nothing to compact
        for n in range(1, 4):
            state += [AIMessage(f"{SECRET} a{n}", id=f"a{n}"), HumanMessage(f"q{n}", id=f"h{n}")]
        middleware.pre_model_hook({"messages": state})
    names = [event.name for event in events]
    assert names[:2] == ["compaction.skipped", "context.fallback"]
    assert "compaction.accepted" in names
    [accepted] = [event for event in events if event.name == "compaction.accepted"]
    assert accepted.conversation_id == "c" and accepted.turns > 0 and accepted.tokens_in > 0
    _no_text(events)


def test_the_session_reports_its_compactions_and_fallbacks(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    session = LedgerfoldSession("s", str(tmp_path / "s.db"), policy=POLICY, on_event=events.append)

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": f"{SECRET} q0"}])
        await session.get_items()  # never compacted: served raw
        for n in range(1, 4):
            await session.add_items(
                [
                    {"role": "assistant", "content": f"{SECRET} a{n}"},
                    {"role": "user", "content": f"q{n}"},
                ]
            )

    try:
        asyncio.run(scenario())
    finally:
        session.close()
    names = [event.name for event in events]
    assert "context.fallback" in names and "compaction.accepted" in names
    assert {event.conversation_id for event in events} == {"s"}
    _no_text(events)


@pytest.mark.parametrize("bad", [1, "hook"])
def test_a_hook_that_is_not_callable_is_invalid_input(tmp_path: Path, bad: object) -> None:
    with lf.SQLiteStore() as store:
        with pytest.raises(lf.InvalidInput) as caught:
            LedgerfoldMiddleware(store, "c", on_event=bad)  # type: ignore[arg-type]
        assert caught.value.field == "on_event"
        with pytest.raises(lf.InvalidInput) as caught:
            LedgerfoldSession("s", store=store, on_event=bad)  # type: ignore[arg-type]
        assert caught.value.field == "on_event"


def test_a_session_opening_its_store_reports_the_stores_events_too(tmp_path: Path) -> None:
    """`LedgerfoldSession(session_id, db_path, on_event=hook)` opens its `SQLiteStore`
    itself, so the application has no other way to hook the store: the policy's purges and
    `clear_session`'s deletion reach `hook` as the compactions do."""
    events: list[lf.Event] = []
    sealing = lf.CompactionPolicy(
        "integration-events-v1", keep_tail=2, min_new_turns=2, retain_turns=2
    )
    session = LedgerfoldSession(
        "s", str(tmp_path / "owned.db"), policy=sealing, on_event=events.append
    )

    async def scenario() -> None:
        for n in range(4):
            await session.add_items(
                [
                    {"role": "user", "content": f"{SECRET} q{n}"},
                    {"role": "assistant", "content": f"a{n}"},
                ]
            )
        await session.clear_session()

    try:
        asyncio.run(scenario())
    finally:
        session.close()
    names = [event.name for event in events]
    assert "compaction.accepted" in names and "retention.purged" in names
    assert names[-1] == "conversation.deleted"
    _no_text(events)


def test_pop_item_serves_no_context_and_reports_none(tmp_path: Path) -> None:
    """`pop_item` reads the context to find the newest turn; no model is served it, so it is
    no `context.fallback` (which counts contexts served raw)."""
    events: list[lf.Event] = []
    session = LedgerfoldSession("s", str(tmp_path / "p.db"), policy=POLICY, on_event=events.append)

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": f"{SECRET} q0"}])
        await session.wait_compaction()  # its check's event (skipped) comes from its job
        events.clear()
        popped = await session.pop_item()
        assert popped is not None and popped["content"] == f"{SECRET} q0"

    try:
        asyncio.run(scenario())
    finally:
        session.close()
    assert [event.name for event in events] == []
