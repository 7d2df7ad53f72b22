"""`LedgerfoldSession`'s items as turns (`integrations/_agents_items.py`, SPEC §17.2): every
kind of call stays with its result, parallel calls and a reasoning item with what follows
them, through compaction; a result whose call is not served is left out; turns the session
did not write read back as items of their role and text."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold.integrations._agents_items import CALL_OUTPUTS, item_groups, item_message, link_id
from ledgerfold.integrations.openai_agents import LedgerfoldSession

#: Compacts everything but the newest turn whenever one turn is new.
EAGER = CompactionPolicy("v1", keep_tail=1, trigger_tokens=None, min_new_turns=1)


def _user(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"question {n}"}


def _reasoning(n: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": "opaque"}


CALLS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "function": (
        {"type": "function_call", "call_id": "f1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "f1", "output": "found"},
    ),
    "custom": (
        {"type": "custom_tool_call", "call_id": "k1", "name": "patch", "input": "diff"},
        {"type": "custom_tool_call_output", "call_id": "k1", "output": "applied"},
    ),
    "computer": (
        {"type": "computer_call", "call_id": "m1", "id": "cu_1", "action": {"type": "click"}},
        {"type": "computer_call_output", "call_id": "m1", "output": {"type": "input_image"}},
    ),
    "local_shell": (
        {"type": "local_shell_call", "call_id": "s1", "id": "ls_1", "action": {"type": "exec"}},
        {"type": "local_shell_call_output", "id": "s1", "call_id": "s1", "output": "ok"},
    ),
    "program": (
        {"type": "program", "call_id": "p1", "code": "print(1)"},
        {"type": "program_output", "call_id": "p1", "output": "1"},
    ),
    "tool_search": (
        {"type": "tool_search_call", "call_id": "q1", "query": "weather"},
        {"type": "tool_search_output", "call_id": "q1", "results": []},
    ),
}


def test_a_call_its_result_parallel_calls_and_reasoning_share_a_group() -> None:
    call, output = CALLS["custom"]
    other = {**call, "call_id": "k2"}
    other_output = {**output, "call_id": "k2"}
    preamble = {"role": "assistant", "content": "Let me check."}
    items = [_user(0), _reasoning(0), preamble, call, other, output, other_output, _user(1)]
    groups = item_groups(items, [f"t{n}" for n in range(len(items))])
    assert groups[0] is None and groups[-1] is None
    assert len(set(groups[1:7])) == 1 and groups[1] is not None  # one response, its results
    # A reasoning item and the answer it led to; an answer alone needs no group.
    answer = {"role": "assistant", "content": "Done."}
    paired = item_groups([_user(0), _reasoning(1), answer, _user(1), answer], list("abcde"))
    assert paired[1] == paired[2] is not None and paired[4] is None


@pytest.mark.parametrize(
    ("call", "result"),
    [
        ({"type": "program", "call_id": "p1"}, {"type": "program_output", "call_id": "p1"}),
        (
            {"type": "tool_search_call", "call_id": "s1"},
            {"type": "tool_search_output", "call_id": "s1"},
        ),
        (
            {"type": "mcp_approval_request", "id": "ap1", "name": "delete"},
            {"type": "mcp_approval_response", "approval_request_id": "ap1", "approve": True},
        ),
    ],
)
def test_the_sdks_other_pairs_are_linked(call: dict[str, Any], result: dict[str, Any]) -> None:
    made, answered = item_message(call), item_message(result)
    assert made["tool_calls"][0]["id"] == answered["tool_call_id"] == link_id(call)
    assert item_groups([call], ["a"])[0] == item_groups([call, result], ["a", "b"])[1] is not None


def _served(session: LedgerfoldSession) -> list[Any]:
    return asyncio.run(session.get_items())


def _assert_sendable(items: list[Any]) -> None:
    """Every result follows its call, with nothing but its response and results between
    them, and every call is served with the reasoning item of its response."""
    open_calls: set[str] = set()
    reasoned = False
    for at, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in CALL_OUTPUTS.values() or kind.endswith("_call_output"):
            assert item["call_id"] in open_calls, (at, items)
        elif kind in CALL_OUTPUTS or kind.endswith("_call"):
            assert reasoned, (at, items)
            open_calls.add(item["call_id"])
        elif kind == "reasoning":
            reasoned = True
        elif item.get("role") != "assistant":  # an input: the response has ended
            open_calls.clear()
            reasoned = False


@pytest.mark.parametrize("kind", sorted(CALLS))
def test_compaction_never_serves_a_result_without_its_call(tmp_path: Path, kind: str) -> None:
    call, output = CALLS[kind]
    with SQLiteStore(tmp_path / "s.db") as store:
        session = LedgerfoldSession("s", store=store, policy=EAGER)
        for n in range(4):
            calls = [{**call, "call_id": f"{call['call_id']}-{n}-{k}"} for k in range(2)]
            outputs = [{**output, "call_id": f"{call['call_id']}-{n}-{k}"} for k in range(2)]
            # The results arrive in the next add_items, as after a tool run.
            preamble = {"role": "assistant", "content": f"Checking {n}."}
            asyncio.run(session.add_items([_user(n), _reasoning(n), preamble, *calls]))
            _assert_sendable(_served(session))
            asyncio.run(session.add_items(outputs))
            _assert_sendable(_served(session))
        assert store.current_summary("s") is not None  # compaction did run


def test_a_user_interjecting_before_the_result_gets_it_served_with_its_call(
    tmp_path: Path,
) -> None:
    """The user speaks while the tool runs (call, user, result): the result is served right
    after its call and the user's message after it, so the SDK's Chat Completions
    conversion answers the `tool_calls` message with the tool message right after it."""
    from agents.models.chatcmpl_converter import Converter

    call, output = CALLS["function"]
    interjection = {"role": "user", "content": "and a hotel, please"}
    with SQLiteStore(tmp_path / "s.db") as store:
        session = LedgerfoldSession("s", store=store)
        asyncio.run(session.add_items([_user(0), call, interjection, output]))
        assert _served(session) == [_user(0), call, output, interjection]
        messages = Converter.items_to_messages(_served(session))
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
        assert len(store.load("s").turns) == 4  # the ledger keeps its own order


def test_a_result_whose_call_is_not_served_is_left_out(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        session = LedgerfoldSession("s", store=store)
        asyncio.run(
            session.add_items(
                [_user(0), {"type": "function_call_output", "call_id": "gone", "output": "x"}]
            )
        )
        assert _served(session) == [_user(0)]
        assert len(store.load("s").turns) == 2  # the ledger keeps it


def test_turns_the_session_did_not_write_read_back_as_items(tmp_path: Path) -> None:
    calls = json.dumps(
        [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    )
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("s", "system", "You are a travel agent.")
        store.append("s", "user", "hi")
        store.append("s", "assistant", "checking", meta={"tool_calls": calls})
        store.append("s", "tool", "sunny", meta={"tool_call_id": "c9"})
        session = LedgerfoldSession("s", store=store)
        assert _served(session) == [
            {"role": "system", "content": "You are a travel agent."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "checking"},
            {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c9", "output": "sunny"},
        ]
        popped = asyncio.run(session.pop_item())
        assert popped == {"type": "function_call_output", "call_id": "c9", "output": "sunny"}
        assert [t.body for t in store.load("s").turns] == [
            "You are a travel agent.",
            "hi",
            "checking",
        ]


def test_a_damaged_verbatim_copy_reads_back_as_the_turns_role_and_text(tmp_path: Path) -> None:
    """Another tool rewrote a turn's `agents_item` (not JSON, or not a JSON object): the
    session serves and pops that turn as a turn it did not write (the SDK's own sessions
    skip a row that is not JSON), rather than failing every `get_items` from then on."""
    with SQLiteStore(tmp_path / "d.db") as store:
        session = LedgerfoldSession("s", store=store)
        call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
        asyncio.run(session.add_items([{"role": "user", "content": "hi"}, call, output]))
        hi, calling, _ = store.load("s").turns
        store.edit("s", hi.id, meta={"agents_item": "{not json"})
        store.edit("s", calling.id, meta={**(calling.meta or {}), "agents_item": "[1]"})
        assert _served(session) == [{"role": "user", "content": "hi"}, call, output]
        assert asyncio.run(session.pop_item()) == output
        assert asyncio.run(session.pop_item()) == call
        assert asyncio.run(session.pop_item()) == {"role": "user", "content": "hi"}
        assert _served(session) == []


# -- the session's memo of restored turns against a fresh read (differential) ----------------

_STEP = st.sampled_from(["message", "call", "output", "call+output", "nested", "pop"])


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=14), keep_tail=st.integers(1, 4))
def test_get_items_with_the_memo_equals_a_session_reading_afresh(
    tmp_path_factory: pytest.TempPathFactory, steps: list[str], keep_tail: int
) -> None:
    """After every step, `get_items` of a session that has served the context before (its
    memo of restored turns warm) equals that of a new session over the same store (memo
    empty): calls, results (also a result served before its call), items with nested lists,
    pops and compactions included; and changing what one call returned changes nothing
    later."""
    store = SQLiteStore(tmp_path_factory.mktemp("memo") / "f.db")
    policy = CompactionPolicy("v1", keep_tail=keep_tail, trigger_tokens=None, min_new_turns=2)
    warm = LedgerfoldSession("s", store=store, policy=policy)
    calls = 0

    def items_of(step: str) -> list[dict[str, Any]]:
        nonlocal calls
        calls += 1
        call_id = f"c{calls}"
        call = {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": call_id, "output": f"out {calls}"}
        if step == "call":
            return [call]
        if step == "output":  # answers the newest call made so far, if any
            return [{**output, "call_id": f"c{calls - 1}"}]
        if step == "call+output":
            return [call, output]
        if step == "nested":
            return [{"role": "user", "content": [{"type": "input_text", "text": f"n{calls}"}]}]
        return [_user(calls)]

    async def scenario() -> None:
        for step in steps:
            if step == "pop":
                await warm.pop_item()
            else:
                await warm.add_items(items_of(step))
            served = await warm.get_items()
            fresh = await LedgerfoldSession("s", store=store, policy=policy).get_items()
            assert served == fresh
            for item in served:  # a caller changing what it got changes nothing later
                if isinstance(item, dict):
                    item["changed"] = True
                    if isinstance(item.get("content"), list):
                        item["content"].append("x")
            assert await warm.get_items() == fresh

    try:
        asyncio.run(scenario())
    finally:
        store.close()
