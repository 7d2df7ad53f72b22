"""How the Compactor calls a summarizer: sync functions, async functions, sync callables
returning awaitables and objects with an async `__call__`, through `compact` and `acompact`,
inside and outside a running event loop, and a cancelled `acompact`."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest

from ledgerfold import InvalidInput, SQLiteStore
from ledgerfold._compactor import CompactionOutcome, CompactionPolicy, Compactor, SummaryRequest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from compaction_support import CONV, Recorder, fill, state  # noqa: E402

# -- sync / async summarizers ----------------------------------------------------------------


def test_compact_runs_an_async_summarizer(store: SQLiteStore) -> None:
    fill(store, 6)

    async def summarize(request: SummaryRequest) -> str:
        await asyncio.sleep(0)
        return f"async summary of {len(request.turns)} turns"

    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarize
    ).compact(CONV)
    assert outcome.summary is not None
    assert outcome.summary.text == "async summary of 4 turns"


def test_compact_runs_a_sync_callable_that_returns_an_awaitable(store: SQLiteStore) -> None:
    fill(store, 6)

    async def later(request: SummaryRequest) -> str:
        return "from a coroutine"

    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), lambda r: later(r)
    ).compact(CONV)
    assert outcome.summary is not None
    assert outcome.summary.text == "from a coroutine"


def test_compact_inside_a_running_loop_with_async_summarizer_is_refused(
    store: SQLiteStore,
) -> None:
    fill(store, 6)

    async def summarize(request: SummaryRequest) -> str:
        return "x"

    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarize)

    async def main() -> None:
        with pytest.raises(InvalidInput, match="acompact") as caught:
            compactor.compact(CONV)
        assert caught.value.field == "summarizer"

    asyncio.run(main())
    assert store.summary_history(CONV) == []


def test_compact_inside_a_running_loop_with_sync_summarizer_works(store: SQLiteStore) -> None:
    fill(store, 6)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))

    async def main() -> CompactionOutcome:
        return compactor.compact(CONV)

    assert asyncio.run(main()).status == "accepted"


def test_acompact_runs_sync_summarizers_off_the_event_loop_thread(store: SQLiteStore) -> None:
    fill(store, 6)
    threads: list[int] = []

    def summarize(request: SummaryRequest) -> str:
        threads.append(threading.get_ident())
        return "sync in a thread"

    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarize)

    async def main() -> tuple[CompactionOutcome, int]:
        return await compactor.acompact(CONV), threading.get_ident()

    outcome, loop_thread = asyncio.run(main())
    assert outcome.status == "accepted"
    assert threads != [loop_thread]
    assert len(threads) == 1


# -- summarizer call paths -------------------------------------------------------------------


class AsyncCallable:
    """An object whose __call__ is a coroutine function."""

    async def __call__(self, request: SummaryRequest) -> str:
        return "from an async __call__"


@pytest.mark.parametrize("call", ["compact", "acompact"])
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_sync_summarizer_result_and_error_on_every_path(
    store: SQLiteStore, call: str, timeout: float | None
) -> None:
    fill(store, 6)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)

    def broken(request: SummaryRequest) -> str:
        raise KeyError("x")

    def run(compactor: Compactor) -> CompactionOutcome:
        if call == "compact":
            return compactor.compact(CONV, force=True)
        return asyncio.run(compactor.acompact(CONV, force=True))

    assert run(Compactor(store, policy, broken, timeout=timeout)) == CompactionOutcome(
        "failed", None, "summarizer-error"
    )
    accepted = run(Compactor(store, policy, Recorder("ok"), timeout=timeout))
    assert accepted.summary is not None
    assert accepted.summary.text == "ok #1"


@pytest.mark.parametrize("call", ["compact", "acompact"])
def test_async_callable_objects_are_awaited(store: SQLiteStore, call: str) -> None:
    fill(store, 6)
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), AsyncCallable()
    )
    if call == "compact":
        outcome = compactor.compact(CONV)
    else:
        outcome = asyncio.run(compactor.acompact(CONV))
    assert outcome.summary is not None
    assert outcome.summary.text == "from an async __call__"


def test_async_callable_object_in_a_running_loop_is_refused_before_planning(
    store: SQLiteStore,
) -> None:
    fill(store, 6)
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), AsyncCallable()
    )

    async def main() -> None:
        with pytest.raises(InvalidInput, match="acompact"):
            compactor.compact(CONV)

    asyncio.run(main())
    assert store.summary_history(CONV) == []


def test_awaitable_from_a_sync_callable_in_a_running_loop_is_refused(
    store: SQLiteStore,
) -> None:
    fill(store, 6)

    async def later(request: SummaryRequest) -> str:
        return "never used"

    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), lambda r: later(r)
    )

    async def main() -> None:
        with pytest.raises(InvalidInput, match="acompact"):
            compactor.compact(CONV)

    asyncio.run(main())
    assert store.current_summary(CONV) is None
    (record,) = store.summary_history(CONV)
    assert (record.status, record.reason) == ("failed", "summarizer-error")


def test_cancelled_acompact_propagates_and_writes_nothing(store: SQLiteStore) -> None:
    fill(store, 6)
    started = asyncio.Event()

    async def forever(request: SummaryRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), forever)

    async def main() -> None:
        task = asyncio.create_task(compactor.acompact(CONV))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    before = state(store)
    asyncio.run(main())
    assert state(store) == before
    assert store.summary_history(CONV) == []


def _jobs_and_threads(
    store: SQLiteStore, compactor: Compactor, monkeypatch: pytest.MonkeyPatch
) -> tuple[CompactionOutcome, int, set[str]]:
    """One `acompact`: its outcome, how many jobs it gave the store's worker, and the names
    of the threads its summarizer ran on."""
    from ledgerfold import ExtractiveSummarizer, _worker

    jobs: list[object] = []
    real_queue = _worker.StoreWorker._queue
    monkeypatch.setattr(
        _worker.StoreWorker,
        "_queue",
        lambda self, *args: (jobs.append(args), real_queue(self, *args))[1],
    )
    threads: set[str] = set()
    real_call = ExtractiveSummarizer.__call__

    def call(self: ExtractiveSummarizer, request: SummaryRequest) -> str:
        threads.add(threading.current_thread().name)
        return real_call(self, request)

    monkeypatch.setattr(ExtractiveSummarizer, "__call__", call)
    outcome = asyncio.run(compactor.acompact(CONV))
    return outcome, len(jobs), threads


def test_acompact_runs_the_built_in_summarizer_in_the_job_that_plans(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default summarizer is quick and bounded: a compaction is one job of the store's
    worker (plan, summarize, commit), not two with a thread hop between them."""
    from ledgerfold._worker import THREAD_NAME

    fill(store, 6)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    outcome, jobs, threads = _jobs_and_threads(store, compactor, monkeypatch)
    assert outcome.status == "accepted" and outcome.summary is not None
    assert jobs == 1
    assert len(threads) == 1 and next(iter(threads)).startswith(THREAD_NAME)
    current = store.current_summary(CONV)
    assert current is not None and current.id == outcome.summary.id


def test_acompact_runs_a_given_summarizer_off_the_worker(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summarizer the caller gives (even the built-in one, or the default with a deadline)
    may be slow: it runs on a thread of its own, between a planning and an ending job."""
    from ledgerfold import ExtractiveSummarizer
    from ledgerfold._worker import THREAD_NAME

    fill(store, 6)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    replaced = Compactor(store, policy)
    replaced.summarizer = ExtractiveSummarizer()  # set after construction: not the built-in
    deadline = Compactor(store, policy)
    deadline.timeout = 30.0
    for compactor in (
        Compactor(store, policy, ExtractiveSummarizer()),
        Compactor(store, policy, timeout=30),
        replaced,
        deadline,
    ):
        store.append(CONV, "user", "one more")
        store.append(CONV, "user", "and another")
        outcome, jobs, threads = _jobs_and_threads(store, compactor, monkeypatch)
        monkeypatch.undo()
        assert outcome.status == "accepted"
        assert jobs == 2
        assert len(threads) == 1 and not next(iter(threads)).startswith(THREAD_NAME)


def test_the_in_job_summarizer_is_the_one_checked(store: SQLiteStore) -> None:
    """The summarizer is read once when deciding to call it in the planning job: one assigned
    after that decision (here, while `timeout` is read) is not the one called."""

    class Swapping(Compactor):
        @property  # type: ignore[override]
        def timeout(self) -> float | None:
            swapped = self.__dict__.get("_swapped", False)
            if self.__dict__.get("_armed") and not swapped:
                self.__dict__["_swapped"] = True

                async def slow(request: SummaryRequest) -> str:
                    return "never called in the planning job"

                self.summarizer = slow
            return None

        @timeout.setter
        def timeout(self, value: float | None) -> None:
            self.__dict__["_timeout"] = value

    fill(store, 6)
    compactor = Swapping(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    compactor.__dict__["_armed"] = True
    outcome = asyncio.run(compactor.acompact(CONV))
    assert outcome.status == "accepted" and outcome.summary is not None
    assert outcome.summary.text != "never called in the planning job"
