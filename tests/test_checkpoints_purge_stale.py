"""A purge while no summary can be sealed (SPEC §17.5, §15.5), on real SQLite files: an edit
(or an erasure) of a recent covered turn leaves the summary stale until the next
compaction; a `purge_through` before that compaction seals nothing, but keeps the newest
unchanged checkpoint whose sources it purges (the sealed base), and the next compaction
extends it: what the purged turns said stays summarised. It used to erase every version,
so that compaction was a rebase of the live turns and the purged turns' summary was lost."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore
from test_checkpoints import CONV, PV, accepted, session
from test_checkpoints_erasure import Recorder, compactor


def purged_base(store: SQLiteStore) -> tuple[lf.SummaryEnvelope, int]:
    """A checkpoint, and the purge sequence that takes exactly its sources."""
    base = accepted(store)[-3]
    return base, max(int(turn_id[1:]) for turn_id in base.source_ids) + 1  # sequences from 1


def rebuilt_from(store: SQLiteStore, recorder: Recorder, base: lf.SummaryEnvelope) -> None:
    assert base.id in {envelope.id for envelope in accepted(store)}
    outcome = compactor(store, recorder).compact(CONV)
    assert outcome.accepted and outcome.summary is not None
    assert outcome.summary.parent_id == base.id  # not a rebase of the live turns
    assert recorder.requests[-1].previous_summary == base.text
    assert set(base.source_ids) <= set(outcome.summary.source_ids)
    assert store.stats(CONV).sealed_lost == 0
    context = store.context(CONV, PV)
    assert context.fallback is None and context.summary is not None
    assert context.summary.id == outcome.summary.id


def test_a_purge_after_an_edit_keeps_the_checkpoint_of_the_purged_turns(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder()
        session(store, compactor(store, recorder), 20)
        head = store.current_summary(CONV)
        assert head is not None
        store.edit(CONV, head.source_ids[-1], body="corrected")  # stale now
        base, through = purged_base(store)
        preview = store.preview_purge(CONV, through)
        assert preview["sealed_summary"] is None and preview["unsummarised"] == 0
        store.purge_through(CONV, through, "retention")
        rebuilt_from(store, recorder, base)
        assert head.source_ids[-1] not in recorder.derived[base.text]


def test_a_purge_after_an_erasure_keeps_the_checkpoint_of_the_purged_turns(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder()
        session(store, compactor(store, recorder), 20)
        head = store.current_summary(CONV)
        assert head is not None
        store.retract(CONV, head.source_ids[-1], erase=True)  # no summary now
        base, through = purged_base(store)
        store.purge_through(CONV, through, "retention")
        rebuilt_from(store, recorder, base)


def test_a_stale_summary_whose_sources_are_all_purged_is_not_the_base(tmp_path: Path) -> None:
    """Edited and edited back, the summary is still stale (its record says so, and a result
    extending it is refused): a purge of all its sources keeps the newest unchanged
    checkpoint instead, which the next compaction can extend."""
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder()
        session(store, compactor(store, recorder), 20)
        head = store.current_summary(CONV)
        assert head is not None
        victim = head.source_ids[-1]
        body = store.load(CONV).get(victim).body
        store.edit(CONV, victim, body="corrected")
        store.edit(CONV, victim, body=body)
        base = accepted(store)[-2]
        assert victim not in base.source_ids
        store.purge_through(CONV, max(int(i[1:]) for i in head.source_ids) + 1, "retention")
        for n in range(100, 104):
            store.append(CONV, "user", f"turn {n}", id=f"t{n}")
        rebuilt_from(store, recorder, base)
