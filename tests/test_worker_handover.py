"""The store worker hands the GIL to its callers' event loop at a pause when a timer of that
loop has come due (`_handover.due_timer`), not only every `YIELD_EVERY_S`, and gives a loop
that does not take a timer's hand-over no second one for it. Orders and counts are
asserted; nothing here is timed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

import ledgerfold._worker as worker_module
from handover_support import (
    Holder,
    hand_overs_to_a_blocked_loop,
    no_forced_switch,
    steps_until,
)
from ledgerfold._handover import HandOver, due_timer
from ledgerfold._worker import worker_for


def test_a_due_timer_of_the_callers_loop_runs_at_the_worker_s_next_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no periodic yield at all, a timer the caller's loop set for 10 ms runs inside a
    job of 400 steps of 1 ms, at the first pause after it came due, not after the job."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)
    monkeypatch.setattr(worker_module, "HANDOVER_S", 60.0)  # no cap: the order is certain
    order: list[str] = []

    async def main() -> None:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        asyncio.get_running_loop().call_later(0.01, order.append, "timer")
        await worker.run(steps_until, order, "timer")
        worker.close()

    with no_forced_switch():
        asyncio.run(main())
    assert "timer" in order
    assert order.index("timer") < 200, order.index("timer")


def test_a_loop_that_does_not_take_a_timer_s_hand_over_gets_no_second_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller's loop is blocked (a synchronous wait on its thread) with a timer due: the
    worker's first pause hands over and waits `HANDOVER_S` in vain; its 19 later pauses do
    not wait again for that timer."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)
    monkeypatch.setattr(worker_module, "HANDOVER_S", 0.01)
    waits = hand_overs_to_a_blocked_loop(
        lambda loop: loop.call_at(loop.time() - 1, lambda: None)  # due, never run
    )
    assert waits == [False]


def test_due_timer_reads_an_asyncio_loop_s_earliest_timer_only_once_it_is_due() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert due_timer([loop]) is None  # no timer
        later = loop.call_later(3600, lambda: None)
        assert due_timer([loop]) is None  # not due
        now = loop.call_at(loop.time() - 1, lambda: None)
        assert due_timer([loop]) is now
        now.cancel()
        later.cancel()
    finally:
        loop.close()


def test_due_timer_ignores_a_loop_without_asyncio_s_timer_heap() -> None:
    class Other:
        _scheduled = "not a heap"

        def time(self) -> float:
            return 0.0

    assert due_timer([object(), Other()]) is None  # type: ignore[list-item]


def test_a_hand_over_is_answered_once_the_loop_has_run_what_it_had_ready_with_it() -> None:
    """The loop runs the hand-over's callback, then the others of that turn (there: timers
    come due, the read of its self-pipe, which releases the GIL): the hand-over is answered
    after them, not at its callback, where the worker would take the GIL back at that
    release and the timers would wait for its next yield. Orders only, nothing timed."""
    order: list[str] = []
    posted, started, go = threading.Event(), threading.Event(), threading.Event()

    class Seen(threading.Event):
        def set(self) -> None:
            order.append("answered")
            super().set()

        def wait(self, timeout: float | None = None) -> bool:
            posted.set()  # hand_over waits once it has posted its callback
            return super().wait(timeout)

    def blocker() -> None:
        started.set()
        assert go.wait(60)

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        loop.call_soon_threadsafe(blocker)
        assert started.wait(60)
        handover = HandOver(Seen())
        answers: list[bool] = []
        caller = threading.Thread(target=lambda: answers.append(handover.hand_over([loop], 60)))
        caller.start()
        assert posted.wait(60)  # its callback is ready for the loop's next turn
        loop.call_soon_threadsafe(order.append, "ready with it")  # the same turn, after it
        go.set()
        caller.join(60)
        assert answers == [True]
        assert order == ["ready with it", "answered"]
    finally:
        go.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


class _Loop:
    """A loop stand-in that runs a posted callback at once (`answers`) or keeps it, and runs
    the callbacks it kept when it is posted to again (a loop that ran them late). A callback
    that a callback asks for at the loop's next turn (`call_soon`) runs at once."""

    def __init__(self, answers: bool) -> None:
        self.answers = answers
        self.kept: list[tuple[Callable[..., object], tuple[object, ...]]] = []

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: object) -> None:
        late, self.kept = self.kept, []
        for kept, kept_args in late:
            kept(*kept_args)
        if self.answers:
            callback(*args)
        else:
            self.kept.append((callback, args))

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        callback(*args)


def test_a_hand_over_is_not_answered_by_an_earlier_one_s_late_callback() -> None:
    """One loop takes the first hand-over while another keeps its copy of the callback and
    runs it only during the second hand-over, which no loop takes: the second is not
    answered (it waits its time out), though its event was set by the late copy before."""
    handover = HandOver()
    quick, late = _Loop(answers=True), _Loop(answers=False)
    assert handover.hand_over([quick, late], 0.0)  # type: ignore[list-item]
    assert late.kept  # its copy of the first round's callback, not run yet
    assert not handover.hand_over([late], 0.0)  # type: ignore[list-item]
