"""`LedgerfoldSession.add_items`' deferred compaction (the built-in summarizer's, run as the
store's next job) under what an agent developer does around it: calls that add nothing,
calls on one conversation at once, a batch whose commit fails. Real SQLite files; nothing
is timed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from integration_stores import RecordingStore
from ledgerfold import (
    CompactionPolicy,
    Compactor,
    InvalidInput,
    SQLiteStore,
    StoreError,
    SummaryRequest,
)
from ledgerfold._worker import worker_for
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from ledgerfold.store._database import Database

#: Due at once: every add_items of two or more new turns compacts.
EVERY_CALL = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)


def _exchange(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]


@pytest.mark.parametrize("added", [[], "not a list"])
def test_wait_compaction_after_an_add_items_adding_nothing_is_none(
    tmp_path: Path, added: Any
) -> None:
    # As documented: None when the latest add_items added nothing or raised, not the
    # outcome of the call before it.
    session = LedgerfoldSession("s", tmp_path / "n.db", policy=EVERY_CALL)

    async def scenario() -> tuple[Any, Any]:
        await session.add_items(_exchange(0) + _exchange(1))
        first = await session.wait_compaction()
        with contextlib.suppress(InvalidInput):
            await session.add_items(added)
        return first, await session.wait_compaction()

    try:
        first, latest = asyncio.run(scenario())
    finally:
        session.close()
    assert first is not None and first.accepted
    assert latest is None


def test_a_batch_whose_commit_fails_runs_no_compaction_of_its_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The append and the plan were rolled back with the batch, and add_items raised: the
    # compaction the plan deferred must not run over turns that were never written (it
    # summarised them and reported a `compaction.stale` event for a call that wrote nothing).
    real = Database._control
    armed = threading.Event()

    def control(self: Database, conn: sqlite3.Connection, statement: Any) -> None:
        if statement == "COMMIT" and armed.is_set():
            armed.clear()
            raise sqlite3.OperationalError("disk I/O error")
        real(self, conn, statement)

    monkeypatch.setattr(Database, "_control", control)
    seen: list[str] = []
    store = SQLiteStore(tmp_path / "f.db")
    session = LedgerfoldSession(
        "s",
        store=store,
        policy=EVERY_CALL,
        on_event=lambda event: seen.append(f"{event.name} {event.reason}"),
    )

    async def scenario() -> Any:
        armed.set()
        with pytest.raises(StoreError, match="disk I/O error"):
            await session.add_items(_exchange(0) + _exchange(1))
        await session.get_items()  # queued behind whatever the failed call left queued
        failed = [name for name in seen if name.startswith("compaction.")]
        await session.add_items(_exchange(2) + _exchange(3))
        return failed, await session.wait_compaction()

    try:
        failed, outcome = asyncio.run(scenario())
        stats = store.stats("s")
    finally:
        store.close()
    assert failed == []
    assert outcome is not None and outcome.accepted
    assert [name for name in seen if name.startswith("compaction.")] == ["compaction.accepted None"]
    assert stats.summaries == {
        "current": 1,
        "superseded": 0,
        "stale": 0,
        "failed": 0,
        "rejected": 0,
    }


class _Holder:
    """An object a worker can belong to (kept alive by the test)."""


def test_a_job_that_raises_after_submitting_after_its_batch_cancels_that_job() -> None:
    holder = _Holder()
    worker = worker_for(holder)
    ran: list[str] = []

    def submits_then(fails: bool) -> Future[None]:
        later = worker.submit_after_batch(ran.append, "failed" if fails else "landed")
        if fails:
            raise RuntimeError("after submitting")
        return later

    try:
        failing = worker.submit(submits_then, True)
        landing = worker.submit(submits_then, False)
        with pytest.raises(RuntimeError):
            failing.result(60)
        landing.result(60).result(60)
        worker.submit(int, "0").result(60)  # after every job submitted above
    finally:
        worker.close()
    assert ran == ["landed"]


@pytest.mark.parametrize("sessions", ["one session", "two sessions of one ID"])
def test_add_items_batched_on_one_conversation_compact_in_turn(
    tmp_path: Path, sessions: str
) -> None:
    # Both calls are queued together (the worker held by a gate): the second's plan used
    # to supersede the first's, still queued, which ended stale with a failed record and
    # a rejected summary. Now each compaction is planned in its own deferred job, in call
    # order: the first covers both appends, the second finds nothing left to do.
    seen: list[str] = []
    store = SQLiteStore(tmp_path / "o.db")
    first, second = (
        LedgerfoldSession(
            "s", store=store, policy=EVERY_CALL, on_event=lambda e: seen.append(e.name)
        )
        for _ in range(2)
    )
    if sessions == "one session":
        second = first
    gate = threading.Event()

    async def scenario() -> list[Any]:
        await first.add_items(_exchange(0) + _exchange(1))
        await first.wait_compaction()
        worker_for(store).submit(gate.wait, 60)
        calls = [
            asyncio.ensure_future(first.add_items(_exchange(2) + _exchange(3))),
            asyncio.ensure_future(second.add_items(_exchange(4) + _exchange(5))),
        ]
        await asyncio.sleep(0)  # both queued behind the gate: one batch
        gate.set()
        await asyncio.gather(*calls)
        return [await first.wait_compaction(), await second.wait_compaction()]

    try:
        outcomes = asyncio.run(scenario())
        stats = store.stats("s")
        summary = store.current_summary("s")
    finally:
        gate.set()
        store.close()
    # One session: wait_compaction() gives its latest call's outcome, twice.
    latest_first = "skipped" if sessions == "one session" else "accepted"
    assert [outcome.status for outcome in outcomes] == [latest_first, "skipped"]
    assert seen == ["compaction.accepted", "compaction.accepted", "compaction.skipped"]
    assert stats.summaries["failed"] == stats.summaries["rejected"] == 0
    assert summary is not None and len(summary.source_ids) == 10


def test_wait_compaction_is_the_latest_calls_when_an_earlier_one_ends_later(
    tmp_path: Path,
) -> None:
    # With a summarizer of one's own, add_items awaits its compaction: the first of two
    # calls at once, whose model answers last, set its outcome last, and wait_compaction()
    # gave it for the latest call's.
    first_called, release = asyncio.Event(), asyncio.Event()

    async def summarizer(request: SummaryRequest) -> str:
        if not first_called.is_set():
            first_called.set()
            await release.wait()  # the first call's model answers once the second has ended
        return f"Summary of {len(request.turns)} turns."

    session = LedgerfoldSession("s", tmp_path / "l.db", policy=EVERY_CALL, summarizer=summarizer)

    async def scenario() -> Any:
        first = asyncio.ensure_future(session.add_items(_exchange(0) + _exchange(1)))
        await first_called.wait()
        await session.add_items(_exchange(2) + _exchange(3))  # the latest call
        latest = await session.wait_compaction()
        release.set()
        await first
        return latest, await session.wait_compaction()

    try:
        latest, after_first = asyncio.run(scenario())
    finally:
        session.close()
    assert latest is not None and latest.accepted
    assert after_first is latest


@pytest.mark.parametrize("held", ["append_many"])
def test_a_call_made_after_add_items_is_cancelled_sees_its_compaction(
    tmp_path: Path, held: str
) -> None:
    # Cancelled while its job runs, add_items lands whole (SPEC §17.6): its compaction with
    # it, before any call made after the cancellation. The compaction was deferred to a job
    # submitted when the held job went on, behind such a call, which then got raw turns.
    store = RecordingStore(tmp_path / "c.db")
    started, release = threading.Event(), threading.Event()
    session = LedgerfoldSession("s", store=store, policy=EVERY_CALL)

    async def scenario() -> list[Any]:
        store.gate[held] = (started, release)
        call = asyncio.ensure_future(session.add_items(_exchange(0) + _exchange(1)))
        assert await asyncio.to_thread(started.wait, 60)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        later = asyncio.ensure_future(session.get_items())
        await asyncio.sleep(0)  # queued while the cancelled call's job is held
        release.set()
        return await later

    try:
        items = asyncio.run(scenario())
        summary = store.inner.current_summary("s")
    finally:
        release.set()
        store.inner.close()
    assert summary is not None and len(summary.source_ids) == 2
    assert items[0]["role"] == "system" and items[1:] == _exchange(1)


def test_a_deferred_compaction_whose_batch_fails_to_commit_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The append committed; the compaction's own batch did not (a full disk). The plan is
    # made in that batch too, so it goes with it: no plan is left without a result, no
    # event was sent for what did not land, and stats() and the events agree (SPEC
    # §17.8); wait_compaction() raises the error and the next add_items compacts.
    real = Database._control
    commits = {"left": -1}  # COMMITs to let through before one fails; -1: none fails

    def control(self: Database, conn: sqlite3.Connection, statement: Any) -> None:
        if statement == "COMMIT" and commits["left"] >= 0:
            commits["left"] -= 1
            if commits["left"] < 0:
                raise sqlite3.OperationalError("disk I/O error")
        real(self, conn, statement)

    monkeypatch.setattr(Database, "_control", control)
    seen: list[tuple[str, Any]] = []
    store = SQLiteStore(tmp_path / "b.db")
    session = LedgerfoldSession(
        "s", store=store, policy=EVERY_CALL, on_event=lambda e: seen.append((e.name, e.reason))
    )

    async def scenario() -> Any:
        # The append's batch commits, and so does the due check's read (its failure would be
        # a failed compaction, not a failed batch); the compaction's batch fails.
        commits["left"] = 2
        await session.add_items(_exchange(0) + _exchange(1))
        with pytest.raises(StoreError, match="disk I/O error"):
            await session.wait_compaction()
        await session.add_items(_exchange(2) + _exchange(3))
        return await session.wait_compaction()

    try:
        outcome = asyncio.run(scenario())
        stats = store.stats("s")
    finally:
        store.close()
    assert outcome is not None and outcome.accepted
    assert seen == [("compaction.accepted", None)]
    assert stats.summaries["failed"] == stats.summaries["rejected"] == 0


def test_clear_session_forgets_the_compaction_outcome_and_its_summary(tmp_path: Path) -> None:
    # The session erases the conversation (as the SDK's sessions delete their items): the
    # outcome wait_compaction() kept held the erased summary, text and all.
    session = LedgerfoldSession("s", tmp_path / "k.db", policy=EVERY_CALL)

    async def scenario() -> tuple[Any, Any]:
        await session.add_items(_exchange(0) + _exchange(1))
        before = await session.wait_compaction()
        await session.clear_session()
        return before, await session.wait_compaction()

    try:
        before, after = asyncio.run(scenario())
    finally:
        session.close()
    assert before is not None and before.accepted
    assert after is None


class _Settled(logging.Handler):
    """Sets `event` when the compactor says it waits for a deferred compaction."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("compaction waits for a deferred one"):
            self.event.set()


def test_a_sync_compact_from_another_thread_waits_for_the_deferred_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # add_items' compaction is in progress on the worker (held at its commit) when another
    # thread compacts the conversation: its plan superseded the deferred one's, which ended
    # stale with a failed and a rejected record. It now waits for it, then plans.
    store = RecordingStore(tmp_path / "t.db")
    session = LedgerfoldSession("s", store=store, policy=EVERY_CALL)
    started, release, settled = threading.Event(), threading.Event(), threading.Event()
    caplog.set_level(logging.DEBUG, logger="ledgerfold.compactor")
    handler = _Settled(settled)
    logging.getLogger("ledgerfold.compactor").addHandler(handler)
    done: list[Any] = []

    def other_thread() -> None:
        try:
            done.append(Compactor(store, EVERY_CALL).compact("s", force=True))
        finally:
            settled.set()

    async def scenario() -> Any:
        store.gate["commit_summary"] = (started, release)
        await session.add_items(_exchange(0) + _exchange(1))
        assert await asyncio.to_thread(started.wait, 60)
        del store.gate["commit_summary"]
        thread = threading.Thread(target=other_thread)
        thread.start()
        # Until it has compacted (before) or says it waits for the deferred one (now).
        assert await asyncio.to_thread(settled.wait, 60)
        release.set()
        await asyncio.to_thread(thread.join, 60)
        return await session.wait_compaction()

    try:
        outcome = asyncio.run(scenario())
        stats = store.inner.stats("s")
    finally:
        release.set()
        logging.getLogger("ledgerfold.compactor").removeHandler(handler)
        session.close()
        store.inner.close()
    assert outcome is not None and outcome.accepted
    assert len(done) == 1 and done[0].status != "accepted"  # nothing left to compact
    assert stats.summaries["failed"] == stats.summaries["rejected"] == 0


@pytest.mark.parametrize("summarizer", ["built-in", "own"])
def test_an_acompact_batched_behind_a_deferred_compaction_plans_after_it(
    tmp_path: Path, summarizer: str
) -> None:
    # acompact (not deferred) queued with an add_items of the conversation: its plan
    # superseded the deferred compaction's, which ended stale with a failed and a rejected
    # record. It now waits for it, then plans.
    seen: list[str] = []
    store = SQLiteStore(tmp_path / "a.db")
    session = LedgerfoldSession(
        "s", store=store, policy=EVERY_CALL, on_event=lambda e: seen.append(e.name)
    )

    async def own(request: SummaryRequest) -> str:
        return f"Summary of {len(request.turns)} turns."

    compactor = Compactor(store, EVERY_CALL, own if summarizer == "own" else None)
    gate = threading.Event()

    async def scenario() -> list[Any]:
        worker_for(store).submit(gate.wait, 60)
        adding = asyncio.ensure_future(session.add_items(_exchange(0) + _exchange(1)))
        compacting = asyncio.ensure_future(compactor.acompact("s", force=True))
        await asyncio.sleep(0)  # both queued behind the gate: one batch
        gate.set()
        await adding
        return [await compacting, await session.wait_compaction()]

    try:
        forced, deferred = asyncio.run(scenario())
        stats = store.stats("s")
    finally:
        gate.set()
        store.close()
    assert deferred is not None and deferred.accepted
    assert forced.status != "stale"
    assert stats.summaries["failed"] == stats.summaries["rejected"] == 0


def test_cancelling_wait_compaction_leaves_the_compaction_to_run(tmp_path: Path) -> None:
    # Two sessions' compactions are queued, the first held at its commit: a wait for the
    # second given up (a timeout, a client gone) cancelled the compaction itself, which
    # then never ran (its plan left without a result, no summary for any later call).
    store = RecordingStore(tmp_path / "w.db")
    one, two = (LedgerfoldSession(sid, store=store, policy=EVERY_CALL) for sid in "xy")
    started, release, gate = threading.Event(), threading.Event(), threading.Event()

    async def scenario() -> list[Any]:
        store.gate["commit_summary"] = (started, release)
        worker_for(store).submit(gate.wait, 60)
        calls = [s.add_items(_exchange(0) + _exchange(1)) for s in (one, two)]
        adding = asyncio.gather(*calls)
        await asyncio.sleep(0)  # both queued behind the gate: one batch
        gate.set()
        await adding
        assert await asyncio.to_thread(started.wait, 60)  # x's compaction holds the worker
        del store.gate["commit_summary"]
        waiting = asyncio.ensure_future(two.wait_compaction())  # y's: queued
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        return [await one.wait_compaction(), await two.wait_compaction(), await two.get_items()]

    try:
        first, second, items = asyncio.run(scenario())
    finally:
        gate.set()
        release.set()
        store.inner.close()
    assert first is not None and first.accepted
    assert second is not None and second.accepted
    assert items[0]["role"] == "system" and items[1:] == _exchange(1)


def test_clear_session_batched_with_add_items_leaves_no_stale_compaction(
    tmp_path: Path,
) -> None:
    # add_items and clear_session queued together (one batch): the compaction add_items
    # made due runs after the erasure. Its plan is made in its own job, so it finds nothing
    # to compact; a plan made with the append would be superseded by the erasure (a stale
    # outcome and event for a conversation that no longer exists).
    seen: list[str] = []
    store = SQLiteStore(tmp_path / "x.db")
    session = LedgerfoldSession(
        "s", store=store, policy=EVERY_CALL, on_event=lambda e: seen.append(e.name)
    )
    gate = threading.Event()

    async def scenario() -> Any:
        worker_for(store).submit(gate.wait, 60)
        calls = [
            asyncio.ensure_future(session.add_items(_exchange(0) + _exchange(1))),
            asyncio.ensure_future(session.clear_session()),
        ]
        await asyncio.sleep(0)  # both queued behind the gate: one batch
        gate.set()
        await asyncio.gather(*calls)
        await asyncio.wrap_future(worker_for(store).submit(int, "0"))  # after the deferred job
        return await session.get_items()

    try:
        items = asyncio.run(scenario())
        stats = store.stats("s")
    finally:
        gate.set()
        store.close()
    assert items == []
    assert "compaction.stale" not in seen and "compaction.failed" not in seen
    assert stats.summaries["failed"] == stats.summaries["rejected"] == 0


@contextlib.contextmanager
def _held_appends(tmp_path: Path) -> Iterator[tuple[RecordingStore, threading.Event, Any]]:
    """A session whose store holds each `append_many` at its start until the event is set
    (the store's `started` event set meanwhile): a test cancels a call there."""
    store = RecordingStore(tmp_path / "c.db")
    started, release = threading.Event(), threading.Event()
    store.gate["append_many"] = (started, release)
    try:
        yield store, release, LedgerfoldSession("s", store=store, policy=EVERY_CALL)
    finally:
        release.set()
        store.inner.close()


def test_wait_compaction_after_a_cancelled_add_items_gives_its_compaction(
    tmp_path: Path,
) -> None:
    # Cancelled while its job runs, add_items lands whole, its compaction with it:
    # wait_compaction() gives that compaction's outcome, not None.
    with _held_appends(tmp_path) as (store, release, session):

        async def scenario() -> Any:
            call = asyncio.ensure_future(session.add_items(_exchange(0) + _exchange(1)))
            assert await asyncio.to_thread(store.gate["append_many"][0].wait, 60)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            release.set()
            return await session.wait_compaction()

        outcome = asyncio.run(scenario())
        summary = store.inner.current_summary("s")
    assert outcome is not None and outcome.accepted
    assert summary is not None and outcome.summary is not None
    assert outcome.summary.id == summary.id


def test_wait_compaction_after_add_items_cancelled_before_its_job_gives_none(
    tmp_path: Path,
) -> None:
    # Cancelled while queued, add_items never runs: nothing of it landed.
    with _held_appends(tmp_path) as (store, release, session):

        async def scenario() -> Any:
            first = asyncio.ensure_future(session.add_items(_exchange(0)))
            assert await asyncio.to_thread(store.gate["append_many"][0].wait, 60)
            second = asyncio.ensure_future(session.add_items(_exchange(1)))
            await asyncio.sleep(0)  # queued behind the held job
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
            release.set()
            await first
            return await session.wait_compaction()

        outcome = asyncio.run(scenario())
        turns = store.inner.load("s").turns
    assert outcome is None
    assert len(turns) == 2
