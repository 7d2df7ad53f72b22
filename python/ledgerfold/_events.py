"""Events: what happened, for an operator (SPEC §17.8).

The store and the Compactor emit an `Event` where the change happens, after its transaction
has committed and outside the store's lock, to the hook the application gave
(`SQLiteStore(..., on_event=hook)`, `Compactor(..., on_event=hook)`). An event carries IDs,
counts, reasons, tokens and seconds — never a body, summary text, query or passage. A hook
that raises is logged (by the event's name and the exception's type) and never propagated:
observing the ledger must not break it.

On the store's worker thread, a group commit's batch (SPEC §17.6) commits its jobs' changes
together at its end: the events its jobs emit are held (`held_until_done`) and handed to
their hooks once the batch has committed and released the lock, in the order emitted and
each in the context (`contextvars`) it was emitted in, the caller's (so an OpenTelemetry
span is a child of the caller's current span, as for a sync call), or dropped with the
changes when it fails; an event that reports no change of the batch (`abandoned`: a plan left
without a result) is handed on either way (`kept_whatever_commits`). There a hook that
raises even a `BaseException` (`KeyboardInterrupt`, `SystemExit`) is logged: no caller could
hear of it, and the worker must go on answering the batch's callers and running the store's
later calls.

`ledgerfold.integrations.opentelemetry` turns events into spans and metrics.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "EVENT_NAMES",
    "Event",
    "EventHook",
    "Held",
    "emit",
    "held_until_done",
    "kept_whatever_commits",
    "stale_event",
]

_log = logging.getLogger("ledgerfold.events")

# The events held on this thread (`held_until_done`), or None.
_held = threading.local()

#: Every event name, and what it reports.
EVENT_NAMES: Final = (
    "compaction.accepted",  # a summary was committed (turns summarised, tokens in and out)
    "compaction.skipped",  # nothing to compact, or not due (reason)
    "compaction.failed",  # the summarizer or the save failed (reason); nothing changed
    "compaction.stale",  # the commit was refused as stale-source (reason: its detail)
    "context.fallback",  # a context was served from raw turns (reason: the fallback)
    "summary.stale",  # summaries went stale in a write (summary_ids, reason, turn_ids)
    "retention.purged",  # raw turns purged (turns, through_sequence in `sequence`)
    "retention.erased",  # bodies erased (turns)
    "conversation.deleted",  # a conversation erased whole (turns)
    "summary.sealed-lost",  # a purged range's summary could not be kept (§17.5)
)


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened. Only IDs, counts, reasons, tokens and seconds."""

    name: str
    conversation_id: str | None
    reason: str | None = None
    summary_ids: tuple[str, ...] = ()
    turn_ids: tuple[str, ...] = ()
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    sequence: int | None = None
    seconds: float | None = None
    extra: tuple[tuple[str, int | float | str], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.name not in EVENT_NAMES:  # a library bug, not a user's input
            raise ValueError(f"unknown event name {self.name!r}")


EventHook = Callable[[Event], object]

#: A held event: its hook, the event and the context it was emitted in (`held_until_done`).
Held = tuple[EventHook, Event, contextvars.Context]


def emit(hook: EventHook | None, event: Event) -> None:
    """Hand `event` to `hook`; a hook that raises is logged, never propagated. Inside
    `held_until_done` on this thread, it is held until the block ends."""
    if hook is None:
        return
    held: list[Held] | None = getattr(_held, "events", None)
    if held is not None:
        # With the emitting call's context (its caller's, on a worker): a hook that reads
        # context variables (OpenTelemetry's current span) sees them when it is handed it.
        entry = (hook, event, contextvars.copy_context())
        kept = bool(getattr(_held, "kept", False))
        if not kept:
            held.append(entry)
        _held.emitted.append((entry, kept))
        return
    _call(hook, event)


@contextmanager
def kept_whatever_commits() -> Iterator[None]:
    """Inside `held_until_done`: the events emitted in this block report nothing the held
    block writes (a plan left without a result), so they are handed to their hooks when it
    ends, in emission order with the others, even when its writes are not kept."""
    previous = getattr(_held, "kept", False)
    _held.kept = True
    try:
        yield
    finally:
        _held.kept = previous


@contextmanager
def held_until_done() -> Iterator[list[Held] | None]:
    """Hold the events emitted on this thread inside the block; hand them to their hooks
    when it ends without an exception, drop them when it raises (the changes they report
    did not happen). A hook raising a `BaseException` then is logged like any other (the
    block runs on a store's worker thread, whose callers must still hear back). Yields the
    held `(hook, event, context)` list, in emission order, so that the block can drop some itself
    (those of writes it learns were not kept; not those emitted in `kept_whatever_commits`,
    which it does not hold); None when nested: the outermost block decides."""
    if getattr(_held, "events", None) is not None:
        yield None
        return
    held: list[Held] = []
    # Every event emitted, in order, and whether it is kept whatever the block's writes
    # come to (`kept_whatever_commits`): it holds them all, so their IDs stay distinct.
    emitted: list[tuple[Held, bool]] = []
    _held.events, _held.emitted = held, emitted
    try:
        yield held
    finally:
        _held.events = _held.emitted = None
    left = {id(entry) for entry in held}
    for entry, kept in emitted:
        if kept or id(entry) in left:
            hook, event, context = entry
            context.run(_call, hook, event, everything=True)


def _call(hook: EventHook, event: Event, *, everything: bool = False) -> None:
    """Call the hook, logging what it raises: an `Exception`, or with `everything` any
    `BaseException` (on a worker thread, where it would reach no caller)."""
    try:
        hook(event)
    except BaseException as error:
        if not everything and not isinstance(error, Exception):
            raise  # Ctrl-C in the caller's own thread stays Ctrl-C
        _log.warning(
            "event hook raised %s on %s (conversation %s); the event is dropped",
            type(error).__name__,
            event.name,
            event.conversation_id,
        )


def stale_event(
    conversation_id: str, reason: str, summary_ids: list[str], turn_id: str | None = None
) -> Event:
    """`summary.stale`: an edit (`source-modified`) or a retraction (`source-missing`) of
    `turn_id`, or appended turns splitting a unit (`group-split`), made the versions
    `summary_ids` stale."""
    return Event(
        "summary.stale",
        conversation_id,
        reason=reason,
        summary_ids=tuple(summary_ids),
        turn_ids=() if turn_id is None else (turn_id,),
        extra=(("summaries", len(summary_ids)),),
    )
