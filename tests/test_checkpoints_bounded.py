"""Checkpoints stay bounded under repeated edits (SPEC §17.5, §15.2), on real SQLite files.

Each edit of a recent covered turn is rebuilt from a checkpoint: the rebuilt version is
written in a source run of its own. Pruning keeps, beyond `keep_versions`, up to
`keep_checkpoints` spaced ancestors, and must still find them as ancestors after many such
rebuilds: derived data grows with the ledger, not with the number of edits."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore
from test_checkpoints import CONV, PV, accepted


def unique_text(request: lf.SummaryRequest) -> str:
    return f"{request.plan_id}: " + " ".join(item.id for item in request.turns)


def test_an_edit_every_other_compaction_keeps_pruning_within_the_checkpoint_budget(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    policy = lf.CompactionPolicy(
        PV, keep_tail=2, min_new_turns=4, keep_versions=2, keep_checkpoints=8
    )
    with SQLiteStore(path) as store:
        compactor = lf.Compactor(store, policy, unique_text)
        rebuilt = 0
        for round_ in range(120):
            for n in range(4 * round_, 4 * round_ + 4):
                store.append(CONV, "user" if n % 2 else "assistant", f"turn {n}", id=f"t{n}")
            compactor.compact(CONV)
            head = store.current_summary(CONV)
            if round_ % 2 == 0 and head is not None and len(head.source_ids) > 6:
                store.edit(CONV, head.source_ids[-3], body=f"edited in round {round_}")
                outcome = compactor.compact(CONV)
                assert outcome.accepted and outcome.summary is not None
                rebuilt += outcome.summary.parent_id is not None
        assert rebuilt > 50
        # keep_versions + the current one + keep_checkpoints (+ the stale one superseded).
        assert len(accepted(store)) <= 2 + 1 + 8 + 1
        head = store.current_summary(CONV)
        assert head is not None
        covered = len(head.source_ids)
        # The source index holds a few copies of the sources, not one per edit.
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT COUNT(*) FROM run_sources").fetchone()[0]
        assert rows <= 3 * covered
        # The spaced checkpoints are still ancestors: an edit d turns back (a quarter of the
        # way) is rebuilt from a checkpoint at most about 3d back, not rebased.
        back = covered // 4
        victim = head.source_ids[covered - back]
        store.edit(CONV, victim, body="edited a quarter of the way back")
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is not None
        parent = {envelope.id: envelope for envelope in accepted(store)}[outcome.summary.parent_id]
        assert victim not in parent.source_ids
        assert len(parent.source_ids) >= covered - 3 * back
