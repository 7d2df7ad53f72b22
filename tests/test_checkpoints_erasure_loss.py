"""SPEC §17.5 for an erasure: when `retract(..., erase=True)` of a live source takes the
sealed summary (it may quote the turn) and no version citing the purged turns is left to be
rebuilt from, the loss of the purged turns' summary is reported by a `summary.sealed-lost`
event, as after an edit (where the rebase that drops it reports it); not when a sealed base
stays, nor when the erased turn is no source. On real SQLite files."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._events import Event

PV = "v1"


def _compacted(path: Path, events: list[Event], *, rounds: int) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path, on_event=events.append)
    policy = lf.CompactionPolicy(PV, keep_tail=3, min_new_turns=1, keep_versions=None)
    compactor = lf.Compactor(store, policy, lambda request: f"summary {request.plan_id}")
    for n in range(rounds * 10):
        store.append("c", "user", f"turn {n}", id=f"t{n}")
        if n % 10 == 9:
            assert compactor.compact("c").status == "accepted"
    return store


def _lost(events: list[Event]) -> list[Event]:
    return [event for event in events if event.name == "summary.sealed-lost"]


@pytest.mark.parametrize("retracted_first", [False, True])
def test_erasing_a_live_source_of_a_sealed_summary_without_a_base_reports_the_loss(
    tmp_path: Path, retracted_first: bool
) -> None:
    events: list[Event] = []
    with _compacted(tmp_path / "ledger.db", events, rounds=1) as store:
        sealed = store.current_summary("c")
        assert sealed is not None
        store.purge_through("c", 3, "retention")  # no version has only purged sources
        if retracted_first:  # an erasure of a turn retracted earlier takes it too
            store.retract("c", "t5")
        store.retract("c", "t5", erase=True)
        assert store.current_summary("c") is None
        lost = _lost(events)
        assert [(e.reason, e.summary_ids, e.turn_ids) for e in lost] == [
            ("erased", (sealed.id,), ("t5",))
        ]


def test_no_loss_is_reported_when_a_sealed_base_stays_or_no_source_goes(tmp_path: Path) -> None:
    events: list[Event] = []
    with _compacted(tmp_path / "ledger.db", events, rounds=2) as store:
        first = store.summary_history("c")[0].envelope
        assert first is not None
        # Through the first version's last source: it is the sealed base (SPEC §17.5).
        through = max(t.sequence for t in store.sources_of(first.id))
        store.purge_through("c", through, "retention")
        store.retract("c", "t19", erase=True)  # in the tail: no source
        store.retract("c", "t12", erase=True)  # a live source of the sealed summary
        assert _lost(events) == []
        # The next compaction extends the sealed base: nothing was lost.
        policy = lf.CompactionPolicy(PV, keep_tail=3, min_new_turns=1)
        outcome = lf.Compactor(store, policy, lambda request: "rebuilt").compact("c")
        assert outcome.status == "accepted" and outcome.summary is not None
        assert outcome.summary.parent_id == first.id
