"""The store worker's periodic yield (`YIELD_EVERY_S`) hands the GIL over to its callers'
event loops only when it cannot see that they have nothing to run (`_handover.idle`): no
timer due, no callback ready but its own answers, no file ready but the loop's own wake-up
socket. A hand-over to an idle loop would only wake it and keep the worker waiting for it;
one to a loop with a file ready lets it read the file now. Orders and counts only: nothing
here is timed."""

from __future__ import annotations

import asyncio
import selectors
import socket
from collections.abc import Iterator

import pytest

import ledgerfold._worker as worker_module
from handover_support import (
    Holder,
    RecordedWaits,
    hand_overs_to_a_blocked_loop,
    no_forced_switch,
    steps_until,
)
from ledgerfold._handover import HandOver, idle
from ledgerfold._worker import worker_for


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def test_a_loop_with_nothing_to_run_is_idle(loop: asyncio.AbstractEventLoop) -> None:
    assert idle([loop])
    assert idle([])


def test_a_loop_with_a_timer_due_or_a_callback_ready_is_not_idle(
    loop: asyncio.AbstractEventLoop,
) -> None:
    later = loop.call_later(3600, lambda: None)
    assert idle([loop])  # not due
    handle = loop.call_soon(lambda: None)
    assert not idle([loop])
    handle.cancel()
    other = asyncio.new_event_loop()
    try:
        other.call_at(other.time() - 1, lambda: None)
        assert not idle([other])
        assert not idle([loop, other])
    finally:
        other.close()
    later.cancel()


def test_a_ready_callback_that_is_the_worker_s_own_answer_leaves_the_loop_idle(
    loop: asyncio.AbstractEventLoop,
) -> None:
    """Its answers to its callers do not make the worker hand over (`due_work`)."""
    loop.call_soon(worker_module._answer, [])
    assert idle([loop], worker_module._answer)
    assert not idle([loop])


def test_a_loop_with_a_file_ready_is_not_idle_and_asking_takes_nothing_from_it(
    loop: asyncio.AbstractEventLoop,
) -> None:
    reader, writer = socket.socketpair()
    try:
        loop.add_reader(reader, lambda: None)
        assert idle([loop])  # registered, nothing to read
        writer.send(b"x")
        assert not idle([loop])
        assert not idle([loop])  # still ready: the loop will read it (level-triggered)
        assert reader.recv(1) == b"x"
        assert idle([loop])
        loop.remove_reader(reader)
    finally:
        reader.close()
        writer.close()


def test_the_loop_s_own_wake_up_socket_leaves_it_idle(loop: asyncio.AbstractEventLoop) -> None:
    """What `call_soon_threadsafe` wakes a loop for is in its ready queue (`due_work`); the
    wake-up byte alone is not work."""
    loop._write_to_self()  # type: ignore[attr-defined]
    assert idle([loop])


def test_a_loop_that_cannot_be_seen_whole_is_never_idle(loop: asyncio.AbstractEventLoop) -> None:
    """A loop of another kind (uvloop, Windows' proactor loop) has no selector to ask: the
    periodic yield hands over to it, as to every loop before."""

    class Other:
        _scheduled = ()
        _ready = ()

    assert not idle([Other()])  # type: ignore[list-item]
    assert not idle([loop, Other()])  # type: ignore[list-item]
    closed = asyncio.new_event_loop()
    closed.close()
    assert not idle([closed])


class _WrappedSelector(selectors.DefaultSelector):
    """A selector whose `select` wraps its class's (as instrumentation would)."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        return super().select(timeout)


@pytest.mark.parametrize("selector", [None, _WrappedSelector], ids=["default", "wrapped"])
def test_the_periodic_yield_does_not_hand_over_to_an_idle_loop(
    monkeypatch: pytest.MonkeyPatch, selector: type[selectors.BaseSelector] | None
) -> None:
    """A job of 40 steps of 1 ms, a pause after each, for a caller whose loop has nothing
    else to run: every pause is a periodic yield (0.5 ms apart), and none is a hand-over
    (before: one at each pause, each waiting for a turn of the loop). The same with a
    selector whose `select` wraps its class's: the loop's thread is still seen waiting in
    its selector (`_handover._parked`)."""
    monkeypatch.setattr(worker_module, "HANDOVER_S", 60.0)
    seen = RecordedWaits()
    released: list[int] = []
    monkeypatch.setattr(worker_module, "release_gil", lambda: released.append(1))

    async def main() -> None:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        worker._handover = HandOver(seen)
        await worker.run(steps_until, [], "never seen", 40)
        worker.close()

    factory = None if selector is None else lambda: asyncio.SelectorEventLoop(selector())
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())
    assert seen.waits == []
    assert len(released) == 40  # each pause still lets any other thread have the GIL


def test_the_periodic_yield_hands_over_to_a_loop_with_a_file_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller's loop reads a socket. A job writes to it at its third step, then takes
    1 ms steps with a pause after each until the loop has read it: the loop reads it at the
    job's next periodic yield, a hand-over, not after the job. The GIL is never switched by
    force and `release_gil` does not release it: the loop runs at a hand-over (or while the
    write releases the GIL, if its thread wakes in time)."""
    monkeypatch.setattr(worker_module, "HANDOVER_S", 60.0)  # no cap: the order is certain
    monkeypatch.setattr(worker_module, "release_gil", lambda: None)
    order: list[str] = []
    reader, writer = socket.socketpair()

    def job() -> None:
        steps_until(order, "sent", 3)  # not sent yet: three steps
        writer.send(b"x")
        order.append("sent")
        steps_until(order, "read")

    def read() -> None:
        reader.recv(1)
        order.append("read")

    async def main() -> None:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        loop = asyncio.get_running_loop()
        loop.add_reader(reader, read)
        try:
            await worker.run(job)
        finally:
            loop.remove_reader(reader)
            worker.close()

    try:
        with no_forced_switch():
            asyncio.run(main())
    finally:
        reader.close()
        writer.close()
    assert "read" in order
    # At the first pause after the write (or at the write itself, if the loop's thread took
    # the GIL while `send` released it), not after the job's 400 steps.
    assert order.index("read") - order.index("sent") <= 2, order


def test_the_periodic_yield_hands_over_to_a_loop_whose_thread_is_not_in_its_selector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller's loop runs a callback (here one that waits on its thread) with nothing
    else due: it is not seen idle, since a loop running a callback may be waiting for the
    GIL the worker holds. Each of the job's 20 pauses, all periodic, hands over (and waits
    `HANDOVER_S` in vain: the callback does not end before the job's pauses do)."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 0.0)  # every pause is periodic
    monkeypatch.setattr(worker_module, "HANDOVER_S", 0.001)
    waits = hand_overs_to_a_blocked_loop(lambda loop: None)
    # (Then one more, before the batch's commit: the loop, free again, has the hand-overs'
    # own callbacks ready, which is due work.)
    assert waits[:20] == [False] * 20
