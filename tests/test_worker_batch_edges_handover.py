"""The store worker hands the GIL to a caller's event loop with a timer due also where a
batch has no async caller of its own and before a batch's commit: a job submitted after its
batch (`submit_after_batch`, a compaction `add_items` defers) hands over to the loop of the
job that submitted it, and the worker looks for due work once a batch's last job has run,
before the commit that no pause breaks. Orders only; nothing here is timed (no periodic
yield, no cap on a hand-over's wait, no forced switch of the GIL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pytest

import ledgerfold._worker as worker_module
from handover_support import Holder, RecordedWaits, busy, no_forced_switch, steps_until
from ledgerfold._handover import HandOver
from ledgerfold._worker import StoreWorker, worker_for


@pytest.fixture(autouse=True)
def _only_due_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)  # no periodic yield
    monkeypatch.setattr(worker_module, "HANDOVER_S", 60.0)  # no cap: the order is certain


def test_a_job_submitted_after_its_batch_hands_over_to_the_submitting_caller_s_loop() -> None:
    """The caller, with a timer set for 10 ms, runs a job that defers one of 400 steps of
    1 ms with a pause after each, and awaits it: the timer runs at the deferred job's first
    pause after it came due (without the submitter's loop that job has no loop to hand
    over to, and the timer waits for the job's end)."""
    order: list[str] = []

    async def main() -> None:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        asyncio.get_running_loop().call_later(0.01, order.append, "timer")
        later = await worker.run(worker.submit_after_batch, steps_until, order, "timer")
        await asyncio.wrap_future(later)
        worker.close()

    with no_forced_switch():
        asyncio.run(main())
    assert "timer" in order
    assert order.index("timer") < 200, order.index("timer")


def test_a_job_submitted_after_its_batch_by_a_sync_caller_has_no_loop_to_hand_over_to() -> None:
    """Submitted by a job nobody awaits from a loop (`submit`), the deferred job hands over to
    no loop: its pauses find none, and it runs whole."""
    worker = worker_for(holder := Holder())
    seen: list[object] = []

    def deferred() -> None:
        worker_module.pause()
        seen.append(list(worker._loops))

    later = worker.submit(worker.submit_after_batch, deferred).result(60)
    later.result(60)
    worker.close()
    del holder
    assert seen == [[]]


def test_a_timer_due_during_a_batch_s_last_job_runs_before_the_batch_s_commit() -> None:
    """A batch of one job of 30 ms of Python work without a pause, the caller's timer due
    10 ms into it: the worker hands over once the job has run, so the loop runs the timer
    before the batch hook's exit (the commit) begins; without that, the commit (which here
    holds the GIL) would come first."""
    order: list[str] = []

    @contextmanager
    def commit() -> Iterator[None]:
        yield None
        order.append("commit")

    worker = StoreWorker(lambda: commit)

    def job() -> None:
        busy(0.03)
        order.append("job")

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.01, order.append, "timer")
        await worker.run(job)

    with no_forced_switch():
        asyncio.run(main())
    worker.close()
    # (On a host too busy to start the job within 10 ms the timer runs before it: still
    # before the commit.)
    assert order.index("timer") < order.index("commit"), order


def test_no_hand_over_before_a_commit_without_due_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing due on the caller's loop the worker goes from the last job to the commit
    without a hand-over, though a periodic yield would be due (none there: the commit
    releases the GIL anyway)."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 0.0)
    handed: list[int] = []

    class Counted(HandOver):
        def hand_over(self, loops: Iterable[asyncio.AbstractEventLoop], wait_s: float) -> bool:
            handed.append(1)
            return super().hand_over(loops, wait_s)

    worker = StoreWorker(lambda: _plain)
    worker._handover = Counted()

    async def main() -> None:
        asyncio.get_running_loop().call_later(3600, lambda: None)  # a timer, not due
        await worker.run(busy, 0.005)

    asyncio.run(main())
    worker.close()
    assert handed == []


@contextmanager
def _plain() -> Iterator[None]:
    yield None


def test_a_job_submitted_after_its_batch_does_not_wait_for_a_stopped_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The submitter's loop has stopped (its `run_until_complete` returned) and stays open:
    the deferred job's pauses post to it no hand-over that nobody would run, and wait for
    none (each would cost `HANDOVER_S`)."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 0.0)  # every pause yields
    monkeypatch.setattr(worker_module, "HANDOVER_S", 0.05)
    seen = RecordedWaits()
    holder = Holder()  # kept alive: a collected store's worker is closed
    worker = worker_for(holder)
    worker._handover = HandOver(seen)
    stopped = threading.Event()

    def deferred() -> None:
        assert stopped.wait(60)
        for _ in range(5):
            worker_module.pause()

    loop = asyncio.new_event_loop()
    try:
        later = loop.run_until_complete(worker.run(worker.submit_after_batch, deferred))
        stopped.set()
        later.result(60)
    finally:
        loop.close()
    worker.close()
    assert seen.waits == []
