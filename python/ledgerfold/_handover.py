"""How the store worker lets the event loops it works for take the GIL (`_worker._pause`).

A yield by `time.sleep(0)` alone is mostly won back by the worker before a loop's thread
gets the GIL: a *hand-over* posts a callback to each loop and waits until one has run it.
And a loop waiting for a timer sleeps in its selector, which rounds the wait up to a whole
millisecond, then needs the GIL, which a worker running Python keeps until its next yield
(`_worker.YIELD_EVERY_S`): told that a timer of its callers' loops is due (`due_timer`),
the worker hands over at its next pause instead, and the timer runs then
(docs/performance.md, "Timers due during a job").
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterable

__all__ = ["due_timer", "hand_over"]


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


def hand_over(
    seen: threading.Event, loops: Iterable[asyncio.AbstractEventLoop], wait_s: float
) -> bool:
    """Post `seen.set` to each of `loops` and wait at most `wait_s` for one to run it:
    whether one did. With no loop to post to (none, or all closed) `time.sleep(0)`."""
    posted = False
    seen.clear()
    for loop in loops:
        with contextlib.suppress(RuntimeError):  # closed: nobody awaits there
            loop.call_soon_threadsafe(seen.set)
            posted = True
    if not posted:
        time.sleep(0)
        return False
    return seen.wait(wait_s)  # a loop that is not running costs this much at most
