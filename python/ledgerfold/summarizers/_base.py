"""What a summarizer sees and how it is called (SPEC §13).

A summarizer is a callable `SummaryRequest -> str`, or an async one. This module holds the
request, the `Summarizer` type and the generic calling code: sync or async, with or without a
deadline, inside or outside a running event loop. A summarizer abandoned at its deadline runs
on in a daemon thread and its late result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from ledgerfold._context import TurnItem
from ledgerfold._sized import sized

__all__ = [
    "AwaitableInRunningLoop",
    "Summarizer",
    "SummaryRequest",
    "call_summarizer",
    "call_summarizer_async",
    "failure_reason",
    "in_running_loop",
    "is_async_callable",
]


@dataclass(frozen=True, slots=True, repr=False)
class SummaryRequest:
    """What a summarizer sees (SPEC §13, §15.1).

    `turns` are only the turns new since `previous_summary` (sequence order), never more
    than the policy's `max_input_tokens` of text; `previous_summary` is the text of the
    summary being extended, which already covers `covered_count` turns (None and 0 on a
    rebase: then `turns` start from the beginning). The reply replaces the previous text
    completely, so it should carry forward what that text says, and stay within
    `max_summary_tokens`. `purged_through` is the sequence the conversation's turns were
    purged through (SPEC §15.5) when the previous summary is extended, else None: what that
    text says of turns up to it is all that remains of them, and `recall_history` cannot
    return their originals (a note saying it can must not be carried forward as it stands).
    """

    conversation_id: str
    plan_id: str
    policy_version: str
    turns: tuple[TurnItem, ...]
    previous_summary: str | None = None
    covered_count: int = 0
    max_summary_tokens: int | None = None
    purged_through: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.turns, tuple):
            object.__setattr__(self, "turns", tuple(self.turns))

    def __repr__(self) -> str:
        previous = (
            "None" if self.previous_summary is None else sized(len(self.previous_summary), "char")
        )
        return (
            f"SummaryRequest(conversation_id={self.conversation_id!r}, plan_id={self.plan_id!r}, "
            f"policy_version={self.policy_version!r}, turns={sized(len(self.turns), 'turn')}, "
            f"previous_summary={previous}, covered_count={self.covered_count}, "
            f"max_summary_tokens={self.max_summary_tokens}, "
            f"purged_through={self.purged_through})"
        )


#: A summarizer: `SummaryRequest -> str`, or an async callable returning `str`.
Summarizer = Callable[[SummaryRequest], str | Awaitable[str]]


class AwaitableInRunningLoop(Exception):
    """A sync summarizer returned an awaitable while `compact` ran inside an event loop."""


def call_summarizer(
    summarizer: Summarizer, request: SummaryRequest, timeout: float | None, in_loop: bool
) -> object:
    """Call `summarizer` to completion on this thread, within `timeout` seconds. An async
    summarizer runs in its own event loop; raises `AwaitableInRunningLoop` when it would
    need one while `in_loop` (a loop is already running on this thread)."""
    if is_async_callable(summarizer):
        awaitable = cast("Awaitable[object]", summarizer(request))
        return asyncio.run(_bounded(awaitable, timeout))
    if timeout is None:
        result: object = summarizer(request)
    else:
        result = _call_in_thread(summarizer, request, timeout)
    if inspect.isawaitable(result):
        if in_loop:
            _discard(result)
            raise AwaitableInRunningLoop
        return asyncio.run(_bounded(result, timeout))
    return result


async def call_summarizer_async(
    summarizer: Summarizer, request: SummaryRequest, timeout: float | None
) -> object:
    """Await `summarizer` within `timeout` seconds without blocking the event loop: async
    summarizers are awaited, sync ones run in a worker thread."""
    return await asyncio.wait_for(_summarize_async(summarizer, request, timeout), timeout)


async def _summarize_async(
    summarizer: Summarizer, request: SummaryRequest, timeout: float | None
) -> object:
    if is_async_callable(summarizer):
        return await cast("Awaitable[object]", summarizer(request))
    if timeout is None:
        result: object = await asyncio.to_thread(summarizer, request)
    else:
        # Not the loop's executor: a summarizer abandoned at its deadline must neither
        # hold an executor worker nor make `asyncio.run` wait for it at shutdown.
        result = await _in_daemon_thread(summarizer, request)
    if inspect.isawaitable(result):
        return await result
    return result


def in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def is_async_callable(function: object) -> bool:
    while isinstance(function, functools.partial):
        function = function.func
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 -- instances with async __call__
    )


def failure_reason(error: BaseException) -> str:
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return "summarizer-timeout"
    return "summarizer-error"


async def _bounded(awaitable: Awaitable[Any], timeout: float | None) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


def _discard(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)  # a coroutine never awaited: no warning
    if callable(close):
        close()


def _call_in_thread(
    summarizer: Callable[[SummaryRequest], object], request: SummaryRequest, timeout: float
) -> object:
    """Call a sync summarizer with a deadline. On expiry raise `TimeoutError` and abandon
    the daemon thread; its late result is never used."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = summarizer(request)
        except BaseException as error:
            outcome["error"] = error

    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(run,), name="ledgerfold-summarizer", daemon=True
    )
    thread.start()
    # A timeout beyond the platform's limit (about 292 years) is valid and means no limit.
    thread.join(min(timeout, threading.TIMEOUT_MAX))
    if thread.is_alive():
        raise TimeoutError(f"summarizer did not return within {timeout:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


async def _in_daemon_thread(
    summarizer: Callable[[SummaryRequest], object], request: SummaryRequest
) -> object:
    """Await a sync summarizer run in its own daemon thread; a result that arrives after
    the caller gave up (or after the loop closed) is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[object] = loop.create_future()

    def deliver(result: object, error: BaseException | None) -> None:
        if future.done():  # cancelled by the deadline
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result: object = None
        error: BaseException | None = None
        try:
            result = summarizer(request)
        except BaseException as raised:
            error = raised
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(deliver, result, error)

    context = contextvars.copy_context()
    threading.Thread(
        target=context.run, args=(run,), name="ledgerfold-summarizer", daemon=True
    ).start()
    return await future
