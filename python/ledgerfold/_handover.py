"""How the store worker lets the event loops it works for take the GIL (`_worker._pause`).

A bare release of the GIL (`release_gil`) is mostly won back by the worker before a loop's
thread takes it: a *hand-over* posts a callback to each loop and waits until one has run it.
A loop with work to run now needs the GIL, which a worker running Python keeps until its
next yield (`_worker.YIELD_EVERY_S`): a loop woken for a timer (its selector rounds the
wait up to a whole millisecond), or by a callback another thread posted (a socket's data,
another thread's result), or with tasks woken and ready to run. Told of such work
(`due_work`), the worker hands over at its next pause instead, and the work runs then
(docs/performance.md, "Timers due during a job" and "Callbacks ready during a job").
The periodic yield (`_worker.YIELD_EVERY_S`) is for the work the worker cannot be told of,
I/O the loop's thread was woken for; when it can see that a loop has none (`idle`), there is
no hand-over: it would only wake the loop, and keep the worker waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterable

__all__ = ["HandOver", "due_timer", "due_work", "idle", "release_gil"]


def due_timer(loops: Iterable[asyncio.AbstractEventLoop]) -> object | None:
    """The earliest timer of one of `loops` whose time has come (its loop runs it at its
    next turn), or None. It looks at the timer heap of asyncio's own event loops
    (`_scheduled`), read from another thread: a heap being pushed to at that moment may show
    another timer first, which moves a hand-over by one pause at most. A loop of another
    kind (uvloop) has no such heap: its timers wait for the periodic yield."""
    for loop in loops:
        scheduled = getattr(loop, "_scheduled", None)
        if not scheduled:
            continue
        try:
            timer = scheduled[0]
            if loop.time() >= timer.when():
                return timer  # type: ignore[no-any-return]
        except (IndexError, AttributeError, TypeError):  # emptied meanwhile, or not a heap
            continue
    return None


def due_work(loops: Iterable[asyncio.AbstractEventLoop], answering: object = None) -> object | None:
    """What one of `loops` has to run now, or None: its earliest timer whose time has come
    (`due_timer`), else the first callback of its ready queue (asyncio's own loops'
    `_ready`, read from another thread): posted by another thread, or a task woken; but not
    when that callback is `answering`, the worker's own answers to its callers (`_answer`),
    which the loop runs one a turn while the worker runs the batch their next calls will
    wait for (handing the GIL over for them too made each batch, and `add_items`, about 7%
    slower: docs/performance.md, "Callbacks ready during a job"). The same object is
    returned while that work waits, so a loop that does not take a hand-over (blocked) is
    not handed over to again for it. A loop of another kind (uvloop) shows neither: its
    work waits for the periodic yield."""
    timer = due_timer(loops)
    if timer is not None:
        return timer  # first: a hand-over's own callback, left in a blocked loop, is not new
    for loop in loops:
        ready = getattr(loop, "_ready", None)
        if not ready:
            continue
        try:
            first = ready[0]
        except (IndexError, TypeError, KeyError):  # emptied meanwhile, or not a deque
            continue
        if answering is None or getattr(first, "_callback", None) is not answering:
            return first  # type: ignore[no-any-return]
    return None


_sched_yield = getattr(os, "sched_yield", None)


def release_gil() -> None:
    """Let a thread waiting for the GIL take it, without sleeping: `os.sched_yield()`
    releases it for a few microseconds. (`time.sleep(0)` sleeps the kernel's timer slack:
    about 80 µs a call on the Linux machine of docs/performance.md.)"""
    if _sched_yield is not None:
        _sched_yield()
    else:  # no sched_yield (Windows)
        time.sleep(0)


def idle(loops: Iterable[asyncio.AbstractEventLoop], answering: object = None) -> bool:
    """Whether each of `loops` is seen to have nothing to run now: its thread waits in its
    selector (`_parked`), with no `due_work` (but `answering`) and no I/O ready
    (`_io_ready`). A loop that cannot be seen whole (not one of asyncio's selector loops:
    uvloop, Windows' proactor loop) is never idle."""
    loops = list(loops)
    if due_work(loops, answering) is not None:
        return False
    return all(_parked(loop) and not _io_ready(loop) for loop in loops)


#: At most this many `select` frames between a loop's `_run_once` and its thread's top frame.
_SELECT_DEPTH = 8


def _parked(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop's thread is in its selector's wait, or the loop is not running. A
    loop running a callback may be waiting for the GIL (its callback released it for a
    system call, and the worker took it): only a hand-over gives it back in time. Read from
    the thread's frames: from the top down to the loop's `_run_once`, each a `select` (the
    selector's, and any wrapper or subclass of it on the way)."""
    ident = getattr(loop, "_thread_id", None)
    if ident is None:
        return True  # not running: no hand-over reaches it (`HandOver.hand_over`)
    frame = sys._current_frames().get(ident)
    depth = 0
    while frame is not None and frame.f_code.co_name == "select" and depth < _SELECT_DEPTH:
        frame, depth = frame.f_back, depth + 1
    return depth > 0 and frame is not None and frame.f_code.co_name == "_run_once"


def _io_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop's selector has a file ready besides the loop's own wake-up socket
    (which `call_soon_threadsafe` writes to: what it wakes the loop for is in its ready
    queue, seen by `due_work`). The selector is asked from the worker's thread with no
    wait: asyncio registers its files level-triggered, so asking takes nothing from the
    loop. True when it cannot be asked (another kind of loop, or closed)."""
    select = getattr(getattr(loop, "_selector", None), "select", None)
    wake_up = getattr(loop, "_ssock", None)
    if select is None or wake_up is None:
        return True
    try:
        own = wake_up.fileno()
        return any(key.fd != own for key, _ in select(0))
    except (OSError, ValueError, AttributeError, TypeError, RuntimeError):  # closed meanwhile
        return True


class HandOver:
    """A worker's hand-over: `hand_over(loops, wait_s)` posts a callback to each of `loops`
    and waits at most `wait_s` for one to have run it and the callbacks it had ready with it
    (`_took`); whether one did. With no loop to post to (none, or all closed or stopped)
    `release_gil`. Each hand-over is a round of its own: a callback of an earlier round
    that a loop runs late (one loop took it, another ran its copy after) does not answer the
    current one."""

    __slots__ = ("_event", "_round")

    def __init__(self, event: threading.Event | None = None) -> None:
        self._event = threading.Event() if event is None else event
        self._round = 0

    def hand_over(self, loops: Iterable[asyncio.AbstractEventLoop], wait_s: float) -> bool:
        self._round += 1
        posted = False
        self._event.clear()
        for loop in loops:
            running = getattr(loop, "is_running", None)  # every AbstractEventLoop has it
            if running is not None and not running():
                continue  # stopped (`run_until_complete` returned): it would not run it
            with contextlib.suppress(RuntimeError):  # closed: nobody awaits there
                loop.call_soon_threadsafe(self._took, loop, self._round)
                posted = True
        if not posted:
            release_gil()
            return False
        return self._event.wait(wait_s)  # a loop that is blocked costs this much at most

    def _took(self, loop: asyncio.AbstractEventLoop, round_: int) -> None:
        """On a loop's thread: the hand-over of `round_` has reached the loop. When the loop
        has more to run at this turn than the read of its self-pipe (timers come due, I/O
        it read, tasks), it is answered at the loop's next turn (`_ran`), once the loop has
        run them: answered here, the worker would take the GIL back at the first release of
        it in one of those (the self-pipe's read, which comes before the timers), and they
        would wait for its next yield. Otherwise it is answered here: a turn more would keep
        the worker waiting for nothing (`add_items` p50 +5%, docs/performance.md)."""
        if round_ != self._round:
            return
        if _more_than_the_wake_up(loop):
            loop.call_soon(self._ran, round_)
        else:  # nothing else to run at this turn: answered now, the worker waits no turn
            self._event.set()

    def _ran(self, round_: int) -> None:
        """On a loop's thread, a turn after `_took`: the hand-over of `round_` has been taken
        (if it is current)."""
        if round_ == self._round:
            self._event.set()


def _more_than_the_wake_up(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the loop has callbacks to run at this turn besides the read of its self-pipe
    (the wake-up `call_soon_threadsafe` made): asyncio's own loops' `_ready` (a loop of
    another kind: assumed so)."""
    ready = getattr(loop, "_ready", None)
    if ready is None:
        return True
    wake_up = getattr(loop, "_read_from_self", None)
    return any(getattr(handle, "_callback", None) != wake_up for handle in ready)
