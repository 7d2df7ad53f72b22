"""The integrations take any `Store` and use no private name of it (SPEC §17.6, §17.9): not
even a look-up. A store of one's own may answer a look-up of a private name any way it
likes — here a proxy over a real `SQLiteStore` file raises `RuntimeError` (not
`AttributeError`, which `getattr(store, name, None)` would swallow) — and every async entry
point (the session, the compactor's `acompact`/`acontext`, the middleware's async hook, the
recall tools) must still work, its store work on the store's worker thread."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

import ledgerfold as lf
from langchain_support import LookingUp as ChatModel
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.integrations.openai_agents import LedgerfoldSession

POLICY = lf.CompactionPolicy("v1", keep_tail=3, trigger_tokens=None, min_new_turns=2)


class NoPrivateNames:
    """Forwards public names to `inner`, recording the thread of each call; a private name
    (one `_` and not a dunder) is recorded in `private` and raises `RuntimeError`."""

    def __init__(self, inner: lf.SQLiteStore) -> None:
        self.inner = inner
        self.private: list[str] = []
        self.threads: set[threading.Thread] = set()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            self.private.append(name)
            raise RuntimeError(f"{name}: a private name of the store was looked up")
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.current_thread())
            return target(*args, **kwargs)

        return call


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_the_async_entry_points_look_up_no_private_name(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "own.db") as inner:
        store = NoPrivateNames(inner)
        session = LedgerfoldSession("s", store=store, policy=POLICY)  # type: ignore[arg-type]
        compactor = lf.Compactor(store, POLICY)  # type: ignore[arg-type]
        tool = session.recall_tool()

        async def scenario() -> tuple[list[Any], Any, threading.Thread]:
            for n in range(4):
                await session.add_items([_user(f"question {n}"), _user(f"follow-up {n}")])
            items = await session.get_items()
            popped = await session.pop_item()
            await tool.on_invoke_tool(None, json.dumps({"query": "question"}))
            await compactor.acompact("s", force=True)
            await compactor.acontext("s")
            await session.clear_session()
            return items, popped, threading.current_thread()

        items, popped, loop_thread = asyncio.run(scenario())
        assert items[0]["role"] == "system" and popped == _user("follow-up 3")
        assert store.private == []
        assert store.threads and loop_thread not in store.threads


def test_the_middlewares_async_hook_looks_up_no_private_name(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "own.db") as inner:
        store = NoPrivateNames(inner)
        middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)  # type: ignore[arg-type]
        assert middleware.recall_tool is not None
        agent = create_agent(
            ChatModel(), tools=[], middleware=[middleware], checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "t1"}}

        async def scenario() -> threading.Thread:
            for n in range(4):
                await agent.ainvoke({"messages": [_user(f"R{n}?")]}, config)
            await middleware.recall_tool.ainvoke({"query": "R1"})  # type: ignore[union-attr]
            return threading.current_thread()

        loop_thread = asyncio.run(scenario())
        assert inner.current_summary("c") is not None
        assert store.private == []
        assert store.threads and loop_thread not in store.threads
