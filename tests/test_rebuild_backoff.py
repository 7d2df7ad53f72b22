"""A rebuild from a checkpoint (SPEC §17.5) under the back-off (§15.8). A stale summary is
rebuilt from the newest unchanged checkpoint, folding only the turns after it; the rebuild
stands for the rebase of all the compacted turns, and is due when that rebase would be: with
k consecutive failures, when the compacted turns number at least `min_new_turns × 2^k`. It
used to be due at once whatever the failures, so a failing summarizer was called at every
`compact()` while the summary stayed stale (the state machine's model found it: a rebuild
after two failures, one turn after its checkpoint, expected `not-due`). Real file store."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from compaction_support import stale_with_checkpoints
from ledgerfold import SQLiteStore

CONV = "c"


def _stale_with_checkpoints(store: SQLiteStore, policy: lf.CompactionPolicy) -> int:
    """`stale_with_checkpoints` (summaries by a summarizer that works); the compacted turns'
    count of the plan made now."""
    stale_with_checkpoints(store, lf.Compactor(store, policy, lambda r: "ok: " + r.plan_id), CONV)
    return len(lf.plan_compaction(store.load(CONV), policy.keep_tail, "p").compacted_ids)


def test_a_failing_rebuild_backs_off_as_its_rebase_would(tmp_path: Path) -> None:
    policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=8)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compacted = _stale_with_checkpoints(store, policy)
        assert compacted == 14
        failing = lf.Compactor(store, policy, lambda request: "   ")  # blank: failed
        outcomes = [failing.compact(CONV) for _ in range(7)]
        # 2^k <= 14 for k = 0..3: four attempts; then 16 > 14 compacted turns: not due.
        assert [(o.status, o.reason) for o in outcomes] == [("failed", "blank-summary")] * 4 + [
            ("skipped", "not-due")
        ] * 3
        assert store.consecutive_failures(CONV) == 4
        # A rebuild is still what runs once due (force bypasses the back-off, §15.8).
        fixed = lf.Compactor(store, policy, lambda request: "ok: " + request.plan_id)
        done = fixed.compact(CONV, force=True)
        assert done.accepted and done.summary is not None
        assert done.summary.parent_id is not None  # extended a checkpoint, not a rebase


def test_a_rebuild_with_no_failure_is_due_for_one_new_turn(tmp_path: Path) -> None:
    """Without failures the rebuild is due as before (`min_new_turns` = 1)."""
    policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=8)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        _stale_with_checkpoints(store, policy)
        compactor = lf.Compactor(store, policy, lambda request: "ok: " + request.plan_id)
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is not None
