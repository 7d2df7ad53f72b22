"""One test per item of the design note's checklist (§9–10), plus groups and acceptance."""

from __future__ import annotations

from typing import Any

import pytest

from ledgerfold import (
    CompactionPlan,
    Conversation,
    DuplicateId,
    InvalidInput,
    SummaryEnvelope,
    SummaryItem,
    Turn,
    TurnItem,
    accept_summary_result,
    assemble_context,
    check_summary,
    create_summary_envelope,
    is_summary_current,
    plan_compaction,
    same_ordered_ids,
)

POLICY = "policy-v2"


def story(revision: int = 1) -> Conversation:
    """The design note's scenario: a read-only constraint, a pending confirmation, a scope."""
    return Conversation(
        "conv-1",
        revision,
        [
            Turn("u1", 1, "user", "Only read local files."),
            Turn("a1", 2, "assistant", "Understood."),
            Turn("c1", 3, "assistant", "", group="call-1", meta={"tool_calls": '[{"id":"x"}]'}),
            Turn("r1", 4, "tool", "file list", group="call-1", meta={"tool_call_id": "x"}),
            Turn(
                "pending-confirm",
                5,
                "assistant",
                "Write 3 files? (yes/no)",
                protected=True,
                protection_reason="pending-confirmation",
            ),
            Turn("u2", 7, "user", "Which ones?"),
            Turn(
                "scope",
                9,
                "user",
                "Only the selected files.",
                protected=True,
                protection_reason="active-constraint",
            ),
            Turn("a2", 12, "assistant", "Working on it."),
            Turn("u3", 13, "user", "Thanks."),
        ],
    )


def summarise(
    conversation: Conversation, keep_tail: int = 2, plan_id: str = "compact-18"
) -> tuple[CompactionPlan, SummaryEnvelope]:
    plan = plan_compaction(conversation, keep_tail, plan_id)
    envelope = create_summary_envelope(plan, conversation, f"s-{plan_id}", POLICY, "  summary  ")
    assert envelope is not None
    return plan, envelope


def with_turns(
    conversation: Conversation, turns: list[Turn], revision_bump: int = 1
) -> Conversation:
    return Conversation(conversation.id, conversation.revision + revision_bump, turns)


def replace_turn(conversation: Conversation, turn_id: str, **changes: Any) -> Conversation:
    turns = [t.replace(**changes) if t.id == turn_id else t for t in conversation.turns]
    return with_turns(conversation, turns)


def test_out_of_order_input_is_normalised() -> None:
    shuffled = list(reversed(story().turns))
    conversation = Conversation("conv-1", 1, shuffled)
    assert conversation == story()
    assert plan_compaction(conversation, 2, "p") == plan_compaction(story(), 2, "p")
    assert [t.sequence for t in conversation.turns] == sorted(t.sequence for t in shuffled)


def test_duplicate_ids_are_rejected() -> None:
    turns = [*story().turns, Turn("u1", 99, "user", "again")]
    with pytest.raises(DuplicateId) as caught:
        Conversation("conv-1", 1, turns)
    assert caught.value.id == "u1"


def test_non_contiguous_sequences_are_allowed_and_kept() -> None:
    plan = plan_compaction(story(), 2, "p")
    # Sequences 1,2,3,4,5,7,9,12,13: gaps do not matter, order does.
    assert plan.compacted_ids == ("u1", "a1", "c1", "r1", "u2")
    assert plan.through_sequence == 7


def test_tail_boundary_is_exact() -> None:
    conversation = story()
    for keep_tail in range(1, len(conversation) + 2):
        plan = plan_compaction(conversation, keep_tail, "p")
        tail = conversation.turn_ids[-keep_tail:]
        assert set(tail) <= set(plan.preserved_ids)
        assert not set(tail) & set(plan.compacted_ids)
    # keep_tail 3 puts a2 (seq 12) in the tail; scope (9) is protected anyway.
    assert plan_compaction(conversation, 3, "p").compacted_ids[-1] == "u2"
    assert plan_compaction(conversation, len(conversation), "p").is_empty
    for bad in (0, -1, True, 1.5, "2", None):
        with pytest.raises(InvalidInput) as caught:
            plan_compaction(conversation, bad, "p")  # type: ignore[arg-type]
        assert caught.value.field == "keep_tail"
    for bad_id in ("", "  ", None, 3):
        with pytest.raises(InvalidInput) as caught:
            plan_compaction(conversation, 2, bad_id)  # type: ignore[arg-type]
        assert caught.value.field == "plan_id"


def test_protected_turns_are_kept_exactly_once() -> None:
    conversation = story()
    # keep_tail=3 makes "scope" both protected and in the tail.
    plan, envelope = summarise(conversation, keep_tail=3)
    assert plan.preserved_ids.count("scope") == 1
    assert "pending-confirm" in plan.preserved_ids
    assert "pending-confirm" not in plan.compacted_ids
    assert len(set(plan.preserved_ids)) == len(plan.preserved_ids)
    context = assemble_context(conversation, envelope, POLICY)
    assert context.fallback is None
    assert context.ids.count("scope") == 1 and context.ids.count("pending-confirm") == 1
    assert list(plan.preserved_ids) == [i for i in context.ids if i != envelope.id]


def test_tool_call_and_result_are_compacted_together_or_not_at_all() -> None:
    conversation = story()
    plan = plan_compaction(conversation, 2, "p")
    assert {"c1", "r1"} <= set(plan.compacted_ids)
    protected_call = replace_turn(conversation, "c1", protected=True)
    plan = plan_compaction(protected_call, 2, "p")
    assert not {"c1", "r1"} & set(plan.compacted_ids)
    # A group reaching into the tail stays raw as a whole.
    turns = [*conversation.turns, Turn("late", 20, "tool", "late result", group="call-1")]
    plan = plan_compaction(with_turns(conversation, turns), 1, "p")
    assert not {"c1", "r1"} & set(plan.compacted_ids)


def test_conversation_switch_invalidates() -> None:
    _, envelope = summarise(story())
    other = Conversation("conv-2", 1, story().turns)
    check = check_summary(envelope, other, POLICY)
    assert (check.current, check.reason, check.turn_id) == (False, "conversation-mismatch", None)
    assert (
        assemble_context(other, envelope, POLICY).fallback == "stale-summary:conversation-mismatch"
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"body": "Read and write anything."},
        {"role": "assistant"},
        {"sequence": 6},
        {"protected": True},
        {"protected": True, "protection_reason": "audit-evidence"},
        {"group": "g-new"},
        {"meta": {"name": "someone"}},
    ],
    ids=lambda changes: "+".join(changes),
)
def test_a_change_of_any_encoded_field_of_a_source_invalidates(changes: dict[str, Any]) -> None:
    conversation = story()
    _, envelope = summarise(conversation)
    assert is_summary_current(envelope, conversation, POLICY)
    changed = replace_turn(conversation, "u2", **changes)
    check = check_summary(envelope, changed, POLICY)
    assert not check.current
    assert check.reason == "source-modified"
    context = assemble_context(changed, envelope, POLICY)
    assert context.fallback == "stale-summary:source-modified"
    assert context.ids == changed.turn_ids
    write = accept_summary_result(envelope, changed, POLICY, "compact-18")
    assert (write.accepted, write.reason, write.detail) == (
        False,
        "stale-source",
        "source-modified",
    )


def test_removing_or_reordering_a_source_invalidates_and_names_it() -> None:
    conversation = story()
    _, envelope = summarise(conversation)
    removed = with_turns(conversation, [t for t in conversation.turns if t.id != "a1"])
    check = check_summary(envelope, removed, POLICY)
    assert (check.reason, check.turn_id) == ("source-missing", "a1")
    swapped = with_turns(
        conversation,
        [
            t.replace(sequence={"u1": 2, "a1": 1}[t.id]) if t.id in ("u1", "a1") else t
            for t in conversation.turns
        ],
    )
    check = check_summary(envelope, swapped, POLICY)
    assert (check.reason, check.turn_id) == ("source-reordered", "u1")


def test_appending_keeps_the_summary_and_the_new_turns_appear() -> None:
    conversation = story()
    plan, envelope = summarise(conversation)
    appended = with_turns(
        conversation, [*conversation.turns, Turn("u4", 14, "user", "One more thing.")]
    )
    assert is_summary_current(envelope, appended, POLICY)
    assert accept_summary_result(envelope, appended, POLICY, plan.plan_id).accepted
    context = assemble_context(appended, envelope, POLICY)
    assert context.fallback is None
    assert context.ids[-1] == "u4"
    assert context.ids == ("pending-confirm", envelope.id, "scope", "a2", "u3", "u4")
    summary = context.summary
    assert isinstance(summary, SummaryItem)
    assert summary.through_sequence == 7 and summary.text == "summary"
    assert summary.source_ids == plan.compacted_ids


def test_policy_upgrade_invalidates() -> None:
    conversation = story()
    _, envelope = summarise(conversation)
    assert check_summary(envelope, conversation, "policy-v3").reason == "policy-mismatch"
    context = assemble_context(conversation, envelope, "policy-v3")
    assert context.fallback == "stale-summary:policy-mismatch"


def test_empty_summary_or_empty_plan_gives_no_envelope() -> None:
    conversation = story()
    plan = plan_compaction(conversation, 2, "p")
    assert create_summary_envelope(plan, conversation, "s", POLICY, "   \n\t") is None
    assert create_summary_envelope(plan, conversation, "s", POLICY, "") is None
    empty = plan_compaction(conversation, 100, "p")
    assert empty.compacted_ids == () and empty.through_sequence == 0
    assert create_summary_envelope(empty, conversation, "s", POLICY, "text") is None
    missing = [t for t in conversation.turns if t.id != "u1"]
    assert create_summary_envelope(plan, missing, "s", POLICY, "text") is None
    write = accept_summary_result(None, conversation, POLICY, "p")
    assert (write.accepted, write.reason, write.summary) == (False, "invalid-summary", None)
    # A hand-made envelope without sources is never current.
    hollow = SummaryEnvelope("s", "p", "conv-1", 1, (), "lf1:" + "0" * 64, POLICY, "text")
    assert check_summary(hollow, conversation, POLICY).reason == "empty-source"


def test_envelope_binds_ids_and_fingerprint_and_strips_text() -> None:
    conversation = story()
    plan, envelope = summarise(conversation)
    assert envelope.source_ids == plan.compacted_ids
    assert envelope.source_revision == conversation.revision
    assert envelope.text == "summary"
    assert envelope.plan_id == plan.plan_id and envelope.policy_version == POLICY
    from ledgerfold import fingerprint_turns

    sources = [conversation.get(i) for i in plan.compacted_ids]
    assert envelope.source_fingerprint == fingerprint_turns(sources)
    # The same turns given as a plain list, in any order, bind identically.
    again = create_summary_envelope(
        plan, list(reversed(conversation.turns)), envelope.id, POLICY, "summary"
    )
    assert again == envelope
    assert "summary" not in repr(envelope).replace("SummaryEnvelope", "")


def test_late_result_of_an_older_plan_is_refused() -> None:
    conversation = story()
    _, old = summarise(conversation, plan_id="compact-17")
    write = accept_summary_result(old, conversation, POLICY, "compact-18")
    assert (write.accepted, write.reason, write.detail) == (
        False,
        "stale-source",
        "superseded-plan",
    )


def test_every_fallback_reason() -> None:
    conversation = story()
    plan, envelope = summarise(conversation)
    assert assemble_context(conversation, None, POLICY).fallback == "no-summary"
    stale = assemble_context(replace_turn(conversation, "u1", body="x"), envelope, POLICY)
    assert stale.fallback == "stale-summary:source-modified"
    missing = assemble_context(conversation, envelope, POLICY, preserved_ids=["scope", "gone"])
    assert (missing.fallback, missing.fallback_id) == ("preserved-missing", "gone")
    ok = assemble_context(conversation, envelope, POLICY, preserved_ids=plan.preserved_ids)
    assert ok.fallback is None
    clash = SummaryEnvelope(
        "scope",
        plan.plan_id,
        "conv-1",
        1,
        envelope.source_ids,
        envelope.source_fingerprint,
        POLICY,
        "t",
    )
    dup = assemble_context(conversation, clash, POLICY)
    assert (dup.fallback, dup.fallback_id) == ("duplicate-id", "scope")
    edited = replace_turn(conversation, "u1", body="x")
    for context, ledger in ((stale, edited), (missing, conversation), (dup, conversation)):
        assert all(isinstance(item, TurnItem) for item in context.items)
        assert context.ids == ledger.turn_ids


def test_turn_items_carry_role_text_sequence_and_meta() -> None:
    conversation = story()
    context = assemble_context(conversation, None, POLICY)
    item = context.items[3]
    assert isinstance(item, TurnItem)
    assert (item.id, item.role, item.text, item.sequence, item.kind) == (
        "r1",
        "tool",
        "file list",
        4,
        "turn",
    )
    assert item.meta == {"tool_call_id": "x"}
    assert item == TurnItem("r1", "tool", "file list", 4, {"tool_call_id": "x"})
    assert "file list" not in repr(item)


def test_same_ordered_ids_compares_every_position() -> None:
    assert same_ordered_ids(["a", "b"], ("a", "b"))
    assert not same_ordered_ids(["a", "b"], ["b", "a"])
    assert not same_ordered_ids(["a", "b"], ["a", "b", "b"])
    assert not same_ordered_ids(["a", "a", "b"], ["a", "b", "b"])
    assert same_ordered_ids([], [])
    with pytest.raises(InvalidInput):
        same_ordered_ids("ab", ["a", "b"])
    with pytest.raises(InvalidInput):
        same_ordered_ids([1], ["1"])


def test_wrong_argument_types_are_invalid_input() -> None:
    conversation = story()
    _, envelope = summarise(conversation)
    with pytest.raises(InvalidInput):
        check_summary(envelope, list(conversation.turns), POLICY)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        check_summary("summary", conversation, POLICY)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        check_summary(envelope, conversation, 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        assemble_context(conversation, envelope, POLICY, preserved_ids=[1])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        SummaryEnvelope("s", "p", "c", -1, ("a",), "lf1:x", POLICY, "t")
    with pytest.raises(InvalidInput):
        SummaryEnvelope("s", "p", "c", 0, "abc", "lf1:x", POLICY, "t")  # type: ignore[arg-type]
