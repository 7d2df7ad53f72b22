"""A damaged checkpoint (SPEC §17.5, §15.5's error rule), on a real SQLite file: a
superseded version whose text another tool left not valid UTF-8 is no usable checkpoint.
Rebuilding after an edit skips it (the next one, or a rebase), as a damaged current record is
replaced, instead of every compaction of the conversation raising `StoreError`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore

CONV = "c"
PV = "v1"


def unique_text(request: lf.SummaryRequest) -> str:
    return f"{request.plan_id}: " + " ".join(item.id for item in request.turns)


def test_a_checkpoint_whose_text_is_not_utf8_is_skipped_by_the_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=4, keep_versions=2)
    with SQLiteStore(path) as store:
        compactor = lf.Compactor(store, policy, unique_text)
        for round_ in range(20):
            for n in range(4 * round_, 4 * round_ + 4):
                store.append(CONV, "user" if n % 2 else "assistant", f"turn {n}", id=f"t{n}")
            compactor.compact(CONV)
        head = store.current_summary(CONV)
        assert head is not None and head.parent_id is not None
        store.edit(CONV, head.source_ids[-1], body="corrected")
    with sqlite3.connect(path) as db:  # the newest checkpoint, damaged by another tool
        db.execute(
            "UPDATE summaries SET text = CAST(x'ff41' AS TEXT) WHERE id = ?", (head.parent_id,)
        )
    with SQLiteStore(path) as store:
        outcome = lf.Compactor(store, policy, unique_text).compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id != head.parent_id
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None


def test_a_checkpoint_another_tool_changed_is_not_extended(tmp_path: Path) -> None:
    """A wrong fingerprint in the record, or a source digest changed in the index: the
    checkpoint no longer proves what its text was made from, so the rebuild skips it."""
    for column in ("fingerprint", "digest"):
        path = tmp_path / f"{column}.db"
        policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=4, keep_versions=2)
        with SQLiteStore(path) as store:
            compactor = lf.Compactor(store, policy, unique_text)
            for round_ in range(20):
                for n in range(4 * round_, 4 * round_ + 4):
                    store.append(CONV, "user", f"turn {n}", id=f"t{n}")
                compactor.compact(CONV)
            head = store.current_summary(CONV)
            assert head is not None and head.parent_id is not None
            store.edit(CONV, head.source_ids[-1], body="corrected")
        with sqlite3.connect(path) as db:
            if column == "fingerprint":
                db.execute(
                    "UPDATE summaries SET source_fingerprint = ? WHERE id = ?",
                    ("0" * 64, head.parent_id),
                )
            else:  # the run the checkpoint reads its sources from (shared along the lineage)
                db.execute(
                    "UPDATE run_sources SET turn_digest = zeroblob(32) WHERE position = 0"
                    " AND run_pk = (SELECT source_run FROM summaries WHERE id = ?)",
                    (head.parent_id,),
                )
        with SQLiteStore(path) as store:
            outcome = lf.Compactor(store, policy, unique_text).compact(CONV)
            assert outcome.accepted and outcome.summary is not None
            assert outcome.summary.parent_id != head.parent_id, column
            context = store.context(CONV, PV)
            assert context.fallback is None and context.summary is not None
