"""A cancelled `acompact` whose job's batch then fails to commit (SPEC §17.6, §17.8): the
cancelled call is reported by what landed. Cancelled in its planning job, whose batch's
commit failed: no plan was registered, so no `abandoned` event (there used to be one, of a
plan the store never held). Cancelled in the job ending it, whose batch's commit failed: the
plan is left without a result, which the next plan records `failed`/`abandoned`, so its
`compaction.failed` (`abandoned`) event must come (there used to be none). The loop is kept
from hearing the job's answer until its batch has ended, so the cancellation comes after."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold._worker import worker_for
from test_group_commit import failing_commits

POLICY = lf.CompactionPolicy("cancel-batch-v1", keep_tail=2, min_new_turns=1)
NET = 60  # a safety net for a failing test, never a timing the test relies on


async def _summary(request: lf.SummaryRequest) -> str:
    return "A summary."


class _Gated(lf.SQLiteStore):
    """Holds the job calling `gated` once that call has written (inside the batch)."""

    gated = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entered, self.release = threading.Event(), threading.Event()

    def _hold(self) -> None:
        self.entered.set()
        assert self.release.wait(NET)

    def begin_compaction(self, *args: Any, **kwargs: Any) -> Any:
        work = super().begin_compaction(*args, **kwargs)
        if self.gated == "begin_compaction":
            self._hold()
        return work

    def commit_summary(self, envelope: lf.SummaryEnvelope) -> lf.SummaryWrite:
        write = super().commit_summary(envelope)
        if self.gated == "commit_summary":
            self._hold()
        return write


def _cancelled_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: str
) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
    failing = failing_commits(monkeypatch)
    events: list[lf.Event] = []
    store = _Gated(tmp_path / "c.db", on_event=events.append)
    store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(6)])
    store.gated = gated
    compactor = lf.Compactor(store, POLICY, _summary, on_event=events.append)
    worker = worker_for(store)

    async def scenario() -> None:
        task = asyncio.create_task(compactor.acompact("c"))
        assert await asyncio.to_thread(store.entered.wait, NET)
        failing.set()
        store.release.set()
        # Blocking the loop: a batch of its own runs once the held job's batch has ended
        # (its commit failed); the loop has not heard the job's answer yet.
        worker.submit_after_batch(lambda: None).result(timeout=NET)
        failing.clear()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await compactor.acontext("c")  # a later job of the worker: the events' have run

    asyncio.run(asyncio.wait_for(scenario(), NET))
    store.gated = ""
    assert lf.Compactor(store, POLICY).compact("c").accepted
    records = [(r.status, r.reason) for r in store.summary_history("c")]
    store.close()
    reported = [(e.name, e.reason) for e in events if e.name.startswith("compaction.")]
    return reported, records


def test_cancelled_in_its_planning_whose_batch_failed_reports_no_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported, records = _cancelled_in(tmp_path, monkeypatch, "begin_compaction")
    assert reported == []
    assert records == [("current", None)]  # no plan was left: no abandoned record


def test_cancelled_in_its_end_whose_batch_failed_reports_its_abandoned_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported, records = _cancelled_in(tmp_path, monkeypatch, "commit_summary")
    assert reported == [("compaction.failed", "abandoned")]
    assert records == [("failed", "abandoned"), ("current", None)]
