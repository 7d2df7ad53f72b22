"""SPEC §17.9: `Compactor`, `LedgerfoldSession` (openai-agents) and `LedgerfoldMiddleware`
(langchain) work with a store that is nothing but v1.1's `Store` protocol — every other
name, private or public (`close`, `search`, `known_ids`, `append_chat_messages` …), raises
`AttributeError` — and then offer no recall tool. Real packages, fake models; the stores:
`SQLiteStore` on a file behind the proxy, and the in-memory second backend."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

import ledgerfold as lf
from langchain_support import LookingUp as ChatModel
from langchain_support import lookup as chat_lookup
from ledgerfold import Store
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from memory_store import MemoryStore
from protocol_only import ProtocolOnly, protocol_names
from test_openai_agents import ScriptedModel as AgentsModel
from test_openai_agents import lookup as agents_lookup
from test_openai_agents_sqlite_parity import _ITEM

POLICY = lf.CompactionPolicy("v1", keep_tail=3, trigger_tokens=None, min_new_turns=2)
_SESSION_OP = st.one_of(
    st.tuples(st.just("add"), st.lists(_ITEM, max_size=4)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-1, 4))),
    st.tuples(st.just("clear"), st.none()),
)


@pytest.fixture(params=["sqlite-file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProtocolOnly]:
    inner: Any = lf.SQLiteStore(tmp_path / "ledger.db") if request.param == "sqlite-file" else None
    try:
        yield ProtocolOnly(inner if inner is not None else MemoryStore())
    finally:
        if inner is not None:
            inner.close()


def _only_protocol(store: ProtocolOnly) -> None:
    assert store.calls and set(store.calls) <= protocol_names(Store)
    for name in ("close", "search", "known_ids", "append_chat_messages", "_worker_batch"):
        assert not hasattr(store, name)


def test_the_agents_session_runs_on_a_protocol_only_store(store: ProtocolOnly) -> None:
    session = LedgerfoldSession("s", store=store, policy=POLICY)  # type: ignore[arg-type]
    agent = Agent("a", model=AgentsModel(), tools=[agents_lookup])

    async def scenario() -> tuple[list[Any], Any]:
        for n in range(5):
            await Runner.run(agent, f"Look up R{n}.", session=session)
        items = await session.get_items()
        return items, await session.pop_item()

    items, popped = asyncio.run(scenario())
    assert items[0]["role"] == "system" and "recall_history" not in items[0]["content"]
    assert popped is not None
    with pytest.raises(lf.InvalidInput) as info:
        session.recall_tool()
    assert info.value.field == "store"
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    session.close()  # not the session's store: nothing to close, no `close` asked
    _only_protocol(store)


def test_the_langchain_middleware_runs_on_a_protocol_only_store(store: ProtocolOnly) -> None:
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)  # type: ignore[arg-type]
    assert middleware.recall_tool is None and middleware.tools == []
    model = ChatModel()
    agent = create_agent(
        model,
        tools=[chat_lookup],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        system_prompt="Be careful.",
    )
    config = {"configurable": {"thread_id": "t1"}}

    def ask(text: str) -> Any:
        return agent.invoke({"messages": [{"role": "user", "content": text}]}, config)

    for n in range(4):
        ask(f"Look up R{n}.")

    async def later() -> None:
        for n in range(4, 6):
            await agent.ainvoke({"messages": [{"role": "user", "content": f"R{n}?"}]}, config)

    asyncio.run(later())
    sent = model.inputs[-1]
    assert isinstance(sent[0], SystemMessage) and "<ledgerfold-summary>" in sent[0].content
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    assert "recall_history" not in sent[0].content
    _only_protocol(store)


class _CountingAppends:
    """A store that forwards to `inner` and counts the turns each `append_many` is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.submitted = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)  # AttributeError for what `inner` lacks
        if name != "append_many":
            return target

        def append_many(conversation_id: str, turns: Any) -> Any:
            turns = list(turns)
            self.submitted += len(turns)
            return target(conversation_id, turns)

        return append_many


def test_a_state_of_purged_messages_costs_a_v11_store_no_quadratic_appends() -> None:
    """A v1.1 store has no `known_ids`: a purged message of the state is found by the
    `DuplicateId` its append raises. A new middleware (a restart, one per request) over a
    state of which most messages were purged resubmitted the rest of the batch after each
    one: O(state²) turns. Counted in turns handed to `append_many`, not time."""
    from langchain_core.messages import AIMessage, HumanMessage

    inner = MemoryStore()
    store = _CountingAppends(ProtocolOnly(inner))
    never = lf.CompactionPolicy("v1", keep_tail=8, trigger_tokens=None, min_new_turns=10**6)
    state: list[Any] = []
    for n in range(150):
        state += [HumanMessage(f"q{n}", id=f"h{n}"), AIMessage(f"a{n}", id=f"a{n}")]
    LedgerfoldMiddleware(store, "c", policy=never).append_new(state)  # type: ignore[arg-type]
    inner.purge_through("c", 290, "retention", force=True)
    store.submitted = 0
    state.append(HumanMessage("and now?", id="new"))
    restarted = LedgerfoldMiddleware(store, "c", policy=never)  # type: ignore[arg-type]
    assert restarted.append_new(state) == 1
    assert [turn.id for turn in inner.load("c").turns][-1] == "new"
    assert store.submitted <= 12 * len(state), store.submitted


def _call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}


_COMPACTING = lf.CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(_SESSION_OP, max_size=12))
@example(  # a call ID made again: each retraction takes only its own call's results
    ops=[
        ("add", [_call("k"), {"type": "function_call_output", "call_id": "k", "output": ""}]),
        ("add", [_call("k")]),
        ("pop", None),
        ("pop", None),
        ("pop", None),
    ]
)
def test_the_session_over_the_second_backend_agrees_with_sqlite(
    tmp_path_factory: Any, ops: list[tuple[str, Any]]
) -> None:
    """The same calls, compacting as they go, give the same items, pops and errors over
    `SQLiteStore` and over the in-memory backend seen through the `Store` protocol only."""
    sqlite = lf.SQLiteStore(tmp_path_factory.mktemp("agree") / "ledger.db")
    sessions = [
        LedgerfoldSession("s", store=store, policy=_COMPACTING)  # type: ignore[arg-type]
        for store in (sqlite, ProtocolOnly(MemoryStore()))
    ]
    for session in sessions:
        numbers = itertools.count()
        session.compactor._summary_id_factory = lambda numbers=numbers: f"s{next(numbers)}"

    async def call(session: LedgerfoldSession, name: str, argument: Any) -> Any:
        try:
            if name == "add":
                return await session.add_items(json.loads(json.dumps(argument)))
            if name == "pop":
                return await session.pop_item()
            if name == "get":
                return await session.get_items(argument)
            return await session.clear_session()
        except lf.LedgerfoldError as error:
            return type(error).__name__, getattr(error, "field", None)

    async def scenario() -> None:
        for name, argument in ops:
            ours, theirs = [await call(session, name, argument) for session in sessions]
            assert ours == theirs, (name, argument)

    try:
        asyncio.run(scenario())
    finally:
        sqlite.close()
