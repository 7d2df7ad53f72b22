"""SPEC §15.5, §16.5, §17.5: an erasure leaves nothing of the erased text, also when a
compaction is in flight. Its late result extends a summary that quoted the erased turn; the
commit refuses it, and must not keep it as a `rejected` record (its text may quote the turn,
and the erasure already took every version citing it). A refused result citing a turn that
was only retracted is still recorded. On a real SQLite file, a second store object erasing
while the summarizer writes."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledgerfold as lf

SECRET = "ZQXSECRETMARKER"


@pytest.mark.parametrize("erase", [True, False], ids=["erased", "retracted"])
def test_a_late_result_quoting_an_erased_turn_is_not_kept(tmp_path: Path, erase: bool) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store, lf.SQLiteStore(path) as other:
        for n in range(20):
            store.append("c", "user", f"my code is {SECRET}" if n == 3 else f"turn {n}", id=f"t{n}")
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        first = lf.Compactor(store, policy).compact("c")  # the extractive text quotes t3
        assert first.summary is not None and SECRET in first.summary.text
        for n in range(20, 24):
            store.append("c", "user", f"turn {n}", id=f"t{n}")

        def summarizer(request: lf.SummaryRequest) -> str:
            other.retract("c", "t3", erase=erase)  # while the model writes
            return f"{request.previous_summary}\nand more"

        outcome = lf.Compactor(store, policy, summarizer).compact("c")
        assert outcome.status != "accepted"
        history = store.summary_history("c")
        if erase:
            assert history == []  # nothing citing the erased turn, nor quoting it
            assert store.pruned_count("c") >= 2  # the erased summary and the late result
        else:
            assert [record.status for record in history] == ["stale", "rejected"]
    if erase:
        for file in tmp_path.iterdir():
            assert SECRET.encode() not in file.read_bytes(), file.name


@pytest.mark.parametrize("erase", [True, False], ids=["erased", "retracted"])
def test_an_erasure_under_a_compaction_makes_it_stale_not_failed(
    tmp_path: Path, erase: bool
) -> None:
    """SPEC §13: a commit refused because the ledger moved under it is `stale` (reason: the
    check's), as for a retraction; an erasure, which also takes the parent's record, is no
    `failed` compaction (`plan-mismatch`) and adds nothing to the back-off."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store, lf.SQLiteStore(path) as other:
        for n in range(20):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert lf.Compactor(store, policy).compact("c").status == "accepted"
        for n in range(20, 24):
            store.append("c", "user", f"turn {n}", id=f"t{n}")

        def summarizer(request: lf.SummaryRequest) -> str:
            other.retract("c", "t3", erase=erase)
            return "a summary"

        outcome = lf.Compactor(store, policy, summarizer).compact("c")
        assert (outcome.status, outcome.reason) == ("stale", "source-missing")
        assert not any(record.status == "failed" for record in store.summary_history("c"))


def test_a_purge_under_a_rebuild_makes_it_stale_not_failed(tmp_path: Path) -> None:
    """The same for a purge: it erases the checkpoint a rebuild extends (SPEC §17.5: a purge
    removes every version citing a purged turn but the sealed summary and its base)."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store, lf.SQLiteStore(path) as other:
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=None)
        for n in range(24):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
            if n % 6 == 5:
                assert lf.Compactor(store, policy).compact("c").status == "accepted"
        store.edit("c", "t20", body="edited")  # stale: the next compaction rebuilds

        def summarizer(request: lf.SummaryRequest) -> str:
            assert request.previous_summary is not None  # from a checkpoint
            other.purge_through("c", 3, "retention")
            return "a summary"

        outcome = lf.Compactor(store, policy, summarizer).compact("c")
        assert (outcome.status, outcome.reason) == ("stale", "source-missing")
