"""The integrations' per-call work follows the new messages, not the state (the issue's
"cheap per-call integration"): over a store that is only the `Store` protocol, one model call
of `LedgerfoldMiddleware` and one exchange of `LedgerfoldSession` ask the store the same
calls, for the same number of rows, with 2,000 messages in the state as with 100. Counted in
store calls and the turns and items they return, never in time."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.integrations.openai_agents import LedgerfoldSession

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from protocol_only import ProtocolOnly  # noqa: E402

POLICY = lf.CompactionPolicy("per-call", keep_tail=8, trigger_tokens=4000)
ROUNDS = 6


class Counting:
    """Forwards to `inner` (a `ProtocolOnly`); counts each call and the rows it returns."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.rows = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = target(*args, **kwargs)
            if isinstance(result, (list, tuple, set, frozenset)):
                self.rows += len(result)
            for attribute in ("turns", "items"):
                value = getattr(result, attribute, None)
                if isinstance(value, tuple):
                    self.rows += len(value)
            return result

        return call

    def reset(self) -> None:
        self.calls.clear()
        self.rows = 0


def _text(n: int) -> str:
    return f"message {n}: " + "the reservation, its bags and its seats " * 4


def _compact_fully(compactor: lf.Compactor, conversation_id: str) -> None:
    while compactor.compact(conversation_id, force=True).accepted:
        pass


def _middleware_work(path: Path, size: int) -> tuple[Counter[str], int]:
    from langchain_core.messages import AIMessage, HumanMessage

    inner = lf.SQLiteStore(path, durability="normal")
    store = Counting(ProtocolOnly(inner, searchable=True))
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    state: list[Any] = [
        (HumanMessage if n % 2 == 0 else AIMessage)(_text(n), id=f"m{n}") for n in range(size)
    ]
    middleware.append_new(state)
    _compact_fully(middleware.compactor, "c")
    middleware.pre_model_hook({"messages": state})  # the instance has seen the state
    store.reset()
    for n in range(size, size + ROUNDS):
        state = [*state, HumanMessage(_text(n), id=f"h{n}")]
        middleware.pre_model_hook({"messages": state})
        state = [*state, AIMessage("ok", id=f"a{n}")]
    inner.close()
    return store.calls, store.rows


def _session_work(path: Path, size: int) -> tuple[Counter[str], int]:
    inner = lf.SQLiteStore(path, durability="normal")
    store = Counting(ProtocolOnly(inner, searchable=True))
    session = LedgerfoldSession("s", store=store, policy=POLICY)
    items = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": _text(n)} for n in range(size)
    ]

    async def scenario() -> None:
        await session.add_items(items)
        _compact_fully(session.compactor, "s")
        await session.get_items()
        store.reset()
        for n in range(size, size + ROUNDS):
            await session.add_items(
                [{"role": "user", "content": _text(n)}, {"role": "assistant", "content": "ok"}]
            )
            await session.get_items()
        await session.wait_compaction()  # the last call's, if due, counted in both runs

    asyncio.run(scenario())
    inner.close()
    return store.calls, store.rows


def test_the_middlewares_store_work_per_call_does_not_grow_with_the_state(tmp_path: Path) -> None:
    small = _middleware_work(tmp_path / "small.db", 100)
    large = _middleware_work(tmp_path / "large.db", 2000)
    assert "load" not in large[0] and "get_turns" not in large[0]
    assert large == small


def test_the_sessions_store_work_per_exchange_does_not_grow_with_the_ledger(
    tmp_path: Path,
) -> None:
    small = _session_work(tmp_path / "small.db", 100)
    large = _session_work(tmp_path / "large.db", 2000)
    assert "load" not in large[0]
    assert large == small
