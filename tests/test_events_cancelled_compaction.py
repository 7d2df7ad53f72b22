"""A cancelled `acompact` is reported once, whichever await it was cancelled at (SPEC §17.6,
§17.8). Its store work lands whole or not at all: a plan registered and then left without a
result is recorded `failed`/`abandoned` by the store when the next plan starts (§15.5), and
its `compaction.failed` event (reason `abandoned`) must come, or `stats()` would count a
failure no event reported; a call cancelled before its plan was registered, or after its
result was committed, reports no abandoned plan."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from integration_stores import RecordingStore
from ledgerfold._worker import worker_for

POLICY = lf.CompactionPolicy("cancel-v1", keep_tail=2, min_new_turns=1)
#: A safety net for a failing test, never a timing the test relies on.
NET = 60


async def _summary(request: lf.SummaryRequest) -> str:
    return "A summary."


def _reported(events: list[lf.Event]) -> list[tuple[str, str | None]]:
    return [(e.name, e.reason) for e in events if e.name.startswith("compaction.")]


def _compactor(tmp_path: Path, events: list[lf.Event]) -> tuple[RecordingStore, lf.Compactor]:
    store = RecordingStore(tmp_path / "c.db")
    store.inner.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    return store, lf.Compactor(store, POLICY, _summary, on_event=events.append)  # type: ignore[arg-type]


def _records(store: RecordingStore) -> list[tuple[str, str | None]]:
    """The summary history once the next compaction has run (it records the abandoned)."""
    assert lf.Compactor(store.inner, POLICY).compact("c").accepted
    return [(r.status, r.reason) for r in store.inner.summary_history("c")]


async def _cancel_while_held(compactor: lf.Compactor, store: RecordingStore, method: str) -> None:
    """Cancel `acompact` while its store call `method` runs on the worker."""
    started, release = threading.Event(), threading.Event()
    store.gate[method] = (started, release)
    task = asyncio.create_task(compactor.acompact("c"))
    await asyncio.to_thread(started.wait, NET)
    task.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the call awaiting its job
    del store.gate[method]
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await compactor.acontext("c")  # a later job of the store's worker: reports have run


def _blocker() -> tuple[threading.Event, threading.Event, Any]:
    """A job that holds the store's worker: `held` once it runs, until `hold` is set."""
    hold, held = threading.Event(), threading.Event()

    def block() -> None:
        held.set()
        hold.wait(NET)

    return hold, held, block


def test_cancelled_while_its_plan_is_registered(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    store, compactor = _compactor(tmp_path, events)
    asyncio.run(_cancel_while_held(compactor, store, "begin_compaction"))
    assert _reported(events) == [("compaction.failed", "abandoned")]
    assert _records(store)[0] == ("failed", "abandoned")


def test_cancelled_while_its_commit_runs_reports_the_commit_only(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    store, compactor = _compactor(tmp_path, events)
    asyncio.run(_cancel_while_held(compactor, store, "commit_summary"))
    assert _reported(events) == [("compaction.accepted", None)]
    assert store.inner.current_summary("c") is not None


def test_cancelled_while_its_commit_waits_for_the_worker(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    store, compactor = _compactor(tmp_path, events)
    hold, held, block = _blocker()

    async def holds_the_worker(request: lf.SummaryRequest) -> str:
        worker_for(store).submit(block)  # the commit's job queues behind it
        return "A summary."

    compactor.summarizer = holds_the_worker

    async def scenario() -> None:
        task = asyncio.create_task(compactor.acompact("c"))
        await asyncio.to_thread(held.wait, NET)
        for _ in range(5):
            await asyncio.sleep(0)  # the summarizer's result is in: the commit is queued
        task.cancel()
        await asyncio.sleep(0)  # the cancellation reaches the queued commit: it never runs
        hold.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await compactor.acontext("c")

    asyncio.run(scenario())
    assert "commit_summary" not in store.names()
    assert _reported(events) == [("compaction.failed", "abandoned")]
    assert _records(store)[0] == ("failed", "abandoned")


def test_cancelled_before_its_plan_reports_nothing(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    store, compactor = _compactor(tmp_path, events)
    hold, held, block = _blocker()

    async def scenario() -> Any:
        blocker = asyncio.ensure_future(worker_for(store).run(block))
        await asyncio.to_thread(held.wait, NET)
        task = asyncio.create_task(compactor.acompact("c"))
        await asyncio.sleep(0)  # its first job is queued behind the blocker
        task.cancel()
        await asyncio.sleep(0)
        hold.set()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await task
        return await compactor.acontext("c")

    asyncio.run(scenario())
    assert "begin_compaction" not in store.names()
    assert _reported(events) == []
    assert _records(store) == [("current", None)]
