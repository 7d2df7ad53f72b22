"""The summary a purge sealed, and its sealed base, survive until a summary covering them
replaces them (SPEC §17.5, §15.5), on a real SQLite file, in two cases that lost them:

- A turn kept raw inside the base's range (a pending confirmation) merged into a later
  extension: that extension's sources are in sequence order, so the base's are no prefix of
  them and the two share no source run; the purge erased the versions linking them, so
  pruning no longer found the base among the sealed summary's ancestors and deleted it, and
  an edit of a live source then rebased: what the purged turns said was lost.
- The sealed summary went stale by an edit that was then undone (its sources hold the
  content it was fingerprinted from again): with no other checkpoint, the next compaction
  rebased the live turns and reported the purged turns' summary lost, though the sealed one
  could be extended as it stands (its record stays stale: it is never the context again)."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore

CONV = "c"
PV = "v1"


def text(request: lf.SummaryRequest) -> str:
    return f"{request.plan_id}: " + " ".join(item.id for item in request.turns)


def talk(store: SQLiteStore, first: int, count: int, pending: int | None = None) -> None:
    for n in range(first, first + count):
        store.append(
            CONV,
            "user" if n % 2 == 0 else "assistant",
            f"turn {n}",
            id=f"t{n}",
            protected=n == pending,
            protection_reason="pending-confirmation" if n == pending else None,
        )


def test_a_merged_turn_inside_the_bases_range_keeps_the_base(tmp_path: Path) -> None:
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=1)
    events: list[lf.Event] = []
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy, text, on_event=events.append)
        talk(store, 0, 6, pending=2)
        base = compactor.compact(CONV).summary
        assert base is not None and list(base.source_ids) == ["t0", "t1", "t3"]
        talk(store, 6, 4)
        assert compactor.compact(CONV).accepted
        store.edit(CONV, "t2", protected=False, protection_reason=None)  # resolved
        talk(store, 10, 1)
        sealed = compactor.compact(CONV, force=True).summary
        assert sealed is not None and list(sealed.source_ids)[:4] == ["t0", "t1", "t2", "t3"]
        store.purge_through(CONV, 4, "retention")  # t0..t3: the base's sources and t2
        assert store.current_summary(CONV) == sealed
        store.prune_versions(CONV, keep=0)
        kept = [r.envelope.id for r in store.summary_history(CONV) if r.envelope is not None]
        assert base.id in kept
        store.edit(CONV, "t7", body="corrected")  # a live source of the sealed summary
        talk(store, 11, 2)
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == base.id
        assert set(base.source_ids) <= set(outcome.summary.source_ids)
        assert store.stats(CONV).sealed_lost == 0
        assert not [e for e in events if e.name == "summary.sealed-lost"]


def test_a_sealed_summary_edited_back_is_extended_not_rebased(tmp_path: Path) -> None:
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=1)
    events: list[lf.Event] = []
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy, text, on_event=events.append)
        talk(store, 0, 10)
        sealed = compactor.compact(CONV).summary  # t0..t7, no version before it
        assert sealed is not None
        store.purge_through(CONV, 4, "retention")
        assert store.current_summary(CONV) == sealed
        store.edit(CONV, "t6", body="corrected")
        store.edit(CONV, "t6", body="turn 6")  # undone: the fingerprinted content again
        assert store.context(CONV, PV).fallback == "stale-summary:source-modified"
        talk(store, 10, 3)
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == sealed.id
        assert set(sealed.source_ids) <= set(outcome.summary.source_ids)
        assert store.stats(CONV).sealed_lost == 0
        assert not [e for e in events if e.name == "summary.sealed-lost"]
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None
        assert context.summary.id == outcome.summary.id
        # The stale record stays stale; its text reached the new summary through the check.
        statuses = {r.envelope.id: r.status for r in store.summary_history(CONV) if r.envelope}
        assert statuses[sealed.id] == "stale"


def test_a_sealed_summary_still_edited_is_not_extended(tmp_path: Path) -> None:
    """Edited and not undone, it is no base: with no other checkpoint, a rebase (SPEC
    §17.5), and the loss reported."""
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=1)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy, text)
        talk(store, 0, 10)
        sealed = compactor.compact(CONV).summary
        assert sealed is not None
        store.purge_through(CONV, 4, "retention")
        store.edit(CONV, "t6", body="corrected")
        talk(store, 10, 3)
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is None
        assert store.stats(CONV).sealed_lost == 1
