"""`LedgerfoldSession` against the Agents SDK's own `SQLiteSession`: for the same sequences of
`add_items`, `pop_item`, `get_items` and `clear_session`, before any compaction (a policy
whose trigger is never reached), the items seen agree — except where SPEC says otherwise:
a call's result whose call is not sent is left out (§17.2), one that came after a user
message is sent with its call, before the message (§17.2), a reasoning item that no item the
model wrote follows is left out (the Responses API refuses it), and retracting a call takes
its results along (the differential adds no result before its call). `pop_item` takes the
item `get_items` sends last, with the items after it that are not sent, where the SDK's
session pops its newest item: the SDK's rewind compares what `get_items(limit=n)` gives with
the next `n` pops. `session_settings` is
honoured as the SDK's sessions honour it: its `limit` applies to `get_items()` without one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from agents.memory import SessionSettings
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession

#: Never due: the context is every live turn, as the SDK's session keeps every item.
NEVER = CompactionPolicy("never-due", keep_tail=8, trigger_tokens=10**9)

_TEXT = st.text(alphabet="ab c\n", max_size=5)
_CALL_ID = st.sampled_from(["call_1", "call_2"])
_ITEM = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, _TEXT),
    st.builds(lambda t: {"role": "system", "content": t}, _TEXT),
    st.builds(lambda t: {"role": "assistant", "content": t}, _TEXT),
    st.builds(
        lambda t: {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        },
        _TEXT,
    ),
    st.builds(
        lambda c: {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"},
        _CALL_ID,
    ),
    st.builds(
        lambda c, o: {"type": "function_call_output", "call_id": c, "output": o}, _CALL_ID, _TEXT
    ),
    st.builds(
        lambda t: {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": t}],
        },
        _TEXT,
    ),
)
_OP = st.one_of(
    st.tuples(st.just("add"), st.lists(_ITEM, max_size=3)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-2, 4))),
    st.tuples(st.just("clear"), st.none()),
)


def _answered_live(reference: list[Any], items: list[Any]) -> bool:
    """Whether every result among `items` answers a call live before it (the SDK's items,
    then `items`): otherwise the ledger's unit rule (§17.2) differs from the SDK's."""
    called = {item["call_id"] for item in reference if item.get("type") == "function_call"}
    for item in items:
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        elif item.get("type") == "function_call_output" and item["call_id"] not in called:
            return False
    return True


def _is_input(item: Any) -> bool:
    return item.get("type", "message") == "message" and item.get("role") != "assistant"


def _followed(items: list[Any], order: list[int], at: int) -> bool:
    """Whether `items[order[at]]` is sent: any item but a reasoning one; a reasoning item when
    the first item after it that is not one is an item the model wrote (not a message to the
    model, not a result)."""
    if items[order[at]].get("type") != "reasoning":
        return True
    after = [items[n] for n in order[at + 1 :] if items[n].get("type") != "reasoning"]
    return (
        bool(after) and not _is_input(after[0]) and after[0].get("type") != "function_call_output"
    )


def _sent_at(items: list[Any]) -> list[int]:
    """The positions of the SDK's items the session sends, in the order sent: no result whose
    call is not sent, and a call's first result that came after a message to the model (a
    user interjecting) sent before the first such message after its call (§17.2)."""
    maker: dict[str, int] = {}
    first: dict[int, int] = {}  # call's position -> its first result's
    for at, item in enumerate(items):
        if item.get("type") == "function_call":
            maker[item["call_id"]] = at
        elif item.get("type") == "function_call_output" and item["call_id"] in maker:
            first.setdefault(maker[item["call_id"]], at)
    order = [
        at
        for at, item in enumerate(items)
        if item.get("type") != "function_call_output"
        or any(item["call_id"] == items[call].get("call_id") for call in range(at))
    ]
    for call, result in sorted(first.items()):
        between = [at for at in order if call < at < result and _is_input(items[at])]
        if between:
            order.remove(result)
            order.insert(order.index(between[0]), result)
    return [n for at, n in enumerate(order) if _followed(items, order, at)]


def _sent(items: list[Any], limit: int | None = None) -> list[Any]:
    """The SDK's items as the session sends them (`_sent_at`), the latest `limit` of them."""
    sent = [items[at] for at in _sent_at(items)]
    if limit is None or limit < 0:  # a negative limit is none (SQLite's LIMIT -1)
        return sent
    return sent[-limit:] if limit > 0 else []


async def _popped(reference: SQLiteSession) -> Any:
    """What the session's `pop_item` gives: the item it sends last, not the SDK's newest item
    (the SDK's rewind reads `get_items(limit=n)` and compares those items with the next `n`
    pops), taken with the items after it that are not sent. The reference loses the same:
    popped back to that item, the items after it that are sent (a result sent before a
    message) added again."""
    items = await reference.get_items()
    order = _sent_at(items)
    if not order:
        return None
    last = order[-1]
    kept = [items[at] for at in range(last + 1, len(items)) if at in order]
    for _ in range(len(items) - last):
        await reference.pop_item()
    if kept:
        await reference.add_items(kept)
    return items[last]


_USER = {"role": "user", "content": "a"}
_CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
_RESULT = {"type": "function_call_output", "call_id": "call_1", "output": "b"}
_REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(_OP, max_size=10))
# A run stopped after a reasoning item: `pop_item` takes the user's message, not it.
@example(ops=[("add", [_USER, _REASONING]), ("pop", None), ("pop", None)])
# A result sent before the user message it came after: the message is popped first.
@example(ops=[("add", [_CALL]), ("add", [_USER]), ("add", [_RESULT]), ("pop", None)])
def test_the_items_agree_with_the_sdks_sqlite_session(tmp_path_factory: Any, ops: Any) -> None:
    folder = tmp_path_factory.mktemp("parity")
    reference = SQLiteSession("s", str(folder / "sdk.db"))
    store = SQLiteStore(folder / "ledger.db")
    ours = LedgerfoldSession("s", store=store, policy=NEVER)

    async def scenario() -> None:
        for name, argument in ops:
            if name == "add":
                assume(_answered_live(await reference.get_items(), argument))
                await reference.add_items(json.loads(json.dumps(argument)))
                await ours.add_items(json.loads(json.dumps(argument)))
            elif name == "pop":
                assert await ours.pop_item() == await _popped(reference)
            elif name == "get":
                full = await reference.get_items()
                assert await ours.get_items(argument) == _sent(full, argument)
            else:
                await reference.clear_session()
                await ours.clear_session()
        assert await ours.get_items() == _sent(await reference.get_items())

    try:
        asyncio.run(scenario())
    finally:
        reference.close()
        store.close()


async def _limited(reference: SQLiteSession, ours: LedgerfoldSession) -> None:
    items = [{"role": "user", "content": f"m{n}"} for n in range(4)]
    await reference.add_items(items)  # type: ignore[arg-type]
    await ours.add_items(items)
    assert await ours.get_items() == await reference.get_items() == items[-2:]
    assert await ours.get_items(3) == await reference.get_items(3) == items[-3:]
    await reference.clear_session()
    await ours.clear_session()


def test_session_settings_limit_applies_without_an_explicit_limit(tmp_path: Path) -> None:
    for session_settings in (SessionSettings(limit=2), {"limit": 2}):
        reference = SQLiteSession("s", str(tmp_path / "sdk.db"), session_settings=session_settings)
        ours = LedgerfoldSession(
            "s", tmp_path / "ledger.db", policy=NEVER, session_settings=session_settings
        )
        asyncio.run(_limited(reference, ours))
        reference.close()
        ours.close()


def test_a_negative_or_zero_limit_is_the_sdks(tmp_path: Path) -> None:
    """The SDK's `SQLiteSession` passes `limit` to SQLite's `LIMIT`: a negative one is no
    limit (every item), 0 is none; so does `session_settings`' limit."""
    items = [{"role": "user", "content": f"m{n}"} for n in range(4)]

    async def compare(reference: SQLiteSession, ours: LedgerfoldSession) -> None:
        await reference.add_items(json.loads(json.dumps(items)))
        await ours.add_items(json.loads(json.dumps(items)))
        for limit in (None, -1, -7, 0, 1, 3, 10):
            assert await ours.get_items(limit) == await reference.get_items(limit), limit

    for n, session_settings in enumerate((None, {"limit": -1}, SessionSettings(limit=0))):
        reference = SQLiteSession(
            "s", str(tmp_path / f"sdk{n}.db"), session_settings=session_settings
        )
        ours = LedgerfoldSession(
            "s", tmp_path / f"ledger{n}.db", policy=NEVER, session_settings=session_settings
        )
        try:
            asyncio.run(compare(reference, ours))
        finally:
            reference.close()
            ours.close()


def test_session_settings_given_as_a_mapping_serve_the_runner(tmp_path: Path) -> None:
    """The SDK's sessions take `session_settings` as a mapping and keep a `SessionSettings`,
    which `Runner.run` reads (`session.session_settings.limit`, `.resolve(...)`)."""
    from agents import Agent, RunConfig, Runner

    from test_openai_agents import ScriptedModel, lookup

    ours = LedgerfoldSession("s", tmp_path / "ledger.db", session_settings={"limit": 2})
    reference = SQLiteSession("s", str(tmp_path / "sdk.db"), session_settings={"limit": 2})
    try:
        assert ours.session_settings == reference.session_settings == SessionSettings(limit=2)
        agent = Agent("a", model=ScriptedModel(), tools=[lookup])
        asyncio.run(Runner.run(agent, "Look up R1.", session=ours))
        config = RunConfig(session_settings=SessionSettings(limit=3))
        asyncio.run(Runner.run(agent, "Look up R2.", session=ours, run_config=config))
        assert len(asyncio.run(ours.get_items())) == 2
    finally:
        ours.close()
        reference.close()


def test_session_settings_on_an_sdk_without_them_are_kept_as_given(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The declared minimum SDK (`openai-agents>=0.2`) predates `SessionSettings`: there the
    session keeps what it was given (its `limit` still applies) instead of failing to import
    the SDK's module."""
    import sys

    monkeypatch.setitem(sys.modules, "agents.memory.session_settings", None)  # not importable
    ours = LedgerfoldSession(
        "s", tmp_path / "ledger.db", policy=NEVER, session_settings={"limit": 1}
    )
    try:
        assert ours.session_settings == {"limit": 1}
        asyncio.run(
            ours.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        )
        assert asyncio.run(ours.get_items()) == [{"role": "user", "content": "b"}]
    finally:
        ours.close()
