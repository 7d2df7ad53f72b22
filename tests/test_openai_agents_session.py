"""`LedgerfoldSession` beyond the SDK protocol's basics: clearing erases in one transaction
(the sealed summary too), `pop_item` reads the context rather than the ledger, any `Store`
works, and with agent instructions the model gets one system message (SPEC §17.6)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner

from integration_stores import RecordingStore
from ledgerfold import CompactionPolicy, InvalidInput, SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from test_openai_agents import ScriptedModel, lookup

#: Seals each summary: the turns it covers are purged beyond the newest 2.
SEALING = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2, retain_turns=2)
WRITES = {
    "append",
    "append_many",
    "edit",
    "retract",
    "purge_through",
    "apply_retention",
    "delete_conversation",
    "commit_summary",
    "record_failure",
    "begin_compaction",
    "start_plan",
    "prune_versions",
}


def _exchange(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]


def test_clear_session_erases_everything_in_one_transaction(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "c.db")
    session = LedgerfoldSession("s", store=store, policy=SEALING)  # type: ignore[arg-type]
    other = LedgerfoldSession("other", store=store, policy=SEALING)  # type: ignore[arg-type]

    async def scenario() -> list[Any]:
        for n in range(6):
            await session.add_items(_exchange(n))
        await other.add_items(_exchange(0))
        await session.wait_compaction()  # their compactions run as jobs after add_items:
        await other.wait_compaction()  # ended before the calls counted here
        assert store.inner.history_boundary("s") is not None  # a sealed summary exists
        store.calls.clear()
        await session.clear_session()
        return await session.get_items()

    assert asyncio.run(scenario()) == []  # the sealed summary was served before
    writes = [name for name in store.names() if name in WRITES]
    assert writes == ["delete_conversation"]  # one call, one transaction
    assert store.inner.summary_history("s") == []
    assert store.inner.load("s").turns == ()
    assert len(store.inner.load("other").turns) == 2  # another session is untouched

    async def again() -> list[Any]:
        await session.add_items(_exchange(9))  # the session is usable after clearing
        return await session.get_items()

    assert asyncio.run(again()) == _exchange(9)


def test_pop_item_reads_the_context_not_the_ledger(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "p.db")
    policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)
    session = LedgerfoldSession("s", store=store, policy=policy)  # type: ignore[arg-type]

    async def scenario() -> list[Any]:
        for n in range(10):
            await session.add_items(_exchange(n))
        await session.wait_compaction()  # the last one's (a job after its add_items)
        store.calls.clear()
        return [await session.pop_item() for _ in range(3)]

    # The third pop takes the summary's newest source: every turn after its slot is gone.
    assert asyncio.run(scenario()) == [_exchange(9)[1], _exchange(9)[0], _exchange(8)[1]]
    # No call that reads the whole ledger: the context (bounded by the policy), retract,
    # and below the summary its newest source read by ID (`get_turns`), never `load`.
    assert set(store.names()) == {"context", "retract", "get_turns"}
    assert [turn.body for turn in store.inner.load("s").turns][-1] == "q8"


def _pop_steps(path: Path, turns: int) -> int:
    """SQLite's virtual-machine steps (in thousands) of three `pop_item` calls on a ledger of
    `turns` turns that was never compacted (its context is the whole ledger), after one
    `get_items`."""
    store = SQLiteStore(path)
    policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=10**6)
    session = LedgerfoldSession("s", store=store, policy=policy)
    store.append_many("s", [{"role": "user", "body": f"m{n}"} for n in range(turns)])
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    async def scenario() -> list[Any]:
        await session.get_items()
        store._connection().set_progress_handler(step, 1000)
        return [await session.pop_item() for _ in range(3)]

    try:
        popped = asyncio.run(scenario())
    finally:
        store.close()
    assert [item["content"] for item in popped] == [f"m{turns - n}" for n in (1, 2, 3)]
    return steps[0]


def test_pop_item_costs_the_same_on_a_ledger_ten_times_larger(tmp_path: Path) -> None:
    """The retraction of the newest turn shortens the context the store had read, which
    the next `pop_item` reads again (`_context_cache`): no pop reads the ledger, also where
    the context is the whole ledger. Counted in SQLite's steps, not time."""
    small = _pop_steps(tmp_path / "small.db", 300)
    large = _pop_steps(tmp_path / "large.db", 3000)
    assert large <= 1.5 * small + 5, (small, large)


def test_runner_with_instructions_sends_one_system_message(tmp_path: Path) -> None:
    model = ScriptedModel()
    instructions = "You book hotels. Be brief."
    agent = Agent(name="agent", instructions=instructions, model=model, tools=[lookup])
    policy = CompactionPolicy("v1", keep_tail=3, trigger_tokens=120, min_new_turns=2)
    session = LedgerfoldSession("s1", tmp_path / "a.db", policy=policy)
    sent_instructions: list[str | None] = []
    original = model.get_response

    async def recording(system_instructions: Any, input: Any, *args: Any, **kw: Any) -> Any:
        sent_instructions.append(system_instructions)
        return await original(system_instructions, input, *args, **kw)

    model.get_response = recording  # type: ignore[method-assign]
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)

    async def run_all() -> None:
        await Runner.run(
            agent, "Never pay with the Visa card. Look up R1.", session=session, run_config=config
        )
        for turn in range(2, 7):
            await Runner.run(agent, f"Look up booking {turn}.", session=session, run_config=config)

    asyncio.run(run_all())
    assert session.store.current_summary("s1") is not None
    summarised = 0
    for system, items in zip(sent_instructions, model.inputs, strict=True):
        assert system is not None and system.startswith(instructions)
        # The input carries no system item: the summary is in the instructions, once.
        assert not any(item.get("role") == "system" for item in items)
        summarised += "<ledgerfold-summary>" in system
    assert summarised > 0 and "Visa" in (sent_instructions[-1] or "")


def test_without_instructions_the_filter_changes_nothing() -> None:
    from agents.run_config import CallModelData, ModelInputData

    session = LedgerfoldSession("s")
    data = ModelInputData(input=[{"role": "system", "content": "x"}], instructions=None)
    assert session.call_model_input_filter(CallModelData(data, None, None)) is data  # type: ignore[arg-type]
    # With instructions but no summary served by this session: a leading system item joins
    # the instructions (one system message), the rest is unchanged.
    user = {"role": "user", "content": "hi"}
    data = ModelInputData(input=[{"role": "system", "content": "x"}, user], instructions="I")
    joined = session.call_model_input_filter(CallModelData(data, None, None))  # type: ignore[arg-type]
    assert (joined.instructions, joined.input) == ("I\n\nx", [user])
    data = ModelInputData(input=[user], instructions="I")
    assert session.call_model_input_filter(CallModelData(data, None, None)) is data  # type: ignore[arg-type]
    # A leading developer item of text parts joins them as its text.
    parts = [{"type": "input_text", "text": "x"}, {"type": "input_text", "text": "y"}]
    data = ModelInputData(input=[{"role": "developer", "content": parts}, user], instructions="I")
    joined = session.call_model_input_filter(CallModelData(data, None, None))  # type: ignore[arg-type]
    assert (joined.instructions, joined.input) == ("I\n\nxy", [user])


def test_clear_session_leaves_no_sealed_summary(tmp_path: Path) -> None:
    # Regression: retracting every turn left the sealed summary in get_items().
    session = LedgerfoldSession("s", tmp_path / "sealed.db", policy=SEALING)

    async def scenario() -> list[Any]:
        for n in range(6):
            await session.add_items(_exchange(n))
        assert session.store.history_boundary("s") is not None
        await session.clear_session()
        return await session.get_items()

    assert asyncio.run(scenario()) == []
    session.close()


def test_pop_item_after_a_purge_never_pops_an_item_before_the_summary(tmp_path: Path) -> None:
    """Once the raw turns after a sealed summary are popped, the newest live turn is the
    system prompt, which `get_items` serves *before* the summary: it is not the session's
    most recent item. `pop_item` then has nothing to pop (the turns after the prompt were
    purged): it returned and retracted the prompt, and the summary's context with it
    (SPEC §17.3's `preserved-missing`)."""
    session = LedgerfoldSession("s", tmp_path / "purged.db", policy=SEALING)
    prompt = {"role": "system", "content": "You are careful."}

    async def scenario() -> list[Any]:
        await session.add_items([prompt])
        for n in range(6):
            await session.add_items(_exchange(n))
        assert session.store.history_boundary("s") is not None
        popped = [await session.pop_item() for _ in range(3)]
        return [popped, await session.get_items()]

    popped, items = asyncio.run(scenario())
    assert popped == [_exchange(5)[1], _exchange(5)[0], None]
    # The prompt leads the summary's one system item (one leading system message).
    assert len(items) == 1 and items[0]["role"] == "system"
    assert items[0]["content"].startswith(prompt["content"] + "\n\n")
    assert "<ledgerfold-summary>" in items[0]["content"]
    session.close()


def test_get_items_hands_out_items_of_its_own(tmp_path: Path) -> None:
    """Each `get_items` returns fresh items (a caller may change them: the next call is
    as before), and the summary's framing follows `recall_tool()` once it is offered."""
    policy = CompactionPolicy("v1", keep_tail=4, trigger_tokens=None, min_new_turns=2)
    session = LedgerfoldSession("s", tmp_path / "f.db", policy=policy)

    async def scenario() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        for n in range(4):
            await session.add_items(_exchange(n))
        await session.add_items(
            [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]
        )
        await session.add_items([{"type": "function_call_output", "call_id": "c1", "output": "x"}])
        first = await session.get_items()
        for item in first:
            item["changed"] = True
            item.pop("role", None)
        again = await session.get_items()
        session.recall_tool()
        offered = await session.get_items()
        return first, again, offered, await session.get_items()

    try:
        first, again, offered, last = asyncio.run(scenario())
    finally:
        session.close()
    assert all(item["changed"] for item in first)  # the first call's items were changed
    assert all("changed" not in item for item in again)
    assert again[0]["role"] == "system" and "recall_history" not in again[0]["content"]
    assert [item.get("role") for item in again] == ["system", "user", "assistant", None, None]
    assert again[1:3] == _exchange(3)
    assert again[-2:] == [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "x"},
    ]
    assert "recall_history" in offered[0]["content"]
    assert offered[1:] == again[1:] and last == offered


def test_get_items_restores_a_turn_once_while_the_context_serves_it_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's memo of restored turns: a turn the context serves again (the same
    objects, from the store's context cache) is not decoded again; a new turn is."""
    from ledgerfold.integrations import _agents_items

    made: list[str] = []
    real = _agents_items.restored

    def counting(role: str, text: str, meta: Any) -> list[Any]:
        made.append(text)
        return real(role, text, meta)

    monkeypatch.setattr(_agents_items, "restored", counting)
    store = SQLiteStore(tmp_path / "f.db")
    session = LedgerfoldSession("a", store=store)

    async def scenario() -> None:
        await session.add_items(_exchange(0))
        assert await session.get_items() == _exchange(0)
        assert len(made) == 2
        assert await session.get_items() == _exchange(0)
        assert len(made) == 2  # served unchanged: not restored again
        await session.add_items(_exchange(1))
        assert await session.get_items() == _exchange(0) + _exchange(1)
        assert len(made) == 4  # only the new exchange

    try:
        asyncio.run(scenario())
    finally:
        store.close()


def test_the_restored_turns_memo_is_the_sessions_and_holds_only_the_context(
    tmp_path: Path,
) -> None:
    """Per session, not process-wide: another session does not see it; it holds the turns of
    the context served last (an erased turn leaves it at the next read), and `clear_session`
    empties it with the ledger."""
    store = SQLiteStore(tmp_path / "f.db")
    one, other = LedgerfoldSession("a", store=store), LedgerfoldSession("b", store=store)

    async def scenario() -> None:
        await one.add_items(_exchange(0) + _exchange(1))
        assert len(await one.get_items()) == 4
        assert len(one._restored) == 4 and not len(other._restored)
        newest = store.load("a").turns[-1]
        store.retract("a", newest.id, erase=True)
        assert len(await one.get_items()) == 3
        assert len(one._restored) == 3
        assert all(turn.text != newest.body for turn in one._restored._turns.values())
        await one.clear_session()

    try:
        asyncio.run(scenario())
        assert not len(one._restored)
    finally:
        store.close()


def test_a_session_refused_after_opening_its_store_closes_it(tmp_path: Path) -> None:
    """A bad `policy` is found after the session opened its own store at `db_path`: the
    store is closed before the error leaves (no connection left to the collector)."""
    import gc
    import os

    path = tmp_path / "refused.db"

    def open_on_file() -> int:
        return sum(
            os.path.realpath(f"/proc/self/fd/{fd}").startswith(str(path))
            for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")
        )

    gc.disable()
    try:
        with pytest.raises(InvalidInput) as error:
            LedgerfoldSession("s", path, policy="v1")  # type: ignore[arg-type]
        assert error.value.field == "policy"
        assert path.exists() and open_on_file() == 0
    finally:
        gc.enable()
