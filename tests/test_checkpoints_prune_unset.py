"""Pruning while no summary is current (SPEC §17.5, §15.5), on real SQLite files: an erasure
of a covered turn takes the current summary with it and leaves the conversation's pointer
unset until the next compaction, which rebuilds from the newest version left. A
`prune_versions` in between (a scheduled prune, `ledgerfold prune`) keeps that version, its
checkpoints and the sealed base, as it keeps the current summary's: it used to delete them
all beyond `keep`, so the next compaction was a rebase of the whole ledger, and after a
purge the purged turns' summary was lost for good."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore
from test_checkpoints import CONV, PV, accepted, session
from test_checkpoints_erasure import Recorder, compactor


def test_a_prune_after_an_erasure_keeps_the_checkpoint_the_rebuild_extends(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder()
        compacting = compactor(store, recorder)
        session(store, compacting, 30)
        head = store.current_summary(CONV)
        assert head is not None
        victim = head.source_ids[-6]
        store.retract(CONV, victim, erase=True)
        assert store.current_summary(CONV) is None
        newest = max(accepted(store), key=lambda envelope: len(envelope.source_ids))
        store.prune_versions(CONV, keep=0)
        assert newest.id in {envelope.id for envelope in accepted(store)}
        outcome = compacting.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == newest.id  # not a rebase of the whole ledger
        assert recorder.requests[-1].covered_count == len(newest.source_ids)
        assert victim not in recorder.derived[outcome.summary.text]
        # `keep_checkpoints=0` still prunes to exactly `keep`.
        store.retract(CONV, outcome.summary.source_ids[-1], erase=True)
        store.prune_versions(CONV, keep=0, keep_checkpoints=0)
        assert accepted(store) == []


def test_a_prune_after_an_erasure_keeps_the_sealed_base(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder()
        compacting = compactor(store, recorder)
        session(store, compacting, 20)
        base = accepted(store)[-3]
        through = max(int(turn_id[1:]) for turn_id in base.source_ids) + 1  # sequences from 1
        store.purge_through(CONV, through, "retention")
        sealed = store.current_summary(CONV)
        assert sealed is not None
        purged = set(base.source_ids)
        victim = next(i for i in reversed(sealed.source_ids) if i not in purged)
        store.retract(CONV, victim, erase=True)
        store.prune_versions(CONV, keep=0, keep_checkpoints=0)
        assert base.id in {envelope.id for envelope in accepted(store)}
        outcome = compacting.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == base.id
        assert purged <= set(outcome.summary.source_ids)  # what was purged stays summarised
        assert store.stats(CONV).sealed_lost == 0
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None


def rebuilt_after_erasure(path: Path, *, prune: bool) -> int:
    """How many turns the previous text covers in the compaction after an erasure of a
    turn that the stale summary before it does not cite (the newest version left is that
    stale one, whose ancestors moved into the rebuilt version's source run)."""
    with SQLiteStore(path) as store:
        recorder = Recorder()
        policy = lf.CompactionPolicy(
            PV, keep_tail=2, min_new_turns=4, keep_versions=1, keep_checkpoints=3
        )
        compacting = lf.Compactor(store, policy, recorder)
        session(store, compacting, 30)
        head = store.current_summary(CONV)
        assert head is not None
        store.edit(CONV, head.source_ids[-1], body="corrected")  # `head` is stale
        for n in range(200, 204):
            store.append(CONV, "user", f"turn {n}", id=f"t{n}")
        rebuilt = compacting.compact(CONV).summary
        assert rebuilt is not None and rebuilt.parent_id is not None
        store.retract(CONV, rebuilt.source_ids[-1], erase=True)  # `head` does not cite it
        if prune:
            store.prune_versions(CONV, keep=0)
        outcome = compacting.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        return recorder.requests[-1].covered_count


def test_a_prune_after_an_erasure_keeps_every_version_the_rebuild_may_extend(
    tmp_path: Path,
) -> None:
    unpruned = rebuilt_after_erasure(tmp_path / "a.db", prune=False)
    assert unpruned > 0  # rebuilt from a checkpoint
    assert rebuilt_after_erasure(tmp_path / "b.db", prune=True) == unpruned
