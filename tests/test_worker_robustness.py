"""The store's worker thread (SPEC §17.6) keeps answering its callers whatever a hook or
the process does: an event hook raising a `BaseException` on the worker (§17.8: a hook
that raises is logged, never propagated), and a process forked after the store was used
from an event loop. Every wait here is bounded: a hang fails the test instead."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold._worker import THREAD_NAME, close_worker, worker_for

POLICY = lf.CompactionPolicy("robust-v1", keep_tail=4, min_new_turns=1)


def _filled(path: Path, hook: lf.EventHook) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path, on_event=hook)
    store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    return store


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
def test_a_hook_raising_a_base_exception_on_the_worker_breaks_nothing(
    tmp_path: Path, raised: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    """Held events are handed on the worker once its batch has committed: a hook raising
    `KeyboardInterrupt` there used to end the worker's loop, so the call never heard back
    and every later call of the store hung."""
    seen: list[str] = []

    def hook(event: lf.Event) -> None:
        seen.append(event.name)
        raise raised

    store = _filled(tmp_path / "h.db", hook)
    compactor = lf.Compactor(store, POLICY, on_event=hook)

    async def scenario() -> tuple[lf.CompactionOutcome, lf.AssembledContext]:
        outcome = await asyncio.wait_for(compactor.acompact("c"), 20)
        context = await asyncio.wait_for(compactor.acontext("c"), 20)
        return outcome, context

    with caplog.at_level(logging.WARNING, logger="ledgerfold.events"):
        outcome, context = asyncio.run(scenario())
    store.close()
    assert outcome.accepted and outcome.summary is not None
    assert context.fallback is None
    assert seen == ["compaction.accepted"]
    assert any(raised.__name__ in record.getMessage() for record in caplog.records)


def test_a_sync_callers_interrupt_in_a_hook_still_reaches_it(tmp_path: Path) -> None:
    """On the caller's own thread Ctrl-C stays Ctrl-C (the write has committed)."""

    def hook(event: lf.Event) -> None:
        raise KeyboardInterrupt

    with _filled(tmp_path / "s.db", hook) as store:
        with pytest.raises(KeyboardInterrupt):
            lf.Compactor(store, POLICY, on_event=hook).compact("c")
        assert store.current_summary("c") is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_store_used_from_a_loop_works_async_in_a_forked_child(tmp_path: Path) -> None:
    """A pre-forking server opens and uses the store, then forks: the parent's worker
    thread does not exist in the child, where an async call used to queue on it and hang."""
    store = _filled(tmp_path / "f.db", lambda event: None)
    compactor = lf.Compactor(store, POLICY)
    assert asyncio.run(compactor.acontext("c")).fallback == "no-summary"  # the worker runs
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code only
        code = 1
        try:
            signal.alarm(30)  # a hang ends the child, not the test run
            outcome = asyncio.run(asyncio.wait_for(compactor.acompact("c"), 20))
            code = 0 if outcome.accepted else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.current_summary("c") is not None  # the child's summary, seen here
    store.close()


def test_a_hook_on_the_worker_may_await_its_own_store(tmp_path: Path) -> None:
    """A hook runs on the store's worker thread (after its batch has committed). One that
    awaits an async call of that store (`asyncio.run(compactor.acontext(...))`) used to
    queue it behind its own job and wait for it forever; the call now runs in that job, as
    a sync call there does."""
    seen: list[tuple[str, str | None]] = []
    holder: list[lf.Compactor] = []

    def hook(event: lf.Event) -> None:
        if event.name == "compaction.accepted":
            context = asyncio.run(asyncio.wait_for(holder[0].acontext("c"), 10))
            seen.append((event.name, context.fallback))

    store = _filled(tmp_path / "r.db", hook)
    holder.append(lf.Compactor(store, POLICY, on_event=hook))
    outcome = asyncio.run(asyncio.wait_for(holder[0].acompact("c"), 30))
    store.close()
    assert outcome.accepted
    assert seen == [("compaction.accepted", None)]  # the hook saw the committed summary


def test_a_job_raising_stop_iteration_reaches_its_caller() -> None:
    """A store of one's own whose method raises `StopIteration` (a `next()` on an empty
    iterator): an asyncio future refuses that exception, so the caller used to wait forever.
    It gets a `RuntimeError` from it, as from a coroutine raising it (PEP 479)."""

    class Store:  # any object: the worker is looked up by identity
        pass

    store = Store()

    def broken() -> None:
        next(iter(()))

    async def scenario() -> BaseException:
        with pytest.raises(RuntimeError) as caught:
            await asyncio.wait_for(worker_for(store).run(broken), 10)
        return caught.value

    error = asyncio.run(scenario())
    close_worker(store)
    assert isinstance(error.__cause__, StopIteration)


def test_a_hook_may_compact_while_a_deferred_compaction_is_queued(tmp_path: Path) -> None:
    """A `get_items` batched with an `add_items` that deferred its compaction reports its
    fallback; a hook compacting that conversation then (on the worker, once the batch has
    committed) waited for the deferred job, which cannot start before the hook returns."""
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    policy = lf.CompactionPolicy("robust-v1", keep_tail=2, min_new_turns=1, trigger_tokens=10)
    outcomes: list[str] = []
    compactors: list[lf.Compactor] = []

    def hook(event: lf.Event) -> None:
        if event.name == "context.fallback" and not outcomes:
            outcome = asyncio.run(asyncio.wait_for(compactors[0].acompact("s"), 10))
            outcomes.append(outcome.status)

    store = lf.SQLiteStore(tmp_path / "d.db")
    compactors.append(lf.Compactor(store, policy))
    session = LedgerfoldSession("s", store=store, policy=policy, on_event=hook)
    words = [{"role": "user", "content": "word " * 30} for _ in range(4)]

    async def scenario() -> lf.CompactionOutcome | None:
        # The two calls queue behind a job holding the worker, so they share its batch
        # (else, on a loaded host, the worker may take the append alone before the read).
        gate = threading.Event()
        held = asyncio.ensure_future(worker_for(store).run(gate.wait, 10))
        await asyncio.sleep(0)
        both = asyncio.gather(session.add_items(words), session.get_items())
        for _ in range(3):
            await asyncio.sleep(0)
        gate.set()
        await asyncio.wait_for(both, 30)
        assert await held
        return await asyncio.wait_for(session.wait_compaction(), 30)

    deferred = asyncio.run(scenario())
    store.close()
    assert outcomes == ["accepted"]  # the hook's compaction, first
    assert deferred is not None and deferred.status == "skipped"  # nothing left for it


def test_wait_compaction_on_the_worker_before_its_compaction_ran_is_refused(
    tmp_path: Path,
) -> None:
    """A hook on the store's worker awaiting `wait_compaction()` while the compaction it
    waits for is still queued (that job cannot start before the hook's job returns) waited
    forever: it raises `InvalidInput` naming it. The pending compaction is a real job of the
    worker, queued behind the job the hook runs in."""
    from concurrent.futures import Future

    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    store = lf.SQLiteStore(tmp_path / "w.db")
    session = LedgerfoldSession("s", store=store)
    worker = worker_for(store)
    queued: Future[object] = Future()

    def in_a_hook() -> tuple[str | None, str | None]:
        session._compaction = queued  # what `add_items` leaves: its deferred compaction
        try:
            asyncio.run(asyncio.wait_for(session.wait_compaction(), 5))
        except lf.InvalidInput as error:
            return error.field, error.problem
        return None, None

    job = worker.submit(in_a_hook)
    worker.submit(lambda: queued.set_result(None))  # the compaction: after the hook's job
    assert job.result(timeout=30) == ("wait_compaction", "not-allowed")
    assert asyncio.run(session.wait_compaction()) is None  # off the worker: waits, then gives it
    store.close()


def _store_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def test_a_closed_store_used_again_keeps_no_worker_thread(tmp_path: Path) -> None:
    """A custom summarizer's `acompact` whose store is closed while the model runs ends
    `failed` (`store-error`), and so does any async call made after: the worker those calls
    get does not keep a thread idling until the store object is collected."""
    store = _filled(tmp_path / "closed.db", lambda event: None)

    asked, closed = asyncio.Event(), asyncio.Event()

    async def summarize(request: Any) -> str:
        asked.set()
        await closed.wait()  # the model runs while the store is closed
        return "a summary"

    compactor = lf.Compactor(store, POLICY, summarize)

    async def close_meanwhile() -> lf.CompactionOutcome:
        running = asyncio.ensure_future(compactor.acompact("c", force=True))
        await asyncio.wait_for(asked.wait(), 60)  # a safety net, not a timing
        store.close()
        closed.set()
        return await running

    before = set(_store_threads())
    outcome = asyncio.run(close_meanwhile())
    assert (outcome.status, outcome.reason) == ("failed", "store-error")
    with pytest.raises(lf.StoreError):
        asyncio.run(compactor.acontext("c"))
    for thread in set(_store_threads()) - before:
        thread.join(timeout=5)
    assert set(_store_threads()) <= before


def test_an_open_store_keeps_its_one_worker_thread(tmp_path: Path) -> None:
    store = _filled(tmp_path / "open.db", lambda event: None)
    compactor = lf.Compactor(store, POLICY)
    before = set(_store_threads())
    asyncio.run(compactor.acontext("c"))
    (first,) = set(_store_threads()) - before
    asyncio.run(compactor.acontext("c"))
    assert first.is_alive() and set(_store_threads()) - before == {first}
    store.close()
