"""One worker thread per store: where the `async` entry points run store work (SPEC §17.6).

An `async` method that called the store on the event loop's thread would stall every other
task on that loop for each SQLite call and fsync. Instead each store gets one `StoreWorker`,
a single thread created on first use, and every async entry point (`Compactor.acompact` /
`acontext`, `LedgerfoldSession`, `LedgerfoldMiddleware`'s async hook) hands it its store
work as jobs. One thread per store, not a pool:

- jobs of one store run in the order they were submitted, one at a time, so calls complete
  in call order (a pool would let a later read overtake an earlier write);
- a job whose caller is cancelled while it waits never runs; one already running finishes
  (its transaction commits or rolls back whole) before the next job of that store starts.

Jobs queued while others run form a batch (`StoreWorker`): a store can wrap a batch in a
hook, and `SQLiteStore` with `durability="full"` commits the batch's writes with one fsync
at its end (group commit), answering no caller before its commit is durable.

The worker belongs to the store object (looked up by identity, any `Store` will do): it is
shut down when `SQLiteStore.close()` runs or when the store is garbage-collected. A store
used again after its worker was closed gets a fresh one (the store itself then decides
whether the call is an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ledgerfold._events import held_until_done

__all__ = ["THREAD_NAME", "StoreWorker", "close_worker", "run_on_store", "worker_for"]

T = TypeVar("T")

#: Name prefix of every worker thread (what a test or a profiler sees).
THREAD_NAME = "ledgerfold-store"


#: At most this many jobs share one batch (one flush, see `StoreWorker`).
BATCH_JOBS = 64

#: What a store may offer its worker: `store._worker_batch()`, a context manager around a
#: run of queued jobs (`SQLiteStore`'s makes their commits durable with one flush at its end).
BatchHook = Callable[[], AbstractContextManager[None]]


class StoreWorker:
    """A single thread running one store's jobs in submission order.

    Jobs that are queued together run as one *batch*: one after another, each in its own
    transaction as always, inside the store's batch hook when it has one, and their callers
    hear back (in call order) when the batch has ended. `SQLiteStore` with
    `durability="full"` uses this for group commit: the batch's commits are made durable by
    one fsync at its end instead of one each, and no caller hears of its commit before it is
    durable. A batch never waits for jobs to arrive: it is whatever was queued while the
    jobs before it ran (at most `BATCH_JOBS`).
    """

    __slots__ = ("__weakref__", "_batch", "_draining", "_executor", "_jobs", "_lock")

    def __init__(self, batch: Callable[[], BatchHook | None] | None = None) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._draining = False
        self._batch = batch

    def submit(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue `function(*args, **kwargs)` behind every job submitted before, in the
        caller's `contextvars` context (as `asyncio.to_thread` does)."""
        context = contextvars.copy_context()
        call = functools.partial(context.run, function, *args, **kwargs)
        future: Future[T] = Future()
        with self._lock:
            if self._executor is None:  # created on first use: a store never awaited has none
                self._executor = ThreadPoolExecutor(
                    max_workers=1,
                    thread_name_prefix=THREAD_NAME,
                    initializer=_mark_thread,
                    initargs=(self,),
                )
            self._jobs.append((future, call))
            if not self._draining:
                self._draining = True
                self._executor.submit(self._drain)
        return future

    async def run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run the job on the worker thread and await its result. Cancelling the awaiting
        task cancels the job if it has not started; a started job runs to its end."""
        return await asyncio.wrap_future(self.submit(function, *args, **kwargs))

    def close(self, *, wait: bool = True) -> None:
        """Let the queued jobs finish, then end the thread (waiting for it with `wait`, never
        from the worker thread itself: a job that closes its own store)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait and getattr(_thread_state, "worker", None) is not self)

    # -- on the worker thread ---------------------------------------------------------------

    def _drain(self) -> None:
        """Run batches until the queue is empty."""
        while True:
            with self._lock:
                if not self._jobs:
                    self._draining = False
                    return
            self._run_batch()

    def _next(self) -> tuple[Future[Any], Callable[[], Any]] | None:
        with self._lock:
            return self._jobs.popleft() if self._jobs else None

    def _run_batch(self) -> None:
        done: list[tuple[Future[Any], bool, Any]] = []
        hook = self._batch() if self._batch is not None else None
        try:
            # A batch's events reach their hooks once it has committed (`_events`).
            with (
                held_until_done() if hook is not None else contextlib.nullcontext(),
                hook() if hook is not None else contextlib.nullcontext(),
            ):
                while len(done) < BATCH_JOBS:
                    job = self._next()
                    if job is None:
                        break
                    future, call = job
                    if done:
                        # Between jobs, let other threads (the event loop's) take the GIL:
                        # a batch is many jobs of Python work back to back.
                        time.sleep(0)
                    if not future.set_running_or_notify_cancel():
                        continue  # cancelled before it started: never runs
                    try:
                        done.append((future, True, call()))
                    except BaseException as exc:  # the caller gets it, as from an executor
                        done.append((future, False, exc))
        except BaseException as exc:  # the batch's end failed (a flush): no job succeeded
            done = [(future, False, exc) for future, _, _ in done]
        for future, ok, value in done:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


_thread_state = threading.local()


def _mark_thread(worker: StoreWorker) -> None:
    _thread_state.worker = worker


# Workers by store identity. A weak reference's callback drops (and closes) a store's worker
# when the store is collected; a store that cannot be weakly referenced keeps its worker
# until `close_worker`.
_workers: dict[int, tuple[Any, StoreWorker]] = {}
# Reentrant: the cycle collector may free a store (and run `_collected`) at any allocation,
# also one made while this thread holds the lock in `worker_for`.
_workers_lock = threading.RLock()


def worker_for(store: object) -> StoreWorker:
    """The store's worker, created on first use."""
    key = id(store)
    with _workers_lock:
        entry = _workers.get(key)
        if entry is not None and _referent(entry[0]) is store:
            return entry[1]
        try:
            handle: Any = weakref.ref(store, functools.partial(_collected, key))
        except TypeError:
            handle = store
        worker = StoreWorker(_batch_hook(handle))
        _workers[key] = (handle, worker)
        return worker


async def run_on_store(
    store: object, function: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    """`worker_for(store).run(function, *args, **kwargs)`."""
    return await worker_for(store).run(function, *args, **kwargs)


def close_worker(store: object) -> None:
    """Close the store's worker, if it has one (after its queued jobs)."""
    with _workers_lock:
        entry = _workers.get(id(store))
        if entry is None or _referent(entry[0]) is not store:
            return
        del _workers[id(store)]
    entry[1].close()


def _batch_hook(handle: Any) -> Callable[[], BatchHook | None] | None:
    """The store's `_worker_batch`, looked up through the weak reference at each batch (a
    worker must not keep its store alive)."""
    if not callable(getattr(_referent(handle), "_worker_batch", None)):
        return None

    def hook() -> BatchHook | None:
        store = _referent(handle)
        return None if store is None else getattr(store, "_worker_batch", None)

    return hook


def _referent(handle: Any) -> object:
    return handle() if isinstance(handle, weakref.ref) else handle


def _collected(key: int, handle: weakref.ref[Any]) -> None:
    with _workers_lock:
        entry = _workers.get(key)
        if entry is None or entry[0] is not handle:
            return
        del _workers[key]
    # Not waiting: the collector may run this on any thread.
    entry[1].close(wait=False)
