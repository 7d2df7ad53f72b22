"""`LedgerfoldSession.add_items` does not wait for the compaction it makes due (the built-in
summarizer's): it returns once its items are stored, the compaction runs as the store's next
job in a batch of its own, and every call made after `add_items` returns sees its summary.
`wait_compaction()` gives its outcome. Nothing here is timed: the compaction is held at its
commit (a gate) while the caller is shown to have returned."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration_stores import RecordingStore
from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold._worker import StoreWorker, worker_for
from ledgerfold.integrations.openai_agents import LedgerfoldSession

#: Due at once: every add_items of two or more new turns compacts.
EVERY_CALL = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)


def _exchange(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]


class _Holder:
    """An object a worker can belong to (kept alive by the test)."""


def test_a_job_submitted_after_the_batch_runs_once_its_callers_are_answered() -> None:
    holder = _Holder()
    worker = worker_for(holder)
    gate = threading.Event()
    seen: dict[str, list[bool]] = {}
    batch: list[Any] = []

    def planning(kind: str) -> None:
        def later() -> None:
            seen[kind] = [future.done() for future in batch]

        submit = worker.submit_after_batch if kind == "after" else worker.submit
        submit(later)

    try:
        for kind in ("after", "plain"):
            batch.clear()
            worker.submit(gate.wait, 60)  # holds the worker: what follows is one batch
            batch.append(worker.submit(planning, kind))
            batch.append(worker.submit(int, "2"))
            gate.set()
            assert batch[1].result(60) == 2
            worker.submit(int, "0").result(60)  # after the job `planning` submitted
            gate.clear()
    finally:
        gate.set()
        worker.close()
    # Submitted after the batch, it ran once both callers of that batch had their answers;
    # submitted plainly, it ran inside the batch, before either did.
    assert seen == {"after": [True, True], "plain": [False, False]}


def test_jobs_submitted_after_their_batch_share_the_next_batch() -> None:
    """Deferred jobs queued one after another run as one batch (one commit, one fsync with
    `durability="full"`), still after the callers of the batch that submitted them."""
    batches: list[list[str]] = []

    @contextlib.contextmanager
    def hook() -> Iterator[None]:
        batches.append([])
        yield None

    worker = StoreWorker(lambda: hook)
    gate = threading.Event()

    def job(name: str, *later: str) -> None:
        batches[-1].append(name)
        for each in later:
            worker.submit_after_batch(lambda each=each: batches[-1].append(each))

    try:
        worker.submit(gate.wait, 60)  # holds the worker: a and b are then one batch
        worker.submit(job, "a", "a1", "a2")
        worker.submit(job, "b", "b1")
        gate.set()
    finally:
        gate.set()
        worker.close()  # after the queued jobs
    # The three deferred jobs ran together, after the batch of a and b, not in it.
    assert batches == [["a", "b"], ["a1", "a2", "b1"]]


def test_add_items_returns_before_its_compaction_and_later_calls_see_it(
    tmp_path: Path,
) -> None:
    store = RecordingStore(tmp_path / "d.db")
    started, release = threading.Event(), threading.Event()
    session = LedgerfoldSession("s", store=store, policy=EVERY_CALL)

    async def scenario() -> tuple[bool, list[Any], Any]:
        await session.add_items(_exchange(0) + _exchange(1))
        await session.wait_compaction()
        store.gate["commit_summary"] = (started, release)
        # The compaction this call makes due is held at its commit: were it part of
        # add_items, the call could not return until it is released (20 s: below the
        # gate's own 60 s safety net).
        await asyncio.wait_for(session.add_items(_exchange(2)), 20)
        held = await asyncio.to_thread(started.wait, 60)
        release.set()
        items = await session.get_items()  # queued behind the compaction
        return held, items, await session.wait_compaction()

    try:
        held, items, outcome = asyncio.run(scenario())
    finally:
        release.set()
        store.inner.close()
    assert held
    assert outcome is not None and outcome.accepted
    # The summary covers up to q2; the newest two turns stay raw.
    assert items[0]["role"] == "system" and items[1:] == _exchange(2)


def test_wait_compaction_gives_the_latest_add_items_outcome(tmp_path: Path) -> None:
    never = CompactionPolicy("v1", keep_tail=2, trigger_tokens=10**9)
    quiet = LedgerfoldSession("q", tmp_path / "q.db", policy=never)
    busy = LedgerfoldSession("b", tmp_path / "b.db", policy=EVERY_CALL)

    async def scenario() -> list[Any]:
        before = await quiet.wait_compaction()
        await quiet.add_items(_exchange(0))
        skipped = await quiet.wait_compaction()
        await busy.add_items(_exchange(0) + _exchange(1))
        accepted = await busy.wait_compaction()
        again = await busy.wait_compaction()  # the same outcome, not a new compaction
        return [before, skipped, accepted, again]

    try:
        before, skipped, accepted, again = asyncio.run(scenario())
    finally:
        quiet.close()
        busy.close()
    assert before is None
    assert skipped.status == "skipped" and skipped.reason == "not-due"
    assert accepted.accepted and again is accepted


def test_a_deferred_compaction_that_raises_is_logged_and_raised_by_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "e.db")
    session = LedgerfoldSession("s", store=store, policy=EVERY_CALL)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in a store of one's own")

    monkeypatch.setattr(store, "commit_summary", broken)

    async def scenario() -> BaseException | None:
        await session.add_items(_exchange(0) + _exchange(1))  # returns: the append landed
        try:
            await session.wait_compaction()
        except RuntimeError as error:
            return error
        return None

    caplog.set_level(logging.ERROR, logger="ledgerfold")
    try:
        error = asyncio.run(scenario())
        assert len(store.load("s").turns) == 4
    finally:
        store.close()
    assert isinstance(error, RuntimeError)
    logged = [r.getMessage() for r in caplog.records if "deferred compaction" in r.getMessage()]
    assert logged == ["deferred compaction failed conversation_id=s error_type=RuntimeError"]


def test_the_events_of_a_deferred_compaction_come_before_the_next_call_returns(
    tmp_path: Path,
) -> None:
    seen: list[str] = []
    session = LedgerfoldSession("s", tmp_path / "v.db", policy=EVERY_CALL, on_event=None)
    session.compactor.on_event = lambda event: seen.append(event.name)

    async def scenario() -> list[str]:
        await session.add_items(_exchange(0) + _exchange(1))
        await session.get_items()
        return list(seen)

    try:
        assert asyncio.run(scenario()) == ["compaction.accepted"]
    finally:
        session.close()


def test_closing_right_after_add_items_lets_the_compaction_land(tmp_path: Path) -> None:
    """`close()` of the store the session opened finishes the queued deferred compaction
    before the connection closes: nothing is left half done."""
    session = LedgerfoldSession("s", tmp_path / "c.db", policy=EVERY_CALL)
    asyncio.run(session.add_items(_exchange(0) + _exchange(1)))
    session.close()  # no wait_compaction
    with SQLiteStore(tmp_path / "c.db") as store:
        summary = store.current_summary("s")
        assert summary is not None and len(summary.source_ids) == 2


def test_add_items_below_the_trigger_reads_the_context_once(tmp_path: Path) -> None:
    """The due check of an `add_items` that does not reach the trigger: one read of the
    context (the trigger asked once in its job, not again by the plan's start)."""
    store = RecordingStore(tmp_path / "l.db")
    policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=100_000, min_new_turns=2)
    session = LedgerfoldSession("s", store=store, policy=policy)  # type: ignore[arg-type]

    async def main() -> list[str]:
        await session.add_items(_exchange(0))
        store.calls.clear()
        await session.add_items(_exchange(1))
        outcome = await session.wait_compaction()
        assert outcome is not None and outcome.status == "skipped"
        return store.names()

    try:
        names = asyncio.run(main())
    finally:
        store.inner.close()
    assert names.count("context") == 1, names
