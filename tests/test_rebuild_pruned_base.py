"""A rebuild whose checkpoint another connection prunes while the summarizer writes (SPEC
§15.4, §15.8, §17.5), on one real SQLite file through two `SQLiteStore` objects: the plan
was overtaken, as by another connection's plan, so the result is refused as `stale-source`
/ `superseded-plan` (outcome `stale`), which is no failure of the summarizer and leaves the
back-off's count alone. It used to end `failed` with `invalid-summary`/`plan-mismatch`, the
verdict of a result built on the wrong parent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import ledgerfold as lf
from compaction_support import stale_with_checkpoints
from ledgerfold import SQLiteStore

CONV = "c"
PV = "v1"


def _meddling(meddle: list[Callable[[], object]]) -> Callable[[lf.SummaryRequest], str]:
    """A summarizer that first runs what `meddle` holds (another connection's write)."""

    def summarizer(request: lf.SummaryRequest) -> str:
        while meddle:
            meddle.pop()()
        return f"{request.plan_id}: " + " ".join(item.id for item in request.turns)

    return summarizer


def test_a_prune_during_a_rebuild_supersedes_its_plan(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    events: list[lf.Event] = []
    meddle: list[Callable[[], object]] = []

    summarizer = _meddling(meddle)
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=8)
    with SQLiteStore(path) as mine, SQLiteStore(path) as other:
        compactor = lf.Compactor(mine, policy, summarizer, on_event=events.append)
        stale_with_checkpoints(mine, compactor, CONV)  # stale: rebuilt from a checkpoint
        meddle.append(lambda: other.prune_versions(CONV, keep=0, keep_checkpoints=0))
        outcome = compactor.compact(CONV)
        assert (outcome.status, outcome.reason) == ("stale", "superseded-plan")
        assert events[-1].name == "compaction.stale" and events[-1].reason == "superseded-plan"
        assert mine.consecutive_failures(CONV) == 0
        assert [r.status for r in mine.summary_history(CONV)][-1] == "rejected"
        retried = compactor.compact(CONV)  # due at once still: a rebase of the live turns
        assert retried.accepted and retried.summary is not None


def test_a_rebuild_whose_checkpoint_stays_is_accepted(tmp_path: Path) -> None:
    """The same prune keeping the checkpoint (keep_checkpoints): the rebuild lands."""
    path = tmp_path / "ledger.db"
    meddle: list[Callable[[], object]] = []

    summarizer = _meddling(meddle)
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=8)
    with SQLiteStore(path) as mine, SQLiteStore(path) as other:
        compactor = lf.Compactor(mine, policy, summarizer)
        head = stale_with_checkpoints(mine, compactor, CONV)
        meddle.append(lambda: other.prune_versions(CONV, keep=8))
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == head.parent_id
