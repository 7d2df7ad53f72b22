"""One compaction after another on a real SQLite file (SPEC §13, §15.1): what the
summarizer is given and never given, what is accepted, rolling summaries that receive the
previous text, rebases under a new policy version, and SPEC §1 over a long mixed run."""

from __future__ import annotations

import sys
from pathlib import Path

from ledgerfold import ExtractiveSummarizer, SQLiteStore, SummaryItem, TurnItem
from ledgerfold._compactor import CompactionOutcome, CompactionPolicy, Compactor

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from compaction_support import CONV, Recorder, assert_context_invariants, fill  # noqa: E402

# -- the basic flow --------------------------------------------------------------------------


def test_nothing_to_compact_is_skipped_without_calling_the_summarizer(store: SQLiteStore) -> None:
    fill(store, 3)
    recorder = Recorder()
    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=4), recorder
    ).compact(CONV)
    assert outcome == CompactionOutcome("skipped", None, "nothing-to-compact")
    assert recorder.requests == []
    assert store.current_summary(CONV) is None


def test_compact_accepts_a_summary_of_exactly_the_prefix(store: SQLiteStore) -> None:
    fill(store, 10)
    recorder = Recorder()
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=4)
    outcome = Compactor(store, policy, recorder).compact(CONV)

    assert outcome.status == "accepted"
    assert outcome.accepted
    assert outcome.reason is None
    assert outcome.summary == store.current_summary(CONV)
    assert outcome.summary is not None
    assert outcome.summary.source_ids == tuple(f"m{i}" for i in range(6))
    assert outcome.summary.text == "summary of earlier turns #1"
    assert outcome.summary.policy_version == "v1"

    # The summarizer saw only the turns to compact, as TurnItems, and no previous summary.
    (request,) = recorder.requests
    assert request.conversation_id == CONV
    assert request.plan_id == outcome.summary.plan_id
    assert request.policy_version == "v1"
    assert all(isinstance(turn, TurnItem) for turn in request.turns)
    assert [turn.id for turn in request.turns] == [f"m{i}" for i in range(6)]
    assert request.turns[0].text == "Message number 0. It has a second sentence."
    assert request.previous_summary is None

    context = Compactor(store, policy).context(CONV)
    assert context.fallback is None
    assert context.ids == (outcome.summary.id, "m6", "m7", "m8", "m9")
    assert_context_invariants(store, policy)


def test_default_summarizer_is_extractive(store: SQLiteStore) -> None:
    fill(store, 6)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    assert isinstance(compactor.summarizer, ExtractiveSummarizer)
    outcome = compactor.compact(CONV)
    assert outcome.summary is not None
    assert outcome.summary.text.splitlines()[0] == "[seq 1 user] Message number 0."


def test_summary_id_factory_names_the_summary(store: SQLiteStore) -> None:
    fill(store, 6)
    names = iter(["sum-a", "sum-b"])
    compactor = Compactor(
        store,
        CompactionPolicy("v1", min_new_turns=1, keep_tail=2),
        summary_id_factory=lambda: next(names),
    )
    first = compactor.compact(CONV)
    fill(store, 2, start=6)
    second = compactor.compact(CONV)
    assert first.summary is not None
    assert second.summary is not None
    assert (first.summary.id, second.summary.id) == ("sum-a", "sum-b")


def test_protected_turns_and_groups_are_never_given_to_the_summarizer(store: SQLiteStore) -> None:
    store.append(CONV, "user", "book the flight", id="u1")
    store.append(
        CONV,
        "assistant",
        "shall I pay?",
        id="confirm",
        protected=True,
        protection_reason="pending-confirmation",
    )
    store.append(CONV, "assistant", "", id="call", group="g1", meta={"tool_calls": "[]"})
    store.append(CONV, "tool", "result", id="result", group="g1")
    store.append(CONV, "user", "ok", id="u2")
    store.append(CONV, "assistant", "done", id="a2")
    recorder = Recorder()
    # keep_tail=3 puts "result" in the tail, so its group member "call" is preserved too.
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=3)
    outcome = Compactor(store, policy, recorder).compact(CONV)
    assert outcome.status == "accepted"
    assert [turn.id for turn in recorder.requests[0].turns] == ["u1"]
    assert_context_invariants(store, policy)


# -- rolling summaries -----------------------------------------------------------------------


def test_second_compaction_gets_previous_summary_as_text_never_as_a_turn(
    store: SQLiteStore,
) -> None:
    fill(store, 8)
    recorder = Recorder()
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    compactor = Compactor(store, policy, recorder)
    first = compactor.compact(CONV)
    fill(store, 4, start=8)
    second = compactor.compact(CONV)
    assert first.summary is not None
    assert second.summary is not None

    request = recorder.requests[1]
    assert request.previous_summary == first.summary.text
    # The previous summary is not among the turns, by ID or by text.
    assert first.summary.id not in {turn.id for turn in request.turns}
    assert all(turn.text != first.summary.text for turn in request.turns)
    assert all(turn.role != "system" for turn in request.turns)
    # The new summary covers everything the old one did, and more: it replaces it fully.
    assert set(first.summary.source_ids) < set(second.summary.source_ids)
    # Only the turns new since the previous summary (SPEC §15.1), which covers the rest.
    assert [turn.id for turn in request.turns] == [f"m{i}" for i in range(6, 10)]
    assert request.covered_count == 6
    assert second.summary.parent_id == first.summary.id
    assert second.summary.source_ids == tuple(f"m{i}" for i in range(10))

    context = compactor.context(CONV)
    summaries = [item for item in context.items if isinstance(item, SummaryItem)]
    assert [item.id for item in summaries] == [second.summary.id]
    assert context.ids == (second.summary.id, "m10", "m11")
    statuses = [
        (record.envelope.id if record.envelope else None, record.status)
        for record in store.summary_history(CONV)
    ]
    assert statuses == [(first.summary.id, "superseded"), (second.summary.id, "current")]
    assert_context_invariants(store, policy)


def test_recompacting_the_same_turns_is_skipped_even_when_forced(store: SQLiteStore) -> None:
    """SPEC §15.8: `force` bypasses the trigger, `min_new_turns` and the back-off, but with no
    uncovered compactable turn there is nothing to summarise."""
    fill(store, 8)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), recorder)
    first = compactor.compact(CONV)
    again = compactor.compact(CONV)
    assert again == CompactionOutcome("skipped", None, "nothing-to-compact")
    assert len(recorder.requests) == 1
    assert store.current_summary(CONV) == first.summary

    forced = compactor.compact(CONV, force=True)
    assert forced == CompactionOutcome("skipped", None, "nothing-to-compact")
    assert len(recorder.requests) == 1
    fill(store, 1, start=8)  # one new turn pushes one turn out of the tail
    forced = compactor.compact(CONV, force=True)
    assert forced.status == "accepted"
    assert recorder.requests[1].previous_summary == "summary of earlier turns #1"
    assert [turn.id for turn in recorder.requests[1].turns] == ["m6"]


def test_new_policy_version_rebases_without_the_old_text(store: SQLiteStore) -> None:
    """A summary of another policy version is not used, so it cannot be extended: the new
    version summarises every compacted turn afresh (SPEC §15.1 rebase)."""
    fill(store, 8)
    Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), Recorder("old")).compact(
        CONV
    )
    recorder = Recorder("new")
    policy_v2 = CompactionPolicy("v2", min_new_turns=1, keep_tail=2)
    compactor = Compactor(store, policy_v2, recorder)
    assert compactor.context(CONV).fallback == "stale-summary:policy-mismatch"
    outcome = compactor.compact(CONV)
    assert outcome.status == "accepted"
    assert recorder.requests[0].previous_summary is None
    assert recorder.requests[0].covered_count == 0
    assert [turn.id for turn in recorder.requests[0].turns] == [f"m{i}" for i in range(6)]
    assert outcome.summary is not None and outcome.summary.parent_id is None
    assert compactor.context(CONV).fallback is None


def test_extractive_rolling_summary_carries_lines_forward_without_duplicates(
    store: SQLiteStore,
) -> None:
    fill(store, 8)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    compactor.compact(CONV)
    fill(store, 4, start=8)
    second = compactor.compact(CONV)
    assert second.summary is not None
    lines = second.summary.text.splitlines()
    assert [line.split("]")[0] for line in lines] == [
        f"[seq {i + 1} {'user' if i % 2 == 0 else 'assistant'}" for i in range(10)
    ]


# -- the invariant over a long mixed run -----------------------------------------------------


def test_every_missing_turn_is_a_summary_source_or_purged(store: SQLiteStore) -> None:
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=3)
    compactor = Compactor(store, policy)
    written: dict[str, int] = {}
    for round_number in range(6):
        written |= fill(store, 5, start=5 * round_number)
        if round_number == 1:
            confirm = store.append(
                CONV,
                "assistant",
                "Confirm the refund?",
                id="confirm",
                protected=True,
                protection_reason="pending-confirmation",
            )
            written[confirm.id] = confirm.sequence
        if round_number == 2:
            call = store.append(CONV, "assistant", "", id="call", group="g", meta={"n": "1"})
            result = store.append(CONV, "tool", "42 results", id="result", group="g")
            written |= {call.id: call.sequence, result.id: result.sequence}
        if round_number == 3:
            store.edit(CONV, "m2", body="edited")  # the current summary goes stale
            assert compactor.context(CONV).fallback == "stale-summary:source-modified"
            assert_context_invariants(store, policy, written)
        if round_number == 4:
            store.purge_through(CONV, 4, "retention")
            context = compactor.context(CONV)
            assert context.history_boundary is not None
            assert context.history_boundary.through_sequence == 4
            assert_context_invariants(store, policy, written)
        assert compactor.compact(CONV).status == "accepted"
        assert_context_invariants(store, policy, written)
    context = compactor.context(CONV)
    assert context.fallback is None
    assert "confirm" in context.ids
    assert not {"m0", "m1", "m2", "m3"} & set(context.ids)  # purged
