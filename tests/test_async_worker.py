"""Every async entry point runs store work on the store's one worker thread (SPEC §17.6):
never on the event loop's thread, calls of one store in call order, a cancelled call whole
or not at all, correct under `asyncio.gather` on one store and on several. Thread identity
is recorded per store call; nothing here is timed."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import ledgerfold._handover as handover_module
import ledgerfold._worker as worker_module
from handover_support import Holder, busy
from integration_stores import RecordingStore
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold._worker import THREAD_NAME, close_worker, worker_for
from ledgerfold.integrations.openai_agents import LedgerfoldSession

POLICY = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_session_store_calls_run_on_the_worker_not_the_loop(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "s.db")
    session = LedgerfoldSession("s", store=store, policy=POLICY)  # type: ignore[arg-type]

    async def scenario() -> threading.Thread:
        for n in range(4):
            await session.add_items([_user(f"q{n}"), {"role": "assistant", "content": f"a{n}"}])
        await session.get_items()
        await session.pop_item()
        await session.clear_session()
        return threading.current_thread()

    loop_thread = asyncio.run(scenario())
    names = set(store.names())
    # Every kind of store work the session does happened, and none of it on the loop.
    assert {"append_many", "begin_compaction", "commit_summary", "context", "retract"} <= names
    assert "delete_conversation" in names
    (worker,) = store.threads()
    assert worker is not loop_thread and worker.name.startswith(THREAD_NAME)


def test_compactor_acompact_and_acontext_run_on_the_worker(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "c.db")
    for n in range(6):
        store.append("c", "user", f"turn {n}")
    compactor = Compactor(store, POLICY)  # type: ignore[arg-type]
    store.calls.clear()

    async def scenario() -> threading.Thread:
        assert (await compactor.acompact("c")).accepted
        assert (await compactor.acontext("c")).fallback is None
        return threading.current_thread()

    loop_thread = asyncio.run(scenario())
    assert {"begin_compaction", "commit_summary", "context"} <= set(store.names())
    (worker,) = store.threads()
    assert worker is not loop_thread and worker.name.startswith(THREAD_NAME)


def test_one_worker_per_store_and_another_for_another_store(tmp_path: Path) -> None:
    first, second = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
    assert worker_for(first) is worker_for(first)
    assert worker_for(first) is not worker_for(second)

    async def thread_of(store: SQLiteStore) -> threading.Thread:
        return await worker_for(store).run(threading.current_thread)

    async def scenario() -> list[threading.Thread]:
        return list(await asyncio.gather(thread_of(first), thread_of(first), thread_of(second)))

    a1, a2, b = asyncio.run(scenario())
    assert a1 is a2 and a1 is not b
    first.close()
    second.close()
    # Closed with its store: the thread has ended (close waits for it).
    assert not a1.is_alive() and not b.is_alive()


def test_calls_of_one_store_run_in_call_order_under_gather(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "o.db")
    sessions = [LedgerfoldSession(f"s{n}", store=store, policy=POLICY) for n in range(20)]  # type: ignore[arg-type]
    order: list[str] = []
    original = store.inner.append_many

    def append_many(conversation_id: str, turns: Any) -> Any:
        order.append(conversation_id)
        return original(conversation_id, turns)

    store.inner.append_many = append_many  # type: ignore[method-assign]

    async def scenario() -> list[list[Any]]:
        for round_ in range(3):
            await asyncio.gather(
                *(s.add_items([_user(f"{s.session_id}-{round_}")]) for s in sessions)
            )
        return list(await asyncio.gather(*(s.get_items() for s in sessions)))

    items = asyncio.run(scenario())
    # gather starts its tasks in order; each submits its append first: the appends ran in
    # exactly that order, round after round.
    assert order == [f"s{n}" for n in range(20)] * 3
    for session, got in zip(sessions, items, strict=True):
        texts = [item["content"] for item in got if item.get("role") == "user"]
        assert texts[-1] == f"{session.session_id}-2"
        assert len(store.inner.load(session.session_id).turns) == 3
    (worker,) = store.threads()
    assert worker.name.startswith(THREAD_NAME)


def test_gather_of_sessions_on_separate_stores(tmp_path: Path) -> None:
    stores = [SQLiteStore(tmp_path / f"{n}.db") for n in range(5)]
    sessions = [LedgerfoldSession("s", store=store, policy=POLICY) for store in stores]

    async def one(session: LedgerfoldSession, n: int) -> list[Any]:
        for k in range(6):
            await session.add_items([_user(f"{n}:{k}"), {"role": "assistant", "content": "ok"}])
        return await session.get_items()

    results = asyncio.run(_gather(*(one(s, n) for n, s in enumerate(sessions))))
    for n, (store, items) in enumerate(zip(stores, results, strict=True)):
        bodies = [turn.body for turn in store.load("s").turns]
        assert bodies == [text for k in range(6) for text in (f"{n}:{k}", "ok")]
        assert store.current_summary("s") is not None  # each compacted on its own store
        assert items[-1] == {"role": "assistant", "content": "ok"}
        store.close()


async def _gather(*awaitables: Any) -> list[Any]:
    return list(await asyncio.gather(*awaitables))


def test_a_call_cancelled_before_it_starts_never_lands(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    session = LedgerfoldSession("s", store=store)
    hold, held = threading.Event(), threading.Event()

    def block() -> None:
        held.set()
        hold.wait(timeout=60)  # a safety net for a failing test, not a timing

    async def scenario() -> list[Any]:
        blocker = asyncio.ensure_future(worker_for(store).run(block))
        await asyncio.to_thread(held.wait, 60)
        adding = asyncio.ensure_future(session.add_items([_user("never")]))
        for _ in range(5):
            await asyncio.sleep(0)  # let it submit its job behind the blocker
        adding.cancel()
        await asyncio.sleep(0)  # the loop hands the cancellation on to the queued job
        hold.set()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await adding
        return await session.get_items()

    assert asyncio.run(scenario()) == []
    assert store.load("s").turns == ()


def test_a_call_cancelled_while_it_runs_lands_whole_before_the_next(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "y.db")
    session = LedgerfoldSession("s", store=store)  # type: ignore[arg-type]
    started, release = threading.Event(), threading.Event()
    store.gate["append_many"] = (started, release)
    items = [_user("one"), {"role": "assistant", "content": "two"}]

    async def scenario() -> list[Any]:
        adding = asyncio.ensure_future(session.add_items(items))
        await asyncio.to_thread(started.wait, 60)
        adding.cancel()  # the append is in progress on the worker
        reading = asyncio.ensure_future(session.get_items())  # queued behind it
        del store.gate["append_many"]
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await adding
        return await reading

    # The cancelled append landed whole, before the read that was called after it.
    assert asyncio.run(scenario()) == items
    assert [turn.body for turn in store.inner.load("s").turns] == ["one", "two"]


def test_a_worker_closed_with_its_store_is_replaced_on_next_use(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "z.db")
    first = worker_for(store)
    close_worker(store)
    assert worker_for(store) is not first
    store.close()

    async def after_close() -> None:
        await LedgerfoldSession("s", store=store).get_items()

    from ledgerfold import StoreError

    with pytest.raises(StoreError):  # the store says it is closed, not the worker
        asyncio.run(after_close())


def test_a_store_collected_while_another_gets_its_worker_does_not_deadlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store in a reference cycle is freed by the cycle collector, which may run at any
    allocation: also while `worker_for` holds the workers' lock for another store. The
    weak reference's callback then takes that lock on the same thread; it must not wait
    for itself."""
    import gc

    from ledgerfold import _worker

    class Cyclic:
        def __init__(self) -> None:
            self.me = self

    dead = Cyclic()
    worker_for(dead)
    del dead
    real_hook = _worker._batch_hook

    def collecting_hook(handle: Any) -> Any:
        gc.collect()  # as an allocation inside the lock may
        return real_hook(handle)

    monkeypatch.setattr(_worker, "_batch_hook", collecting_hook)
    done = threading.Event()

    def get() -> None:
        worker_for(Cyclic())
        done.set()

    thread = threading.Thread(target=get, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert done.is_set(), "worker_for deadlocked on the workers' lock"


class _CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the wake-ups other threads ask of it."""

    threadsafe_calls = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:
        self.threadsafe_calls += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def test_the_callers_of_one_batch_are_answered_with_one_wake_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twenty calls queued together (one batch) cost the loop one wake-up, not twenty: a
    batch's callers hear back at its end, all at once."""
    # No yield to the loop either (a hand-over is a wake-up too), however slow the machine.
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)
    holder = Holder()  # kept alive: a collected store's worker is closed
    worker = worker_for(holder)
    gate = threading.Event()

    async def scenario() -> list[int]:
        worker.submit(gate.wait, 60)  # a plain submit: no loop to wake
        calls = [asyncio.ensure_future(worker.run(lambda n=n: n * n)) for n in range(20)]
        await asyncio.sleep(0)  # every call is queued behind the gate
        gate.set()
        return await asyncio.gather(*calls)

    loop = _CountingLoop()
    try:
        assert loop.run_until_complete(scenario()) == [n * n for n in range(20)]
        assert loop.threadsafe_calls == 1
    finally:
        loop.close()
        worker.close()


def test_a_job_failing_in_a_batch_fails_its_caller_alone() -> None:
    holder = Holder()  # kept alive: a collected store's worker is closed
    worker = worker_for(holder)
    gate = threading.Event()

    def fail() -> None:
        raise ValueError("this job fails")

    async def scenario() -> list[Any]:
        worker.submit(gate.wait, 60)
        calls = [worker.run(int, "1"), worker.run(fail), worker.run(int, "3")]
        futures = [asyncio.ensure_future(call) for call in calls]
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(*futures, return_exceptions=True)

    try:
        first, failed, third = asyncio.run(scenario())
    finally:
        worker.close()
    assert (first, third) == (1, 3) and isinstance(failed, ValueError)


def _recorded_yields(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every bare yield of the GIL the worker makes (`release_gil`, where no loop is handed
    over to: these jobs have no async caller), in order."""
    yields: list[str] = []
    real = handover_module.release_gil

    def release_gil() -> None:
        yields.append("yield")
        real()

    monkeypatch.setattr(worker_module, "release_gil", release_gil)
    monkeypatch.setattr(handover_module, "release_gil", release_gil)
    return yields


def test_the_worker_lets_the_loop_in_between_long_jobs_not_after_every_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between jobs the worker yields the GIL once `YIELD_EVERY_S` has passed since it last
    did: after every job of 2 ms of work, never within a run of quick ones."""
    yields = _recorded_yields(monkeypatch)

    def batch(job_seconds: float, jobs: int) -> int:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        gate = threading.Event()
        worker.submit(gate.wait, 60)
        futures = [worker.submit(busy, job_seconds) for _ in range(jobs)]
        yields.clear()
        gate.set()
        for future in futures:
            future.result(timeout=60)
        worker.close()
        return len(yields)

    assert batch(2 * worker_module.YIELD_EVERY_S, 6) >= 5  # after each job (the last aside)
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 60.0)
    assert batch(0.0, 50) == 0


def test_a_long_job_lets_the_loop_in_where_it_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pause()` inside a job yields the GIL once `YIELD_EVERY_S` has passed since the
    worker last did (between jobs or at an earlier pause); off a worker thread it does
    nothing."""
    yields = _recorded_yields(monkeypatch)

    def steps(step_seconds: float, count: int) -> None:
        for _ in range(count):
            busy(step_seconds)
            worker_module.pause()

    holder = Holder()  # kept alive: a collected store's worker is closed
    worker = worker_for(holder)
    worker.submit(steps, 2 * worker_module.YIELD_EVERY_S, 4).result(timeout=60)
    assert len(yields) == 4
    yields.clear()
    worker.submit(steps, 0.0, 50).result(timeout=60)  # quick steps: no yield
    assert yields == []
    worker.close()
    steps(2 * worker_module.YIELD_EVERY_S, 2)  # not on a worker thread
    assert yields == []


def test_a_yield_hands_the_gil_to_the_event_loop_of_the_batchs_callers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a yield the worker posts a callback to the event loop its async caller awaits on
    and waits until that loop has run it, so what the loop had ready then (here a callback
    the job posted just before) runs before the job goes on, at every yield; with a bare
    release of the GIL alone the worker mostly takes it straight back."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 0.0)  # every pause yields
    monkeypatch.setattr(worker_module, "HANDOVER_S", 60.0)  # no cap: the order is certain
    order: list[str] = []

    def job(loop: asyncio.AbstractEventLoop) -> None:
        for n in range(20):
            loop.call_soon_threadsafe(order.append, f"loop {n}")
            worker_module.pause()
            order.append(f"job {n}")

    async def main() -> None:
        holder = Holder()  # kept alive: a collected store's worker is closed
        worker = worker_for(holder)
        await worker.run(job, asyncio.get_running_loop())
        worker.close()

    asyncio.run(main())
    assert order == [entry for n in range(20) for entry in (f"loop {n}", f"job {n}")]


def test_a_yield_does_not_wait_for_a_closed_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller whose event loop has closed while its job runs gets no hand-over: the
    worker yields with `release_gil` instead of waiting for a loop that never runs."""
    monkeypatch.setattr(worker_module, "YIELD_EVERY_S", 0.0)
    monkeypatch.setattr(worker_module, "HANDOVER_S", 3600.0)  # waited for, it would hang
    holder = Holder()  # kept alive: a collected store's worker is closed
    worker = worker_for(holder)
    started, closed = threading.Event(), threading.Event()

    def job() -> None:
        started.set()
        closed.wait(60)
        for _ in range(3):
            worker_module.pause()

    async def caller() -> None:
        task = asyncio.ensure_future(worker.run(job))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 60)
        task.cancel()  # the job has started: it runs to its end

    asyncio.run(caller())  # the caller's loop is closed when this returns
    closed.set()
    assert worker.submit(lambda: "after").result(timeout=30) == "after"
    worker.close()
