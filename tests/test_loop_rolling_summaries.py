"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. Rolling summaries (SPEC §15.1) cite their parent's sources then the new ones,
fingerprinted over all; no stale fact reaches the context; a source that becomes preserved
forces a rebase, due at once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ledgerfold import (
    CompactionOutcome,
    CompactionPolicy,
    Compactor,
    Conversation,
    ExtractiveSummarizer,
    SQLiteStore,
    SummaryRequest,
    Turn,
    check_summary,
    create_summary_envelope,
    fingerprint_turns,
    plan_compaction,
)

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import CONV, Recorder, fingerprint_of, real_bodies, talk  # noqa: E402

# -- §15.1 rolling summaries ----------------------------------------------------------------


def test_rolling_summary_cites_parent_sources_then_new_ones_fingerprinted_over_all(
    store: SQLiteStore,
) -> None:
    bodies = real_bodies(40)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=4, min_new_turns=8), recorder)
    talk(store, bodies, 0, 14)
    first = compactor.compact(CONV).summary
    assert first is not None and first.parent_id is None
    assert first.source_ids == tuple(f"t{i}" for i in range(10))
    talk(store, bodies, 14, 9)
    second = compactor.compact(CONV).summary
    assert second is not None and second.parent_id == first.id
    assert second.source_ids == tuple(f"t{i}" for i in range(19))
    assert second.source_fingerprint == fingerprint_of(store, second.source_ids)
    request = recorder.requests[1]
    assert [turn.id for turn in request.turns] == [f"t{i}" for i in range(10, 19)]
    assert request.previous_summary == first.text
    assert request.covered_count == 10
    assert request.max_summary_tokens == 1000
    # §15.1: an edit of a turn only the parent summarised makes the child stale too.
    store.edit(CONV, "t3", body="a corrected fact")
    assert check_summary(second, store.load(CONV), "v1").reason == "source-modified"
    assert store.context(CONV, "v1").fallback == "stale-summary:source-modified"
    # The next compaction cannot extend a stale summary: a rebase over every compacted turn.
    third = compactor.compact(CONV, force=True).summary
    assert third is not None and third.parent_id is None
    assert recorder.requests[-1].previous_summary is None
    assert recorder.requests[-1].covered_count == 0
    assert [turn.id for turn in recorder.requests[-1].turns] == [f"t{i}" for i in range(19)]


def test_envelope_with_a_parent_lists_its_sources_first_in_sequence_order() -> None:
    turns = [Turn(f"x{i}", i * 10, "user", f"fact {i}") for i in range(1, 13)]
    early = Conversation("c", 1, turns[:8])
    parent = create_summary_envelope(plan_compaction(early, 3, "p1"), early, "s1", "v1", "a")
    assert parent is not None and parent.source_ids == tuple(f"x{i}" for i in range(1, 6))
    ledger = Conversation("c", 2, turns)
    child = create_summary_envelope(
        plan_compaction(ledger, 3, "p2"), ledger, "s2", "v1", " b ", parent=parent
    )
    assert child is not None and child.parent_id == "s1" and child.text == "b"
    assert child.source_ids == tuple(f"x{i}" for i in range(1, 10))
    assert child.source_fingerprint == fingerprint_turns(turns[:9])
    assert check_summary(child, ledger, "v1").current


def test_no_stale_fact_ever_reaches_the_context(store: SQLiteStore) -> None:
    """Compact with keep_tail=2, then keep_tail=8, then edit t16 (§15.8)."""
    for index in range(1, 21):
        body = "Ship the order to 12 Old Street." if index == 16 else f"turn {index} says hello."
        store.append(CONV, "user" if index % 2 else "assistant", body, id=f"t{index}")
    narrow = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1))
    assert narrow.compact(CONV).accepted
    assert "12 Old Street" in store.context(CONV, "v1").items[0].text
    recorder = Recorder()
    wide_policy = CompactionPolicy("v1", keep_tail=8, min_new_turns=50)
    seen: list[SummaryRequest] = []

    def extractive(request: SummaryRequest) -> str:
        seen.append(request)
        return ExtractiveSummarizer()(request)

    wide = Compactor(store, wide_policy, extractive)
    # Coverage would shrink: due at once (min_new_turns does not hold it back), and a rebase.
    outcome = wide.compact(CONV)
    assert outcome.accepted and outcome.summary is not None
    assert outcome.summary.parent_id is None
    assert seen[-1].previous_summary is None and seen[-1].covered_count == 0
    assert [turn.id for turn in seen[-1].turns] == [f"t{i}" for i in range(1, 13)]
    assert outcome.summary.source_ids == tuple(f"t{i}" for i in range(1, 13))
    store.edit(CONV, "t16", body="Ship the order to 99 New Road.")
    for compactor in (wide, narrow, Compactor(store, wide_policy, recorder)):
        compactor.compact(CONV, force=True)
        items = store.context(CONV, "v1").items
        for item in items:
            assert "12 Old Street" not in item.text
        assert sum("99 New Road" in item.text for item in items) >= 1


def test_a_source_that_becomes_preserved_forces_a_rebase(store: SQLiteStore) -> None:
    store.append(CONV, "system", "You are a careful airline agent.", id="sys")
    talk(store, real_bodies(20), 0, 12)
    everything = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, preserve_roles=())
    first = Compactor(store, everything, Recorder()).compact(CONV).summary
    assert first is not None and "sys" in first.source_ids
    recorder = Recorder()
    # The default policy keeps system prompts raw: the old summary cannot be extended.
    default = CompactionPolicy("v1", keep_tail=2, min_new_turns=50)
    second = Compactor(store, default, recorder).compact(CONV).summary
    assert second is not None and second.parent_id is None and "sys" not in second.source_ids
    assert recorder.requests[0].previous_summary is None
    assert "sys" not in {turn.id for turn in recorder.requests[0].turns}
    context = store.context(CONV, "v1")
    assert context.fallback is None and context.items[0].id == "sys"


@pytest.mark.parametrize("preserve", [False, True])
def test_a_rebase_is_due_at_once_below_the_trigger_too(store: SQLiteStore, preserve: bool) -> None:
    """§15.8: when coverage would shrink, compaction is due at once — `trigger_tokens` does
    not hold it back (the context would otherwise keep summarising turns now in the tail or
    preserved), and a call with nothing to rebase stays `not-due` below the trigger."""
    store.append(CONV, "system", "You are a careful airline agent.", id="sys")
    for index in range(1, 21):
        store.append(CONV, "user" if index % 2 else "assistant", f"turn {index}.", id=f"t{index}")
    narrow = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, preserve_roles=())
    assert Compactor(store, narrow).compact(CONV).accepted
    wide = (
        CompactionPolicy("v1", keep_tail=2, trigger_tokens=50_000)
        if preserve
        else CompactionPolicy("v1", keep_tail=8, trigger_tokens=50_000, preserve_roles=())
    )
    outcome = Compactor(store, wide).compact(CONV)
    assert outcome.accepted and outcome.summary is not None and outcome.summary.parent_id is None
    raw = [item.id for item in store.context(CONV, "v1").items[1:]]
    if preserve:
        assert store.context(CONV, "v1").items[0].id == "sys"
    else:
        assert raw == [f"t{index}" for index in range(13, 21)]
    assert Compactor(store, wide).compact(CONV) == CompactionOutcome("skipped", None, "not-due")
