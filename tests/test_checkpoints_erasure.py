"""Checkpoints after an erasure (SPEC §17.5, §15.5), on real SQLite files: `retract(...,
erase=True)` of a covered turn erases every version citing it, the current summary included
(its text may quote the turn), and keeps the checkpoints that do not cite it. The next
compaction rebuilds from the newest of those, as after a plain retraction, instead of a
rebase of the whole ledger; after a purge, the sealed base keeps the purged turns' summary.
The summarizer never gets a previous text that saw the erased turn."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore
from test_checkpoints import CONV, PV, accepted, session


class Recorder:
    """A summarizer with unique texts that records which turn IDs each text was derived from
    (its request's turns plus its previous text's)."""

    def __init__(self) -> None:
        self.requests: list[lf.SummaryRequest] = []
        self.derived: dict[str, set[str]] = {}

    def __call__(self, request: lf.SummaryRequest) -> str:
        self.requests.append(request)
        derived = {item.id for item in request.turns}
        if request.previous_summary is not None:
            derived |= self.derived[request.previous_summary]
        text = f"S{len(self.requests)}: " + " ".join(item.id for item in request.turns)
        self.derived[text] = derived
        return text


def compactor(store: SQLiteStore, recorder: Recorder) -> lf.Compactor:
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=4, keep_versions=2)
    return lf.Compactor(store, policy, recorder)


def test_an_erasure_of_a_recent_covered_turn_rebuilds_from_the_newest_checkpoint_left(
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
        assert store.current_summary(CONV) is None  # erased with the turn
        left = accepted(store)
        assert left and all(victim not in envelope.source_ids for envelope in left)
        newest = max(left, key=lambda envelope: len(envelope.source_ids))
        asked = len(recorder.requests)
        outcome = compacting.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == newest.id  # not a rebase of the whole ledger
        request = recorder.requests[asked]
        assert request.previous_summary == newest.text
        assert request.covered_count == len(newest.source_ids)
        assert victim not in recorder.derived[outcome.summary.text]
        assert outcome.summary.source_ids[: len(newest.source_ids)] == newest.source_ids
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None


def test_an_erasure_of_a_live_source_of_a_sealed_summary_rebuilds_from_the_sealed_base(
    tmp_path: Path,
) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder()
        compacting = compactor(store, recorder)
        session(store, compacting, 20)
        versions = accepted(store)
        base = versions[-3]
        through = max(int(turn_id[1:]) for turn_id in base.source_ids) + 1  # sequences from 1
        store.purge_through(CONV, through, "retention")
        sealed = store.current_summary(CONV)
        assert sealed is not None
        purged = set(base.source_ids)
        victim = next(i for i in reversed(sealed.source_ids) if i not in purged)
        store.retract(CONV, victim, erase=True)
        assert base.id in {envelope.id for envelope in accepted(store)}  # the sealed base
        outcome = compacting.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == base.id
        assert recorder.requests[-1].previous_summary == base.text
        assert purged <= set(outcome.summary.source_ids)  # what was purged stays summarised
        assert victim not in recorder.derived[outcome.summary.text]
        assert store.stats(CONV).sealed_lost == 0
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None
