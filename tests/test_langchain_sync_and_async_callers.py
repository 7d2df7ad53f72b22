"""One `LedgerfoldMiddleware` serving sync and async runs at once (a web server with both
kinds of endpoint over one agent): the async hook's store work runs on the store's worker,
inside a group-commit batch that holds the store while its jobs run (SPEC §17.6), and the
sync hook's on the calling thread. Neither may wait for the other while holding something
the other needs: the middleware never holds its own lock across a store call."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_support import LookingUp
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

#: A safety net for a failing (deadlocked) run, never a timing the test relies on.
NET = 60


def test_a_sync_call_inside_the_store_does_not_deadlock_the_async_hook(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "shared.db")  # durability "full": batches group-commit
    middleware = LedgerfoldMiddleware(store, "async-run", recall=False)
    real_known_ids = store.known_ids
    sync_in_store, release_sync = threading.Event(), threading.Event()
    sync_thread: list[threading.Thread] = []

    def known_ids(conversation_id: str, ids: Any) -> set[str]:
        if threading.current_thread() in sync_thread:
            sync_in_store.set()  # the sync call is inside its store call now
            release_sync.wait(NET)
        return real_known_ids(conversation_id, ids)

    store.known_ids = known_ids  # type: ignore[method-assign]
    sync_done: list[int] = []
    sync = threading.Thread(
        target=lambda: sync_done.append(
            middleware.append_new([HumanMessage("sync hello", id="s1")], "sync-run")
        ),
        daemon=True,
    )
    sync_thread.append(sync)

    # Another async caller of the store whose job holds the worker's batch open: its
    # token counter (run in the job, on the worker) waits for `open_batch`.
    counting, open_batch = threading.Event(), threading.Event()

    def counter(text: str) -> int:
        if threading.current_thread() is not sync:
            counting.set()
            open_batch.wait(NET)
        return len(text.split())

    blocking = Compactor(
        store, CompactionPolicy("block", keep_tail=2, trigger_tokens=1, token_counter=counter)
    )
    store.append("other", "user", "a turn to count")
    request = ModelRequest(model=LookingUp(), messages=[HumanMessage("async hello", id="a1")])

    async def handler(prepared: Any) -> AIMessage:
        return AIMessage("ok")

    async def scenario() -> bool:
        sync.start()
        await asyncio.to_thread(sync_in_store.wait, NET)
        held = asyncio.ensure_future(blocking.acompact("other"))
        await asyncio.to_thread(counting.wait, NET)  # the batch is open on the worker
        hook = asyncio.ensure_future(middleware.awrap_model_call(request, handler))
        for _ in range(5):
            await asyncio.sleep(0)  # its job is queued behind, in the same batch
        release_sync.set()  # the sync call goes on into the store
        open_batch.set()
        _, pending = await asyncio.wait({held, hook}, timeout=NET)
        return not pending

    assert asyncio.run(scenario()), "the async hook deadlocked with the sync call"
    sync.join(NET)
    assert sync_done == [1]
    assert [t.body for t in store.load("async-run").turns] == ["async hello"]
    assert [t.body for t in store.load("sync-run").turns] == ["sync hello"]
    store.close()
