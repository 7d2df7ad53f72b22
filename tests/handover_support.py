"""Shared by the worker hand-over tests (`test_worker_handover.py`,
`test_worker_ready_handover.py`): a store stand-in, a GIL held by Python work, and no
forced switch of the GIL, so the loop's thread runs only when the worker hands it over;
and a loop that blocks with work due while a job pauses (`hand_overs_to_a_blocked_loop`)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import ledgerfold._worker as worker_module
from ledgerfold._handover import HandOver
from ledgerfold._worker import worker_for


class Holder:
    """A store stand-in: any object can have a worker."""


@contextmanager
def no_forced_switch() -> Iterator[None]:
    """The interpreter never takes the GIL from the worker by force meanwhile: the
    loop's thread runs only when the worker hands it over (or waits)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def busy(seconds: float) -> None:
    """Python work, holding the GIL, for `seconds`."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class RecordedWaits(threading.Event):
    """A hand-over's event (`HandOver(event)`) that records whether each wait was answered
    (`waits`): how many hand-overs the worker waited for, and how they ended."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[bool] = []

    def wait(self, timeout: float | None = None) -> bool:
        answered = super().wait(timeout)
        self.waits.append(answered)
        return answered


def steps_until(order: list[str], seen: str, steps: int = 400) -> None:
    """A job of `steps` steps of 1 ms of Python work, each followed by a pause and noted in
    `order` ("step N"), that ends once `seen` is in `order` (the loop ran it at a pause)."""
    for n in range(steps):
        busy(0.001)
        worker_module.pause()
        order.append(f"step {n}")
        if seen in order:
            return


def hand_overs_to_a_blocked_loop(
    due: Callable[[asyncio.AbstractEventLoop], object], pauses: int = 20
) -> list[bool]:
    """Whether each hand-over of a job's `pauses` pauses was taken, while the caller's loop
    is blocked (a synchronous wait on its thread) with the work `due(loop)` schedules (a due
    timer, a ready callback), which it never runs meanwhile. The caller sets `YIELD_EVERY_S`
    (no periodic yield) and `HANDOVER_S` (the wait in vain)."""
    holder = Holder()  # kept alive: a collected store's worker is closed
    worker = worker_for(holder)
    seen = RecordedWaits()
    worker._handover = HandOver(seen)
    armed, paused = threading.Event(), threading.Event()

    def job() -> None:
        assert armed.wait(60)
        for _ in range(pauses):
            worker_module.pause()
        paused.set()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(worker.run(job))
        await asyncio.sleep(0)  # the job is queued (its loop is this one)
        due(loop)
        armed.set()
        assert paused.wait(60)  # the loop's thread blocks here until the job has paused
        await task

    asyncio.run(main())
    worker.close()
    return seen.waits
