"""The store worker hands the GIL to its callers' event loop at a pause when that loop has a
callback ready to run (`_handover.due_work`): one another thread posted (a socket's data,
another thread's result) or a task woken, not only every `YIELD_EVERY_S`; and gives a loop
that does not take the hand-over for a callback no second one for it. Orders and counts are
asserted; nothing here is timed."""

from __future__ import annotations

import asyncio

import pytest

import ledgerfold._worker as worker_module
from handover_support import Holder, busy, hand_overs_to_a_blocked_loop, no_forced_switch
from ledgerfold._handover import HandOver, due_work
from ledgerfold._worker import worker_for


def test_a_callback_ready_in_the_callers_loop_runs_at_the_worker_s_next_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no periodic yield at all, a callback ready in the caller's loop runs at the
    job's next pause, not after the job's 400 steps of 1 ms. The job itself queues it,
    after its step 5, without waking the loop (`call_soon` from the worker's thread): a
    callback posted with a wake-up races the worker for the GIL, and the loop may win that
    race without a hand-over; here only the hand-over can run it during the job."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)
    monkeypatch.setattr(worker_module, "HANDOVER_S", 60.0)  # no cap: the order is certain
    order: list[str] = []

    def job(loop: asyncio.AbstractEventLoop) -> None:
        for n in range(400):
            busy(0.001)
            if n == 5:
                loop.call_soon(order.append, "posted")
            worker_module.pause()
            order.append(f"job {n}")
            if "posted" in order:
                return

    async def main() -> None:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        await worker.run(job, asyncio.get_running_loop())
        worker.close()

    with no_forced_switch():
        asyncio.run(main())
    assert order[:7] == [f"job {n}" for n in range(5)] + ["posted", "job 5"], order[:10]


def test_a_loop_that_does_not_take_a_callback_s_hand_over_gets_no_second_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller's loop is blocked (a synchronous wait on its thread) with a callback
    ready: the worker's first pause hands over and waits `HANDOVER_S` in vain; its 19
    later pauses do not wait again for that callback."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)
    monkeypatch.setattr(worker_module, "HANDOVER_S", 0.01)
    waits = hand_overs_to_a_blocked_loop(
        lambda loop: loop.call_soon(lambda: None)  # ready, never run
    )
    assert waits == [False]


def test_due_work_is_a_due_timer_first_then_the_first_ready_callback() -> None:
    loop = asyncio.new_event_loop()
    try:
        assert due_work([loop]) is None  # nothing to run
        later = loop.call_later(3600, lambda: None)
        assert due_work([loop]) is None  # a timer not due
        ready = loop.call_soon(lambda: None)
        assert due_work([loop]) is ready
        assert due_work([loop]) is ready  # the same, while it waits
        now = loop.call_at(loop.time() - 1, lambda: None)
        assert due_work([loop]) is now  # a due timer before a ready callback
        for handle in (now, later, ready):
            handle.cancel()
    finally:
        loop.close()


def test_due_work_ignores_a_loop_without_asyncio_s_queues() -> None:
    class Other:
        _scheduled = "not a heap"
        _ready = 42

        def time(self) -> float:
            return 0.0

    assert due_work([object(), Other()]) is None  # type: ignore[list-item]


def test_due_work_leaves_the_worker_s_own_answers_to_the_loop() -> None:
    """The worker's answers to its callers at the head of a loop's queue are not work to
    hand over for (the loop runs them one a turn while the next batch runs); anything else
    ready is."""
    loop = asyncio.new_event_loop()

    def answer() -> None:
        pass

    try:
        own = loop.call_soon(answer)
        assert due_work([loop], answer) is None
        assert due_work([loop]) is own
        own.cancel()
        loop.run_until_complete(asyncio.sleep(0))  # the cancelled handle leaves the queue
        other = loop.call_soon(lambda: None)
        assert due_work([loop], answer) is other
        other.cancel()
    finally:
        loop.close()


def test_a_hand_over_to_a_loop_with_nothing_else_to_run_is_answered_at_its_callback() -> None:
    """With only the hand-over's own wake-up to run, the loop answers it at once; with
    another callback ready at that turn, a turn later, once that has run."""
    loop = asyncio.new_event_loop()
    try:
        handover = HandOver()
        handover._round = 1
        handover._took(loop, 1)
        assert handover._event.is_set()

        handover = HandOver()
        handover._round = 1
        ran: list[str] = []
        loop.call_soon(ran.append, "ready")
        handover._took(loop, 1)
        assert not handover._event.is_set()
        loop.run_until_complete(asyncio.sleep(0))
        assert ran == ["ready"]
        assert handover._event.is_set()
    finally:
        loop.close()
