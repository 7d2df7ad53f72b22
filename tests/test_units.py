"""Compaction units (SPEC §17.2): one rule, in the Rust core, for planning, the `group-split`
check and folding, checked against `reference.units` (brute force) on random ledgers of
calls and results with and without groups."""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import _native
from ledgerfold._fold import fold_chunk
from ledgerfold._toolcalls import unit_roots, units
from ledgerfold.tokens import approx_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

CALLS = ("c1", "c2", "c3", "c4")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def calls_json(*call_ids: str) -> str:
    return json.dumps([{"id": c, "type": "function", "function": {"name": "f"}} for c in call_ids])


@st.composite
def tool_ledgers(draw: Any) -> list[lf.Turn]:
    """Turns with random roles, groups or none, calls and answers (answers before their call,
    unanswered calls, answers to calls nobody made), protection."""
    count = draw(st.integers(0, 12))
    turns = []
    for index in range(count):
        role = draw(st.sampled_from(("user", "assistant", "tool", "system")))
        meta: dict[str, str] | None = None
        if role == "assistant" and draw(st.booleans()):
            meta = {
                "tool_calls": calls_json(
                    *draw(st.lists(st.sampled_from(CALLS), max_size=2, unique=True))
                )
            }
        elif (role == "tool" and draw(st.booleans())) or draw(st.integers(0, 5)) == 0:
            # A result, or (rarely) the key on a role it does not count on.
            meta = {"tool_call_id": draw(st.sampled_from(CALLS))}
        group = draw(st.one_of(st.none(), st.sampled_from(("g1", "g2"))))
        protected = draw(st.integers(0, 6)) == 0
        turns.append(
            lf.Turn(
                f"t{index}",
                index + 1,
                role,
                f"body {index}",
                protected=protected,
                protection_reason="active-constraint" if protected else None,
                group=group,
                meta=meta,
            )
        )
    return turns


def partition(turns: list[lf.Turn]) -> set[frozenset[str]]:
    return {frozenset(t.id for t in unit) for unit in units(turns)}


@SETTINGS
@given(tool_ledgers())
def test_units_match_the_reference(turns: list[lf.Turn]) -> None:
    assert partition(turns) == set(ref.units(turns))
    roots = unit_roots(turns)
    assert all(roots[root] == root and root <= at for at, root in enumerate(roots))


@SETTINGS
@given(tool_ledgers(), st.integers(1, 6), st.sampled_from(((), ("system",))))
def test_planning_matches_the_reference(
    turns: list[lf.Turn], keep_tail: int, roles: tuple[str, ...]
) -> None:
    conversation = lf.Conversation("c", 3, tuple(turns))
    plan = lf.plan_compaction(conversation, keep_tail, "p", preserve_roles=roles)
    expected = ref.plan_compaction("c", 3, turns, keep_tail, "p", roles)
    assert {f: getattr(plan, f) for f in expected} == expected
    # No unit is ever split by a plan.
    compacted = set(plan.compacted_ids)
    for unit in ref.units(turns):
        assert unit <= compacted or not unit & compacted


@SETTINGS
@given(tool_ledgers(), st.integers(0, 2**12 - 1))
def test_group_split_matches_the_reference(turns: list[lf.Turn], mask: int) -> None:
    sources = [t for at, t in enumerate(turns) if mask >> at & 1]
    if not sources:
        return
    conversation = lf.Conversation("c", 1, tuple(turns))
    plan = lf.CompactionPlan("p", "c", 1, tuple(t.id for t in sources), (), sources[-1].sequence)
    envelope = lf.create_summary_envelope(plan, turns, "s", "v1", "text")
    assert envelope is not None
    got = lf.check_summary(envelope, conversation, "v1")
    assert (got.current, got.reason, got.turn_id) == ref.check_summary(envelope, "c", turns, "v1")


def _turn(
    tid: str, seq: int, role: str, meta: dict[str, str] | None = None, group: str | None = None
) -> lf.Turn:
    return lf.Turn(tid, seq, role, f"text {tid}", group=group, meta=meta)


def _ungrouped_call_then_tail() -> list[lf.Turn]:
    return [
        _turn("u1", 1, "user"),
        _turn("a1", 2, "assistant", {"tool_calls": calls_json("x")}),
        _turn("t1", 3, "tool", {"tool_call_id": "x"}),
        _turn("a2", 4, "assistant"),
    ]


def test_a_plan_does_not_split_an_ungrouped_call_from_its_result() -> None:
    # keep_tail=2 puts the result in the tail: the call stays raw with it (before §17.2 the
    # call was compacted and the result sent without it).
    conversation = lf.Conversation("c", 1, tuple(_ungrouped_call_then_tail()))
    plan = lf.plan_compaction(conversation, 2, "p")
    assert plan.compacted_ids == ("u1",)
    assert plan.preserved_ids == ("a1", "t1", "a2")


def test_a_summary_of_a_call_without_its_ungrouped_result_is_group_split() -> None:
    turns = _ungrouped_call_then_tail()
    conversation = lf.Conversation("c", 1, tuple(turns))
    plan = lf.CompactionPlan("p", "c", 1, ("u1", "a1"), (), 2)
    envelope = lf.create_summary_envelope(plan, turns, "s", "v1", "text")
    assert envelope is not None
    check = lf.check_summary(envelope, conversation, "v1")
    assert (check.current, check.reason, check.turn_id) == (False, "group-split", "t1")
    context = lf.assemble_context(conversation, envelope, "v1")
    assert context.fallback == "stale-summary:group-split"


def test_a_result_links_through_its_call_into_the_calls_group() -> None:
    turns = [
        _turn("a1", 1, "assistant", {"tool_calls": calls_json("x", "y")}, group="g"),
        _turn("t1", 2, "tool", {"tool_call_id": "x"}, group="g"),
        _turn("t2", 3, "tool", {"tool_call_id": "y"}),  # no group: joins through its call
        _turn("u1", 4, "user"),
    ]
    assert unit_roots(turns) == [0, 0, 0, 3]


def test_folding_cuts_between_units_not_inside_an_ungrouped_call() -> None:
    turns = _ungrouped_call_then_tail()
    budget = approx_tokens("text u1") + approx_tokens("text a1")  # room for u1 and the call only
    chunk, _ = fold_chunk(turns, budget, approx_tokens)
    assert [t.id for t in chunk] == ["u1"]


def test_unit_roots_refuses_what_is_not_a_turn() -> None:
    with pytest.raises(lf.InvalidInput):
        _native.unit_roots([object()])


# A Conversation computes its units once, on first need, and every check, assembly and plan
# over that snapshot shares them: the answers must be those of a fresh computation.


@SETTINGS
@given(
    tool_ledgers(),
    st.lists(st.integers(0, 2**12 - 1), min_size=1, max_size=5),
    st.integers(1, 6),
    st.booleans(),
)
def test_one_conversation_answers_every_check_like_the_reference(
    turns: list[lf.Turn], masks: list[int], keep_tail: int, plan_first: bool
) -> None:
    conversation = lf.Conversation("c", 1, tuple(reversed(turns)))

    def check_plan() -> None:
        plan = lf.plan_compaction(conversation, keep_tail, "p")
        expected = ref.plan_compaction("c", 1, turns, keep_tail, "p")
        assert {f: getattr(plan, f) for f in expected} == expected

    if plan_first:
        check_plan()
    for mask in masks:
        sources = [t for at, t in enumerate(turns) if mask >> at & 1]
        if not sources:
            continue
        plan = lf.CompactionPlan(
            "p", "c", 1, tuple(t.id for t in sources), (), sources[-1].sequence
        )
        envelope = lf.create_summary_envelope(plan, turns, "s", "v1", "text")
        assert envelope is not None
        expected = ref.check_summary(envelope, "c", turns, "v1")
        for _ in range(2):
            got = lf.check_summary(envelope, conversation, "v1")
            assert (got.current, got.reason, got.turn_id) == expected
        context = lf.assemble_context(conversation, envelope, "v1")
        items, fallback, fallback_id = ref.assemble_context("c", turns, envelope, "v1")
        assert (context.fallback, context.fallback_id) == (fallback, fallback_id)
        assert list(context.ids) == [item[1] for item in items]
    check_plan()
    # The roots a conversation keeps are the ones computed afresh from its turns.
    assert _native.unit_roots(conversation) == unit_roots(list(conversation.turns))
    assert partition(list(conversation.turns)) == set(ref.units(turns))


def _summary_of(turns: list[lf.Turn], ids: tuple[str, ...]) -> lf.SummaryEnvelope:
    by_id = {t.id: t for t in turns}
    plan = lf.CompactionPlan("p", "c", 1, ids, (), by_id[ids[-1]].sequence)
    envelope = lf.create_summary_envelope(plan, turns, "s-" + "-".join(ids), "v1", "text")
    assert envelope is not None
    return envelope


def test_a_group_split_is_found_after_a_first_check_of_the_same_conversation() -> None:
    turns = _ungrouped_call_then_tail()
    conversation = lf.Conversation("c", 1, tuple(turns))
    whole = _summary_of(turns, ("u1", "a1", "t1"))
    split = _summary_of(turns, ("u1", "a1"))
    assert lf.check_summary(whole, conversation, "v1").current
    check = lf.check_summary(split, conversation, "v1")
    assert (check.current, check.reason, check.turn_id) == (False, "group-split", "t1")
    context = lf.assemble_context(conversation, split, "v1")
    assert (context.fallback, context.fallback_id) == ("stale-summary:group-split", "t1")
    assert lf.assemble_context(conversation, whole, "v1").fallback is None
    assert lf.check_summary(whole, conversation, "v1").current


def test_a_group_split_is_found_after_a_plan_of_the_same_conversation() -> None:
    turns = [
        _turn("u1", 1, "user"),
        _turn("g1", 2, "assistant", group="g"),
        _turn("u2", 3, "user"),
        _turn("g2", 4, "assistant", group="g"),
        _turn("u3", 5, "user"),
    ]
    conversation = lf.Conversation("c", 1, tuple(turns))
    plan = lf.plan_compaction(conversation, 1, "p")
    assert plan.compacted_ids == ("u1", "g1", "u2", "g2")
    check = lf.check_summary(_summary_of(turns, ("u1", "g1")), conversation, "v1")
    assert (check.current, check.reason, check.turn_id) == (False, "group-split", "g2")


def _call_ledger(blocks: int) -> list[lf.Turn]:
    """`blocks` rounds of a user turn, an ungrouped call of two tools, and both results."""
    turns = []
    for block in range(blocks):
        seq = 4 * block
        a, b = f"a{block}", f"b{block}"
        turns += [
            _turn(f"u{block}", seq + 1, "user"),
            _turn(f"c{block}", seq + 2, "assistant", {"tool_calls": calls_json(a, b)}),
            _turn(f"r{block}a", seq + 3, "tool", {"tool_call_id": a}),
            _turn(f"r{block}b", seq + 4, "tool", {"tool_call_id": b}),
        ]
    return turns


def test_threads_checking_one_fresh_conversation_agree() -> None:
    # Every thread's first check may be the one that computes the units; all must see them
    # whole. The split summary leaves out the last result of block 700.
    turns = _call_ledger(1_000)
    cut = 4 * 700 + 3
    split = _summary_of(turns, tuple(t.id for t in turns[:cut]))
    whole = _summary_of(turns, tuple(t.id for t in turns[: cut + 1]))
    expected = [(False, "group-split", "r700b"), (True, None, None)] * 3
    for _ in range(4):
        conversation = lf.Conversation("c", 1, tuple(turns))
        barrier = threading.Barrier(6)

        def work(
            conversation: lf.Conversation = conversation, barrier: threading.Barrier = barrier
        ) -> list[tuple[Any, ...]]:
            barrier.wait()
            out = []
            for _ in range(3):
                for envelope in (split, whole):
                    got = lf.check_summary(envelope, conversation, "v1")
                    out.append((got.current, got.reason, got.turn_id))
            return out

        with ThreadPoolExecutor(6) as pool:
            results = [future.result() for future in [pool.submit(work) for _ in range(6)]]
        assert results == [expected] * 6
