"""Pruning keeps the back-off's count (SPEC §17.5 first bullet): the
`failed` records since the newest accepted summary survive `prune_versions(keep=0)`."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf

PV = "p"


def failing(request: lf.SummaryRequest) -> str:
    raise RuntimeError("model down")


def test_prune_keep_zero_does_not_reset_the_back_off(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    for index in range(12):
        store.append("c", "user", f"turn {index}", id=f"t{index}")
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=4)
    assert lf.Compactor(store, policy).compact("c").status == "accepted"
    for index in range(12, 20):
        store.append("c", "user", f"turn {index}", id=f"t{index}")
    down = lf.Compactor(store, policy, failing)
    assert down.compact("c").status == "failed"
    assert down.compact("c", force=True).status == "failed"
    assert store.consecutive_failures("c") == 2
    deleted = store.prune_versions("c", keep=0)
    assert deleted == 0  # only the current summary and the two failures exist
    assert store.consecutive_failures("c") == 2
    # 8 new turns < 4 * 2**2: still backing off.
    assert lf.Compactor(store, policy).compact("c").reason == "not-due"
    statuses = [record.status for record in store.summary_history("c")]
    assert statuses == ["current", "failed", "failed"]
    store.close()


def test_failures_before_the_newest_accepted_summary_are_pruned(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    for index in range(12):
        store.append("c", "user", f"turn {index}", id=f"t{index}")
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1)
    assert lf.Compactor(store, policy, failing).compact("c").status == "failed"
    assert lf.Compactor(store, policy).compact("c").status == "accepted"
    assert store.prune_versions("c", keep=0) == 1
    assert [r.status for r in store.summary_history("c")] == ["current"]
    store.close()
