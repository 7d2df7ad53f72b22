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

Jobs queued while others run form a batch (`StoreWorker`): ledgerfold's own store wraps a
batch in a hook (registered with `batching`; no name of any other store is looked up), and
`SQLiteStore` with `durability="full"` commits the batch's writes with one fsync at its end
(group commit), answering no caller before its commit is durable.

The worker belongs to the store object (by identity, any `Store` will do): it is shut down
when `SQLiteStore.close()` runs or the store is garbage-collected. A store used again after
that gets a fresh one (the store then decides whether the call is an error), and so does a
store used in a child process after `fork` (the parent's worker threads are not there).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ledgerfold._events import held_until_done
from ledgerfold._handover import HandOver, due_work, idle, release_gil

__all__ = [
    "THREAD_NAME",
    "StoreWorker",
    "batching",
    "close_worker",
    "deferred_on",
    "pause",
    "running_on",
    "worker_for",
]

T = TypeVar("T")

#: Name prefix of every worker thread (what a test or a profiler sees).
THREAD_NAME = "ledgerfold-store"


#: At most this many jobs share one batch (one flush, see `StoreWorker`).
BATCH_JOBS = 64

#: Between jobs the worker lets the event loops take the GIL once this long has passed
#: since it last did (`_pause`): else a loop woken for I/O would wait up to the 5 ms switch
#: interval. Not after every job: a yield can cost the worker a switch interval when another
#: thread is busy (docs/performance.md). A long job yields inside, where it calls `pause()`.
YIELD_EVERY_S = 0.0005

#: A yield to the event loops of the batch's async callers is a hand-over: the worker posts
#: a callback to each and waits until one has run it, at most this long (a bare release of
#: the GIL is mostly won back by the worker first: docs/performance.md). None when the
#: loops are seen to have nothing to run (`_handover.idle`): it would only wake them.
HANDOVER_S = 0.0003


class BatchEnd(Protocol):
    """What a batch hook may yield: `early` once the batch's shared transaction has ended
    before the batch (a job committed it), and `error`, that commit's failure. A failure the
    hook raises at its exit that *is* `error` concerns only the jobs up to that point: those
    after it ran on their own."""

    early: bool
    error: BaseException | None


#: What a store may offer its worker: `store._worker_batch()`, a context manager around a
#: run of queued jobs (`SQLiteStore`'s makes their commits durable with one flush at its
#: end), yielding a `BatchEnd` or None.
BatchHook = Callable[[], AbstractContextManager[BatchEnd | None]]


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

    __slots__ = (
        "__weakref__",
        "_after",
        "_batch",
        "_closed",
        "_draining",
        "_executor",
        "_handover",
        "_job",
        "_jobs",
        "_lock",
        "_loop_now",
        "_loops",
        "_timer",
        "_yielded",
        "deferred",
    )

    def __init__(
        self,
        batch: Callable[[], BatchHook | None] | None = None,
        closed: Callable[[], bool] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        # Whether the store is closed for good (`_closed_hook`): its thread then ends once
        # the queue is empty, instead of idling until the store is collected.
        self._closed = closed
        # When the worker thread last let other threads take the GIL (`_run_jobs`, `pause`).
        self._yielded = 0.0
        # The event loops of the running batch's async callers (`_pause` yields to them),
        # and the hand-over to them (`HandOver`).
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._handover = HandOver()
        self._timer: object = None  # the loop work the last hand-over was for (`_pause`)
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: deque[_Job] = deque()
        self._draining = False
        self._batch = batch
        # The jobs the batch running now submitted with `submit_after_batch`: the index in
        # the batch of the job that did, and the future (on the worker thread only).
        self._after: list[tuple[int, Future[Any]]] = []
        self._job = 0  # the index in its batch of the job running now
        #: The running job's event loop: its caller's, or its submitter's (`_BatchStart.loop`).
        self._loop_now: asyncio.AbstractEventLoop | None = None
        #: What jobs submitted with `submit_after_batch`, by a key of their own (the futures
        #: of those not run yet, `_compactor`): read and written by jobs only.
        self.deferred: dict[Any, Future[Any]] = {}

    def submit(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue `function(*args, **kwargs)` behind every job submitted before, in the
        caller's `contextvars` context (as `asyncio.to_thread` does)."""
        future: Future[T] = Future()
        self._queue(future, None, function, args, kwargs)
        return future

    def submit_after_batch(
        self, function: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> Future[T]:
        """`submit`, the job starting a batch of its own: submitted from a job, it runs once
        the batch running now has ended and answered its callers (still before every job
        submitted after it). It never runs if the job that submitted it does not land: the
        job raises, or its batch's commit fails (it would act on writes that were undone)."""
        future = _BatchStart()
        if getattr(_thread_state, "worker", None) is self:
            self._after.append((self._job, future))
            future.loop = self._loop_now  # the worker hands over to it as it runs (`_pause`)
        self._queue(future, None, function, args, kwargs)
        return future

    async def run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run the job on the worker thread and await its result. Cancelling the awaiting
        task cancels the job if it has not started; a started job runs to its end. The
        callers of one batch on one event loop are answered with one wake-up of it."""
        return await self.run_job(Future(), function, *args, **kwargs)

    async def run_job(
        self, future: Future[T], function: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> T:
        """`run`, the job's outcome also set on `future` (once its batch has ended: a failed
        commit is the job's error), which a cancelled caller may look at later."""
        if running_on(self):
            # Awaited on this worker's own thread, inside one of its jobs (an event hook
            # running `asyncio.run` over a call of its store): queued, it would wait for the
            # job that waits for it. It runs now, in that job, as a sync call there would.
            return _run_inline(future, function, *args, **kwargs)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[T] = loop.create_future()
        self._queue(future, (loop, waiter), function, args, kwargs)
        try:
            return await waiter
        except asyncio.CancelledError:
            future.cancel()  # not started: it never runs; started: it runs to its end
            raise

    def _queue(
        self,
        future: Future[Any],
        waiter: _Waiter | None,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        context = contextvars.copy_context()
        call = functools.partial(context.run, function, *args, **kwargs)
        with self._lock:
            if self._executor is None:  # created on first use: a store never awaited has none
                self._executor = ThreadPoolExecutor(
                    max_workers=1,
                    thread_name_prefix=THREAD_NAME,
                    initializer=_mark_thread,
                    initargs=(self,),
                )
            self._jobs.append((future, waiter, call))
            if not self._draining:
                self._draining = True
                self._executor.submit(self._drain)

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
                    if self._closed is not None and self._closed():
                        # Used after its store was closed (each job failed): no thread is
                        # kept for it. A later job starts a new one, as on first use.
                        executor, self._executor = self._executor, None
                        if executor is not None:
                            executor.shutdown(wait=False)
                    return
            self._run_batch()

    def _next(self, after_ok: bool) -> _Job | None:
        """The next queued job; None when there is none or, unless `after_ok` (the batch has
        run only such jobs so far), when it starts a batch of its own (`submit_after_batch`):
        jobs submitted after their batches, queued one after another, share one batch (one
        commit), but none runs in the batch of a caller it must not keep waiting."""
        with self._lock:
            if not self._jobs or (not after_ok and isinstance(self._jobs[0][0], _BatchStart)):
                return None
            return self._jobs.popleft()

    def _run_batch(self) -> None:
        done: list[tuple[_Job, bool, Any]] = []
        self._after.clear()
        hook = self._batch() if self._batch is not None else None
        if hook is None:
            self._run_jobs(done)
        else:
            # A batch's events reach their hooks once it has committed (`_events`).
            with held_until_done() as held:
                end: BatchEnd | None = None
                split = _Split()
                try:
                    with hook() as end:
                        self._run_jobs(done, end, held, split)
                except BaseException as exc:  # the batch's commit failed: its jobs did not land
                    covered = len(done)
                    if split.jobs is not None and end is not None and exc is end.error:
                        # A job committed the batch early, and that failed: the jobs after
                        # it committed on their own and keep their outcomes and events.
                        covered = split.jobs
                        if held is not None:
                            del held[: split.events]
                    elif held is not None:
                        held.clear()
                    done[:covered] = [(job, False, exc) for job, _, _ in done[:covered]]
                    self._cancel_after(range(covered))
        self._loops.clear()  # no loop is kept alive past its batch
        self._loop_now = None
        loops: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for (future, waiter, _), ok, value in done:
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
            if waiter is not None:
                loops.setdefault(waiter[0], []).append((waiter[1], ok, value))
        for loop, answers in loops.items():
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody awaits
                loop.call_soon_threadsafe(_answer, answers)

    def _run_jobs(
        self,
        done: list[tuple[_Job, bool, Any]],
        end: BatchEnd | None = None,
        held: list[Any] | None = None,
        split: _Split | None = None,
    ) -> None:
        """Run queued jobs (at most `BATCH_JOBS` in all) into `done`, noting in `split` how
        many jobs and held events there were when the batch's transaction ended early."""
        self._yielded = time.perf_counter()
        self._loops.clear()
        plain = False  # whether the batch has taken a job not submitted after its batch
        while len(done) < BATCH_JOBS:
            job = self._next(not plain)
            if job is None:
                break
            plain = plain or not isinstance(job[0], _BatchStart)
            if done:
                self._pause()
            if not job[0].set_running_or_notify_cancel():
                continue  # cancelled before it started: never runs
            loop = job[1][0] if job[1] is not None else getattr(job[0], "loop", None)
            if loop is not None and loop not in self._loops:
                self._loops.append(loop)
            self._loop_now = loop
            self._job = len(done)
            try:
                done.append((job, True, job[2]()))
            except BaseException as exc:  # the caller gets it, as from an executor
                done.append((job, False, exc))
                self._cancel_after((self._job,))  # its writes were rolled back
            if split is not None and split.jobs is None and end is not None and end.early:
                split.jobs, split.events = len(done), 0 if held is None else len(held)
        if done:
            self._pause(due_only=True)  # before the batch's commit, which no pause breaks

    def _cancel_after(self, jobs: range | tuple[int, ...]) -> None:
        """Cancel the jobs that these jobs of the batch submitted after it (not started)."""
        for job, future in self._after:
            if job in jobs:
                future.cancel()

    def _pause(self, due_only: bool = False) -> None:
        """Yield the GIL when its callers' event loops have work to run now (`due_work`: a
        timer come due, a callback ready) or, once `YIELD_EVERY_S` has passed since the
        worker last did, unless they are seen to have nothing to run (`idle`): to them by a
        hand-over (`HANDOVER_S`). A loop that does not take one for a piece of work (not
        running: blocked, or closing) gets no second one for it. With `due_only` (before a
        batch's commit), only for due work."""
        timer = None
        if due_only or time.perf_counter() - self._yielded < YIELD_EVERY_S:
            timer = due_work(self._loops, _answer)
            if timer is None or timer is self._timer:
                return
        elif idle(self._loops, _answer):  # nothing to hand over for
            release_gil()  # to any other thread
            self._yielded = time.perf_counter()
            return
        self._timer = None if self._handover.hand_over(self._loops, HANDOVER_S) else timer
        self._yielded = time.perf_counter()


def running_on(worker: StoreWorker) -> bool:
    """Whether this thread is `worker`'s own (inside one of its jobs)."""
    return getattr(_thread_state, "worker", None) is worker


def pause() -> None:
    """On a store's worker thread, inside a job: let other threads (the event loop's) take
    the GIL if the worker has held it for `YIELD_EVERY_S` since it last yielded. A long job
    of Python work calls it between its steps; anywhere else it does nothing. It changes no
    outcome: no other job of the store runs meanwhile."""
    worker = getattr(_thread_state, "worker", None)
    if worker is not None:
        worker._pause()


def _run_inline(future: Future[T], function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`StoreWorker.run_job` on its worker's thread: the call now, its outcome on `future`."""
    future.set_running_or_notify_cancel()
    try:
        value = function(*args, **kwargs)
    except BaseException as exc:
        future.set_exception(exc)
        raise
    future.set_result(value)
    return value


class _BatchStart(Future[Any]):
    """The future of a job that starts a batch (`StoreWorker.submit_after_batch`), and the
    event loop of the job that submitted it, the worker's to hand over to as it runs (a
    compaction `add_items` deferred is its caller's work; docs/performance.md)."""

    loop: asyncio.AbstractEventLoop | None = None


@dataclass(slots=True)
class _Split:
    """Where a batch's shared transaction ended early: the jobs and held events before."""

    jobs: int | None = None
    events: int = 0


#: An async caller's event loop and the future it awaits.
_Waiter = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
#: A queued job: its future, its async caller (if any) and the call.
_Job = tuple[Future[Any], _Waiter | None, Callable[[], Any]]


def _answer(answers: list[tuple[asyncio.Future[Any], bool, Any]], start: int = 0) -> None:
    """On the event loop: settle the futures its callers await, one per turn of the loop
    (the batch woke it once): each caller's continuation runs in its own turn, so timers
    and I/O due meanwhile are not kept waiting behind a whole batch of them."""
    if start + 1 < len(answers):
        asyncio.get_running_loop().call_soon(_answer, answers, start + 1)
    waiter, ok, value = answers[start]
    if waiter.done():  # its caller was cancelled meanwhile
        return
    if ok:
        waiter.set_result(value)
    elif isinstance(value, StopIteration):
        # An asyncio future refuses StopIteration (its caller would wait forever): it
        # reaches the caller as a coroutine raising it would (PEP 479).
        error = RuntimeError("a store call raised StopIteration")
        error.__cause__ = value
        waiter.set_exception(error)
    else:
        waiter.set_exception(value)


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
        worker = StoreWorker(_batch_hook(handle), _closed_hook(handle))
        _workers[key] = (handle, worker)
        return worker


def deferred_on(store: object, key: object) -> Future[Any] | None:
    """What a job deferred on the store's worker under `key` (`StoreWorker.deferred`), for
    a caller that may wait for it: None on that worker's own thread (a job cannot wait for
    a later one), or when the store has no worker."""
    with _workers_lock:
        entry = _workers.get(id(store))
        if entry is None or _referent(entry[0]) is not store:
            return None
    worker = entry[1]
    if getattr(_thread_state, "worker", None) is worker:
        return None
    return worker.deferred.get(key)


def close_worker(store: object) -> None:
    """Close the store's worker, if it has one (after its queued jobs)."""
    with _workers_lock:
        entry = _workers.get(id(store))
        if entry is None or _referent(entry[0]) is not store:
            return
        del _workers[id(store)]
    entry[1].close()


#: Store classes that offer their worker a batch hook (`_worker_batch`): ledgerfold's own
#: (`SQLiteStore` registers itself, `batching`). Any other store is used through its public
#: methods only: none of its names is looked up here (SPEC §17.6), so a private name of a
#: store of one's own is never taken for a hook, nor asked for at all.
_BATCHING: tuple[type, ...] = ()


def batching(cls: type[T]) -> type[T]:
    """Register `cls` (and its subclasses) as a store whose `_worker_batch` its worker uses."""
    global _BATCHING
    _BATCHING = (*_BATCHING, cls)
    return cls


def _batch_hook(handle: Any) -> Callable[[], BatchHook | None] | None:
    """The store's `_worker_batch`, looked up through the weak reference at each batch (a
    worker must not keep its store alive); None for a store not registered (`batching`)."""
    if not issubclass(type(_referent(handle)), _BATCHING):
        return None

    def hook() -> BatchHook | None:
        store = _referent(handle)
        return None if store is None else getattr(store, "_worker_batch", None)

    return hook


def _closed_hook(handle: Any) -> Callable[[], bool] | None:
    """Whether the store is closed for good (its `_worker_closed`; a store collected is),
    for a store registered with `batching`; None for any other store."""
    if not issubclass(type(_referent(handle)), _BATCHING):
        return None

    def closed() -> bool:
        store = _referent(handle)
        return store is None or bool(getattr(store, "_worker_closed", False))

    return closed


def _referent(handle: Any) -> object:
    return handle() if isinstance(handle, weakref.ref) else handle


def _forked() -> None:
    """In a child process after `fork`: no thread of the parent's workers runs here (a job
    queued on one would wait forever), and the workers' lock may have been held by another
    thread at the fork. The child starts afresh: each store gets a new worker on next use."""
    global _workers_lock
    _workers_lock = threading.RLock()
    _workers.clear()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forked)


def _collected(key: int, handle: weakref.ref[Any]) -> None:
    with _workers_lock:
        entry = _workers.get(key)
        if entry is None or entry[0] is not handle:
            return
        del _workers[key]
    # Not waiting: the collector may run this on any thread.
    entry[1].close(wait=False)
