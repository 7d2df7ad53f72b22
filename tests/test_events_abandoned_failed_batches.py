"""An `abandoned` plan's event is delivered whatever the batch its report runs in comes to
(SPEC §17.8): two batches failing in a row — the one ending a cancelled `acompact`, then the
one its `compaction.failed` (`abandoned`) report runs in, beside another call's write — left
no event, though the plan stays without a result (the next plan records it `abandoned`).
The report writes nothing: a failed commit of its batch undoes nothing it tells of."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._worker import worker_for
from test_events_cancelled_failed_batch import NET, POLICY, _Gated, _summary
from test_group_commit import failing_commits


def test_a_cancelled_acompacts_abandoned_event_survives_a_second_failed_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = failing_commits(monkeypatch)
    events: list[lf.Event] = []
    store = _Gated(tmp_path / "c.db", on_event=events.append)
    store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    store.gated = "commit_summary"
    compactor = lf.Compactor(store, POLICY, _summary, on_event=events.append)
    worker = worker_for(store)
    written: list[BaseException | None] = []

    async def scenario() -> None:
        task = asyncio.create_task(compactor.acompact("c"))
        assert await asyncio.to_thread(store.entered.wait, NET)
        failing.set()  # the disk fails, and keeps failing for the next batch too
        store.release.set()
        # Blocking the loop until the held job's batch has ended (its commit failed), then
        # holding the worker so that the report and another call's write share a batch.
        worker.submit_after_batch(lambda: None).result(timeout=NET)
        gate = threading.Event()
        worker.submit(gate.wait, NET)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # its `abandoned` report is queued, a batch of its own to start
        write = worker.submit_after_batch(store.append, "other", "user", "a write")
        gate.set()
        written.append(await asyncio.to_thread(write.exception, NET))
        failing.clear()
        await compactor.acontext("c")  # a later job of the worker: the events' have run

    asyncio.run(asyncio.wait_for(scenario(), NET))
    assert isinstance(written[0], lf.StoreError)  # the report's batch failed to commit
    store.gated = ""
    assert lf.Compactor(store, POLICY).compact("c").accepted
    records = [(r.status, r.reason) for r in store.summary_history("c")]
    store.close()
    reported = [(e.name, e.reason) for e in events if e.name.startswith("compaction.")]
    assert records == [("failed", "abandoned"), ("current", None)]
    assert reported == [("compaction.failed", "abandoned")]
