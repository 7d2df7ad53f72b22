"""`LedgerfoldSession.add_items`' deferred compactions (`Compactor._acompact(defer=True)`):
each is the job starting the store worker's next batch (`StoreWorker.submit_after_batch`),
noted in `StoreWorker.deferred` by its conversation until it has run, so a later plan of
that conversation waits for it instead of superseding its plan. Logs name error types only.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ledgerfold._outcome import CompactionOutcome
from ledgerfold._worker import StoreWorker, deferred_on

__all__ = ["After", "came_to", "defer", "not_landed", "wait_queued"]

_log = logging.getLogger("ledgerfold.compactor")


@dataclass(frozen=True, slots=True)
class After:
    """What `_acompact`'s planning job found queued, to await before planning."""

    future: Future[Any]


def defer(
    worker: StoreWorker, conversation_id: str, call: Callable[[], CompactionOutcome]
) -> Future[CompactionOutcome]:
    """Submit a compaction of the conversation as the job starting the next batch, noted
    in `worker.deferred` until it has run (on the worker thread, in a job)."""
    later = worker.submit_after_batch(call)
    later.add_done_callback(functools.partial(_unexpected, conversation_id))
    worker.deferred[conversation_id] = later
    later.add_done_callback(functools.partial(_forget, worker.deferred, conversation_id))
    return later


def _forget(
    deferred: dict[Any, Future[Any]], conversation_id: str, future: Future[CompactionOutcome]
) -> None:
    """A deferred compaction has run (or was dropped): no longer queued."""
    if deferred.get(conversation_id) is future:
        del deferred[conversation_id]


def _unexpected(conversation_id: str, future: Future[CompactionOutcome]) -> None:
    """A deferred compaction's error that no outcome records (a closed store, a bug): the
    call that started it has returned, so it is logged here (its type only)."""
    if not future.cancelled() and (error := future.exception()) is not None:
        _log.error(
            "deferred compaction failed conversation_id=%s error_type=%s",
            conversation_id,
            type(error).__name__,
        )


def came_to(
    began: list[Any], planning: Future[Any]
) -> CompactionOutcome | Future[CompactionOutcome] | None:
    """What the planning job of a cancelled `Compactor._acompact` came to (`landed`, run as
    the job after it: in its batch, whose failure it then shares, or in a later one): its
    outcome, the future of its deferred compaction or of the queued one it waited behind
    (which covers its turns), or None when it never ran, left a model's plan without a
    result (`abandoned`), or when nothing of it landed: `planning`, the planning job's
    future, failed (once its batch has ended, in a batch before this job's: a failed commit
    undid the append and any compaction the job made), or the compaction it deferred never
    runs (the worker cancelled it with its batch)."""
    if not_landed(planning):
        return None
    if not began:
        return None
    begun = began[0]
    if isinstance(begun, After):
        begun = begun.future
    if isinstance(begun, Future):
        return None if begun.cancelled() else begun
    if isinstance(begun, CompactionOutcome):
        return begun
    return None


def not_landed(future: Future[Any]) -> bool:
    """Whether a job whose batch has ended did not land: it never ran, or it (or its
    batch's commit) failed. False while it has not ended."""
    return future.done() and (future.cancelled() or future.exception() is not None)


def wait_queued(store: object, conversation_id: str) -> None:
    """Wait for a compaction of the conversation that `LedgerfoldSession.add_items` deferred
    and that is still queued on the store's worker (a sync `Compactor.compact`: a plan made
    now would supersede its plan, a `stale` outcome, a failed and a rejected record). Not on
    that worker's thread (`deferred_on`)."""
    queued = deferred_on(store, conversation_id)
    if queued is None or queued.done():
        return
    _log.debug("compaction waits for a deferred one conversation_id=%s", conversation_id)
    futures.wait([queued])
