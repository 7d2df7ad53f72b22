"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. What a commit refuses (SPEC §15.4, §17.1): sources beyond the plan, a parent
that is unknown, not cited whole or no longer current (`plan-mismatch`), a source made protected
(`protected-source`), and an older plan's result (`superseded-plan`, checked first)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    SQLiteStore,
    SummaryEnvelope,
    create_summary_envelope,
    plan_compaction,
)

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import CONV, fingerprint_of, real_bodies, talk  # noqa: E402

# -- commit refusals (§15.4) ------------------------------------------------------------------


def test_commit_refusals_are_plan_mismatch_after_the_superseded_plan_check(
    store: SQLiteStore,
) -> None:
    talk(store, real_bodies(20), 0, 16)
    first = (
        Compactor(store, CompactionPolicy("v1", keep_tail=10, min_new_turns=1))
        .compact(CONV)
        .summary
    )
    assert first is not None and first.source_ids == tuple(f"t{i}" for i in range(6))

    def refused(envelope: SummaryEnvelope | None) -> tuple[object, object]:
        assert envelope is not None
        write = store.commit_summary(envelope)
        assert not write.accepted
        assert store.current_summary(CONV) == current
        return write.reason, write.detail

    current = first
    plan = store.start_plan(CONV, 4, "v1")  # compacts t0..t11
    ledger = store.load(CONV)
    # Sources beyond the plan (a plan_id-matching envelope of a wider local plan).
    wide = plan_compaction(ledger, 2, plan.plan_id)
    assert refused(create_summary_envelope(wide, ledger, "s-wide", "v1", "x", parent=first)) == (
        "invalid-summary",
        "plan-mismatch",
    )
    # A parent that is not the current summary, or unknown.
    good = create_summary_envelope(plan, ledger, "s-good", "v1", "x", parent=first)
    assert good is not None
    fake_parent = SummaryEnvelope(**{**_fields(first), "id": "never-written"})
    fake = create_summary_envelope(plan, ledger, "s-fake", "v1", "x", parent=fake_parent)
    assert refused(fake) == ("invalid-summary", "plan-mismatch")
    # A parent whose sources it does not all cite.
    partial = SummaryEnvelope(
        **{
            **_fields(good),
            "id": "s-partial",
            "source_ids": good.source_ids[3:],
            "source_fingerprint": fingerprint_of(store, good.source_ids[3:]),
        }
    )
    assert refused(partial) == ("invalid-summary", "plan-mismatch")
    # A source made protected after the plan (its fingerprint is of the protected turn).
    store.edit(CONV, "t8", protected=True, protection_reason="pending-confirmation")
    ledger = store.load(CONV)
    protected = create_summary_envelope(plan, ledger, "s-prot", "v1", "x", parent=first)
    assert refused(protected) == ("invalid-summary", "protected-source")  # SPEC §17.1
    # The active-plan check runs first: an older plan's wide envelope is superseded-plan.
    newer = store.start_plan(CONV, 4, "v1")
    assert refused(create_summary_envelope(wide, ledger, "s-old", "v1", "x", parent=first)) == (
        "stale-source",
        "superseded-plan",
    )
    statuses = [(r.envelope.id, r.status) for r in store.summary_history(CONV)]
    assert ("s-wide", "rejected") in statuses and ("s-old", "rejected") in statuses
    # A parent that was current once but no longer is.
    accepted = store.commit_summary(
        create_summary_envelope(newer, ledger, "s-new", "v1", "y", parent=first)
    )
    assert accepted.accepted
    current = accepted.summary
    latest = store.start_plan(CONV, 2, "v1")
    ledger = store.load(CONV)
    assert refused(create_summary_envelope(latest, ledger, "s-stale", "v1", "z", parent=first)) == (
        "invalid-summary",
        "plan-mismatch",
    )


def _fields(envelope: SummaryEnvelope) -> dict[str, Any]:
    names = (
        "id",
        "plan_id",
        "conversation_id",
        "source_revision",
        "source_ids",
        "source_fingerprint",
        "policy_version",
        "text",
        "parent_id",
    )
    return {name: getattr(envelope, name) for name in names}


def _forged(store: SQLiteStore, plan_id: str, ids: tuple[str, ...]) -> SummaryEnvelope:
    """A rebase over `ids` as the ledger holds them now, under `plan_id`."""
    ledger = store.load(CONV)
    return SummaryEnvelope(
        id="forged-" + "-".join(ids),
        plan_id=plan_id,
        conversation_id=CONV,
        source_revision=ledger.revision,
        source_ids=ids,
        source_fingerprint=fingerprint_of(store, ids),
        policy_version="v1",
        text="forged",
    )


def test_a_plan_still_active_after_a_refusal_holds_every_commit_to_its_rules(
    store: SQLiteStore,
) -> None:
    """A refused result leaves its plan active (another result may follow); that result is
    held to the plan's compacted IDs and `preserve_roles` as the first was: a system prompt
    the plan kept raw, or a tail turn, never becomes a source (SPEC §15.4, §17.1)."""
    store.append(CONV, "system", "be brief", id="sys")
    talk(store, real_bodies(12), 0, 12)
    plan = store.start_plan(CONV, 4, "v1", preserve_roles=("system",))
    assert "sys" not in plan.compacted_ids and "t11" not in plan.compacted_ids
    first = store.commit_summary(_forged(store, plan.plan_id, ("t1", "t0")))
    assert (first.reason, first.detail) == ("stale-source", "source-reordered")
    for ids, detail in [
        (("sys", "t0", "t1"), "protected-source"),
        (("t0", "t11"), "plan-mismatch"),
    ]:
        write = store.commit_summary(_forged(store, plan.plan_id, ids))
        assert (write.accepted, write.reason, write.detail) == (False, "invalid-summary", detail)
    assert store.current_summary(CONV) is None
    accepted = store.commit_summary(_forged(store, plan.plan_id, ("t0", "t1")))
    assert accepted.accepted
    context = store.context(CONV, "v1")
    assert context.ids[0] == "sys" and context.ids[-4:] == ("t8", "t9", "t10", "t11")
