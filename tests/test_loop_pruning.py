"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. `keep_versions` prunes after each accepted commit, and `prune_versions` works
across conversations and by age (SPEC §15.8)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, InvalidInput, SQLiteStore

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import CONV, Recorder, real_bodies, talk  # noqa: E402


def test_keep_versions_prunes_after_each_accepted_commit(store: SQLiteStore) -> None:
    bodies = real_bodies(30)
    talk(store, bodies, 0, 3)
    compactor = Compactor(
        store,
        # Exactly `keep_versions` (checkpoints, SPEC §17.5: tests/test_checkpoints.py).
        CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=2, keep_checkpoints=0),
        Recorder(),
    )
    compactor.compact(CONV)
    talk(store, bodies, 3, 1)
    failing = Compactor(store, compactor.policy, Recorder(fail=True))
    assert failing.compact(CONV).status == "failed"
    for index in range(4, 10):
        talk(store, bodies, index, 1)
        assert compactor.compact(CONV).accepted
    history = store.summary_history(CONV)
    assert [record.status for record in history] == ["superseded", "superseded", "current"]
    assert store.pruned_count(CONV) == 5  # 7 accepted + 1 failed, 3 kept
    current = store.current_summary(CONV)
    assert current is not None and history[-1].envelope == current
    assert store.context(CONV, "v1").fallback is None
    # The pruned lineage does not break the next rolling compaction.
    talk(store, bodies, 10, 1)
    rolled = compactor.compact(CONV).summary
    assert rolled is not None and rolled.parent_id == current.id
    assert store.pruned_count(CONV) == 6
    # keep_versions=0 keeps the current one only; None keeps every version.
    talk(store, bodies, 11, 1)
    only_current = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, keep_versions=0, keep_checkpoints=0
    )
    assert Compactor(store, only_current, Recorder()).compact(CONV).accepted
    assert [record.status for record in store.summary_history(CONV)] == ["current"]
    keep_all = Compactor(
        store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=None), Recorder()
    )
    for index in range(12, 15):
        talk(store, bodies, index, 1)
        assert keep_all.compact(CONV).accepted
    assert len(store.summary_history(CONV)) == 4


def test_prune_versions_across_conversations_and_by_age(store: SQLiteStore) -> None:
    bodies = real_bodies(20)
    policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, keep_versions=None)
    for conv in ("a", "b"):
        compactor = Compactor(store, policy, Recorder())
        talk(store, bodies, 0, 3, conv=conv)
        for index in range(3, 8):
            talk(store, bodies, index, 1, conv=conv)
            assert compactor.compact(conv).accepted
    # None is an hour old. (Exactly `keep`: no checkpoints, SPEC §17.5.)
    assert store.prune_versions(keep=1, older_than=3600, keep_checkpoints=0) == 0
    assert store.prune_versions(conversation_id=None, keep=1, keep_checkpoints=0) == 6  # 3 of each
    assert (store.pruned_count("a"), store.pruned_count("b")) == (3, 3)
    assert [len(store.summary_history(conv)) for conv in ("a", "b")] == [2, 2]
    assert store.prune_versions(keep=1, keep_checkpoints=0) == 0
    time.sleep(0.05)
    assert store.prune_versions("a", keep=0, older_than=0.01, keep_checkpoints=0) == 1
    assert [record.status for record in store.summary_history("a")] == ["current"]
    assert store.pruned_count("a") == 4 and store.pruned_count("b") == 3
    assert store.prune_versions("never-seen", keep=0) == 0
    for bad in ({"keep": -1}, {"keep": True}, {"keep": 1, "older_than": -1.0}):
        with pytest.raises(InvalidInput) as caught:
            store.prune_versions(**bad)  # type: ignore[arg-type]
        assert caught.value.field in bad
