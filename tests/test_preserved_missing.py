"""Preserved turns gone (SPEC §17.3): the store's context falls back with
`preserved-missing` when a protected turn, or one of a preserved role, kept raw below the
summary's slot is retracted; the next compaction is due at once and lays the context out
anew. A purged turn is not missing, and a turn above the slot is not below it."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledgerfold as lf

PV = "p"


def neutral(request: lf.SummaryRequest) -> str:
    return f"summary of {request.covered_count} + {len(request.turns)} turns"


def _store(path: Path) -> tuple[lf.SQLiteStore, lf.SummaryEnvelope]:
    """t0 the system prompt, t1..t11 with t3 a pending confirmation; a summary of t1..t7
    keeps t0 and t3 raw below its slot."""
    store = lf.SQLiteStore(path)
    store.append("c", "system", "be brief", id="t0")
    for index in range(1, 12):
        store.append(
            "c",
            "user" if index % 2 else "assistant",
            f"turn {index}",
            id=f"t{index}",
            protected=index == 3,
            protection_reason="pending-confirmation" if index == 3 else None,
        )
    policy = lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1)
    summary = lf.Compactor(store, policy, neutral).compact("c").summary
    assert summary is not None and summary.source_ids == ("t1", "t2", "t4", "t5", "t6", "t7")
    return store, summary


def _compactor(store: lf.SQLiteStore, **policy: int) -> lf.Compactor:
    # min_new_turns far above what the ledger offers: only "due at once" compacts.
    settings = {"keep_tail": 4, "min_new_turns": 50, **policy}
    return lf.Compactor(store, lf.CompactionPolicy(PV, **settings), neutral)


@pytest.mark.parametrize("gone", ["t3", "t0"])
def test_a_retracted_preserved_turn_falls_back_and_is_due_at_once(
    tmp_path: Path, gone: str
) -> None:
    store, summary = _store(tmp_path / "a.db")
    store.retract("c", gone)
    context = store.context("c", PV)
    assert (context.fallback, context.fallback_id) == ("preserved-missing", gone)
    assert context.summary is None and gone not in context.ids
    assert len(context.ids) == len(store.load("c").turns)  # every live turn raw
    # Due at once, with no new turn to add: laid out anew (a rebase of the same turns).
    outcome = _compactor(store).compact("c")
    assert outcome.status == "accepted", outcome
    after = store.context("c", PV)
    assert after.fallback is None and after.summary is not None
    assert set(after.summary.source_ids) == set(summary.source_ids)
    store.close()


def test_with_a_new_turn_the_relayout_is_an_extension(tmp_path: Path) -> None:
    store, summary = _store(tmp_path / "a.db")
    store.append("c", "user", "one more", id="t12")  # t8 leaves the tail
    store.retract("c", "t3")
    assert store.context("c", PV).fallback == "preserved-missing"
    outcome = _compactor(store, trigger_tokens=100_000).compact("c")  # below the trigger too
    assert outcome.status == "accepted" and outcome.summary is not None
    assert outcome.summary.parent_id == summary.id
    assert store.context("c", PV).fallback is None
    store.close()


def test_a_purged_or_unprotected_turn_is_not_missing(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "a.db")
    store.purge_through("c", 4, "retention", force=True)  # t0 and t3 purged with the rest
    context = store.context("c", PV)
    assert context.fallback is None and context.history_boundary is not None
    assert _compactor(store).compact("c").status == "skipped"
    store.close()


def test_a_retracted_turn_that_was_not_preserved_is_not_missing(tmp_path: Path) -> None:
    store, _ = _store(tmp_path / "a.db")
    store.append("c", "user", "one more", id="t12")  # so the tail stays clear of the sources
    store.retract("c", "t10")  # in the tail, above the slot
    assert store.context("c", PV).fallback is None
    store.edit("c", "t3", protected=False, protection_reason=None)
    store.retract("c", "t3")  # no longer protected when retracted
    assert store.context("c", PV).fallback is None
    assert _compactor(store).compact("c").status == "skipped"
    store.close()


def _sealed_store(path: Path) -> tuple[lf.SQLiteStore, lf.SummaryEnvelope]:
    """t0 the system prompt, t1..t15 with t9 a pending confirmation kept raw below the
    summary of t1..t11; t1..t4 purged since, so the summary is sealed (it alone says what
    they held)."""
    store = lf.SQLiteStore(path)
    store.append("c", "system", "be brief", id="t0")
    for index in range(1, 16):
        store.append(
            "c",
            "user" if index % 2 else "assistant",
            f"turn {index}",
            id=f"t{index}",
            protected=index == 9,
            protection_reason="pending-confirmation" if index == 9 else None,
        )
    policy = lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1)
    summary = lf.Compactor(store, policy, neutral).compact("c").summary
    assert summary is not None and "t9" not in summary.source_ids
    store.purge_through("c", 4, "retention")
    assert store.current_summary("c") == summary and store.context("c", PV).fallback is None
    return store, summary


@pytest.mark.parametrize("trigger", [None, 100_000], ids=["no-trigger", "below-trigger"])
def test_a_sealed_summary_is_laid_out_anew_at_once_keeping_its_purged_turns(
    tmp_path: Path, trigger: int | None
) -> None:
    """SPEC §17.3 with §17.5: the retraction makes the next compaction due at once, and a
    sealed summary is not rebased away (its purged turns' summary would be lost): it is
    extended by a version adding no turn, which lays the context out anew. It stayed in
    `preserved-missing` (`nothing-to-compact`, even forced) until a new turn could be
    compacted."""
    store, sealed = _sealed_store(tmp_path / "a.db")
    store.retract("c", "t9")
    assert store.context("c", PV).fallback == "preserved-missing"
    assert store.stats("c").fallbacks == {"preserved-missing": 1}
    seen: list[lf.SummaryRequest] = []

    def summarizer(request: lf.SummaryRequest) -> str:
        seen.append(request)
        return neutral(request)

    policy = lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=50, trigger_tokens=trigger)
    events: list[lf.Event] = []
    outcome = lf.Compactor(store, policy, summarizer, on_event=events.append).compact("c")
    assert outcome.status == "accepted", outcome
    relaid = outcome.summary
    assert relaid is not None and relaid.parent_id == sealed.id
    assert tuple(relaid.source_ids) == tuple(sealed.source_ids)  # the purged ones kept
    assert relaid.source_fingerprint == sealed.source_fingerprint
    assert [len(r.turns) for r in seen] == [0] and seen[0].covered_count == len(sealed.source_ids)
    assert seen[0].previous_summary == sealed.text
    assert [e.name for e in events] == ["compaction.accepted"]  # no sealed-lost
    context = store.context("c", PV)
    assert context.fallback is None and context.summary is not None
    assert context.summary.id == relaid.id and context.history_boundary is not None
    assert "t9" not in context.ids and "t0" in context.ids
    assert store.stats("c").fallbacks == {} and store.stats("c").sealed_lost == 0
    # Laid out: nothing is due any more.
    assert lf.Compactor(store, policy, summarizer).compact("c", force=True).status == "skipped"
    store.close()


def test_an_extension_adding_nothing_is_still_refused_when_its_plan_adds_turns(
    tmp_path: Path,
) -> None:
    """A same-coverage extension is a re-layout only under a plan compacting nothing new:
    under a plan with new turns it is refused (`plan-mismatch`), as before."""
    store, sealed = _sealed_store(tmp_path / "a.db")
    for index in range(16, 22):
        store.append("c", "user", f"turn {index}", id=f"t{index}")
    plan = store.start_plan("c", 4, PV)
    assert set(plan.compacted_ids) > set(sealed.source_ids)
    same = lf.SummaryEnvelope(
        id="s-same",
        plan_id=plan.plan_id,
        conversation_id="c",
        source_revision=plan.source_revision,
        source_ids=tuple(sealed.source_ids),
        source_fingerprint=sealed.source_fingerprint,
        policy_version=PV,
        text="the same turns again",
        parent_id=sealed.id,
    )
    write = store.commit_summary(same)
    assert (write.accepted, write.reason, write.detail) == (
        False,
        "invalid-summary",
        "plan-mismatch",
    )
    assert store.current_summary("c") == sealed
    store.close()
