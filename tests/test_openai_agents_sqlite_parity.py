"""`LedgerfoldSession` against the Agents SDK's own `SQLiteSession`: for the same sequences of
`add_items`, `pop_item`, `get_items` and `clear_session`, before any compaction (a policy
whose trigger is never reached), the items seen agree — except where SPEC says otherwise:
a call's result whose call is not sent is left out (§17.2; the differential never adds a
result before its call). `session_settings` is honoured as the SDK's sessions honour it:
its `limit` applies to `get_items()` without one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from agents import SQLiteSession
from agents.memory import SessionSettings
from hypothesis import HealthCheck, assume, given, settings
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
    st.tuples(st.just("get"), st.one_of(st.none(), st.integers(0, 4))),
    st.tuples(st.just("clear"), st.none()),
)


def _results_follow_calls(ops: list[tuple[str, Any]]) -> bool:
    called: set[str] = set()
    for name, items in ops:
        for item in items if name == "add" else ():
            if item.get("type") == "function_call":
                called.add(item["call_id"])
            elif item.get("type") == "function_call_output" and item["call_id"] not in called:
                return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(_OP, max_size=10))
def test_the_items_agree_with_the_sdks_sqlite_session(tmp_path_factory: Any, ops: Any) -> None:
    assume(_results_follow_calls(ops))
    folder = tmp_path_factory.mktemp("parity")
    reference = SQLiteSession("s", str(folder / "sdk.db"))
    store = SQLiteStore(folder / "ledger.db")
    ours = LedgerfoldSession("s", store=store, policy=NEVER)

    async def scenario() -> None:
        for name, argument in ops:
            if name == "add":
                await reference.add_items(json.loads(json.dumps(argument)))
                await ours.add_items(json.loads(json.dumps(argument)))
            elif name == "pop":
                assert await ours.pop_item() == await reference.pop_item()
            elif name == "get":
                assert await ours.get_items(argument) == await reference.get_items(argument)
            else:
                await reference.clear_session()
                await ours.clear_session()
        assert await ours.get_items() == await reference.get_items()

    try:
        asyncio.run(scenario())
    finally:
        reference.close()
        store.close()


def test_session_settings_limit_applies_without_an_explicit_limit(tmp_path: Path) -> None:
    items = [{"role": "user", "content": f"m{n}"} for n in range(4)]
    for session_settings in (SessionSettings(limit=2), {"limit": 2}):
        reference = SQLiteSession("s", str(tmp_path / "sdk.db"), session_settings=session_settings)
        ours = LedgerfoldSession(
            "s", tmp_path / "ledger.db", policy=NEVER, session_settings=session_settings
        )

        async def scenario() -> None:
            await reference.add_items(items)
            await ours.add_items(items)
            assert await ours.get_items() == await reference.get_items() == items[-2:]
            assert await ours.get_items(3) == await reference.get_items(3) == items[-3:]
            await reference.clear_session()
            await ours.clear_session()

        asyncio.run(scenario())
        reference.close()
        ours.close()
