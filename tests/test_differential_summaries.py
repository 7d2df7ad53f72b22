"""Differential property tests of a summary's life: the real ``ledgerfold`` package against
``reference.py`` on random scenarios (a conversation, a plan, a summary envelope, then one
mutation of the ledger, the IDs, the policy or the fingerprint). Envelopes (SPEC §5),
validity checks (§6), accepting a result (§7) and assembled contexts (§8) must agree; SPEC
§1 invariants 3–6 are also checked directly on the package's output.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ledgerfold as lf

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from differential_strategies import (  # noqa: E402
    ASCII_ID,
    BODY,
    COMMON,
    MAX_SEQ,
    REASONS,
    ROLES,
    SEQUENCE,
    UNICODE,
    Case,
    cases,
    fields_of,
    fresh_id,
    plan_dict,
)

ENVELOPE_FIELDS = (
    "id",
    "plan_id",
    "conversation_id",
    "source_revision",
    "source_ids",
    "source_fingerprint",
    "policy_version",
    "text",
)
POLICY = st.sampled_from(("p1", "p2", "策略-3"))
# Leading/trailing whitespace of several kinds, so stripping is exercised.
WS = st.sampled_from(("", " ", "\n", "\t ", "\u3000", "\u00a0"))
SUMMARY_TEXT = st.one_of(
    st.builds(lambda a, b, c: a + b + c, WS, st.text(UNICODE, max_size=30), WS),
    WS,
)


def with_changes(obj: Any, **changes: Any) -> Any:
    # Works for dataclasses and keyword-constructible native classes alike.
    return type(obj)(**{**fields_of(obj, ENVELOPE_FIELDS), **changes})


def envelope_dict(env: Any) -> dict[str, Any]:
    d = fields_of(env, ENVELOPE_FIELDS)
    d["source_ids"] = tuple(d["source_ids"])
    return d


def item_tuple(item: Any) -> tuple[Any, ...]:
    if isinstance(item, lf.SummaryItem):
        return ("summary", item.id, item.text, item.through_sequence, tuple(item.source_ids))
    assert isinstance(item, lf.TurnItem), type(item)
    meta = dict(item.meta) if item.meta is not None else None
    return ("turn", item.id, item.role, item.text, item.sequence, meta)


def context_tuple(ctx: Any) -> tuple[list[tuple[Any, ...]], str | None, str | None]:
    return ([item_tuple(i) for i in ctx.items], ctx.fallback, ctx.fallback_id)


def fresh_sequence(taken: Iterable[int], start: int) -> int:
    used = set(taken)
    s = start
    while s in used:
        s = (s + 1) % (MAX_SEQ + 1)
    return s


def rebuild(conv: Any, turns: Sequence[Any], conv_id: str | None = None) -> Any:
    return lf.Conversation(conv.id if conv_id is None else conv_id, conv.revision + 1, list(turns))


def assert_context_invariants(ctx: Any, conv: Any) -> None:
    """SPEC §1 invariants 3 and 4 on one assembled context."""
    seen: list[str] = []
    sources: set[str] = set()
    raw: set[str] = set()
    for item in ctx.items:
        seen.append(item.id)
        if isinstance(item, lf.SummaryItem):
            sources.update(item.source_ids)
            # Sources must not repeat inside one summary either.
            assert len(set(item.source_ids)) == len(tuple(item.source_ids))
        else:
            raw.add(item.id)
    assert len(seen) == len(set(seen)), "an id appears twice in the context"
    assert not (raw & sources), "a turn appears both raw and as a summary source"
    for t in conv.turns:
        if t.protected:
            assert t.id in raw, f"protected turn {t.id!r} not raw"
    # Every ledger turn is represented exactly once, raw or as a source.
    assert {t.id for t in conv.turns} <= raw | sources
    sequences = [
        i.sequence if isinstance(i, lf.TurnItem) else i.through_sequence for i in ctx.items
    ]
    assert sequences == sorted(sequences)


# ---------------------------------------------------------------- §5–§8 scenarios

MUTATIONS = (
    "none",
    "body",
    "role",
    "sequence",
    "protected",
    "group",
    "meta",
    "remove",
    "remove-preserved",
    "swap",
    "append",
    "policy",
    "conversation-id",
    "ids-reverse",
    "ids-drop",
    "ids-duplicate",
    "ids-unknown",
    "ids-empty",
    "fingerprint",
)
# Mutations that SPEC §6 says must always invalidate a summary.
MUST_INVALIDATE = {
    "body",
    "role",
    "sequence",
    "protected",
    "group",
    "meta",
    "remove",
    "swap",
    "policy",
    "conversation-id",
}


@dataclass
class Scenario:
    case: Case
    keep_tail: int
    plan: Any  # lf.CompactionPlan
    from_plan: bool  # False when the plan was empty and the summary was built by hand
    summary: Any  # lf.SummaryEnvelope, possibly tampered
    policy: str  # the policy version the checker uses
    conv: Any  # the conversation after the mutation
    mutation: str
    preserved_ids: tuple[str, ...] | None


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    case = draw(cases(min_size=1, max_size=10))
    conv = case.conv
    keep_tail = draw(st.integers(1, 4))
    plan = lf.plan_compaction(conv, keep_tail, "plan-" + draw(ASCII_ID))
    policy = draw(POLICY)
    text = draw(SUMMARY_TEXT.filter(lambda s: s.strip() != ""))
    turn_ids = [t.id for t in conv.turns]
    # Sometimes the summary id collides with a turn id, to exercise `duplicate-id`.
    # (Blank ids are left out: the package rejects a blank summary id, which the spec allows.)
    clashing = [i for i in turn_ids if i.strip()] or ["sum-fallback"]
    summary_id = draw(st.one_of(st.just("sum-" + draw(ASCII_ID)), st.sampled_from(clashing)))
    summary = lf.create_summary_envelope(plan, conv.turns, summary_id, policy, text)
    from_plan = summary is not None
    if summary is None:
        # Empty plan: cite a random non-empty set of unprotected turns so the
        # validity and assembly paths still get exercised.
        candidates = [t for t in conv.turns if not t.protected]
        assume(candidates)
        chosen = draw(
            st.lists(
                st.sampled_from(candidates),
                min_size=1,
                max_size=len(candidates),
                unique_by=lambda t: t.id,
            )
        )
        chosen.sort(key=lambda t: t.sequence)
        summary = lf.SummaryEnvelope(
            id=summary_id,
            plan_id=plan.plan_id,
            conversation_id=conv.id,
            source_revision=conv.revision,
            source_ids=tuple(t.id for t in chosen),
            source_fingerprint=lf.fingerprint_turns(chosen),
            policy_version=policy,
            text=text.strip(),
        )

    mutation = draw(st.sampled_from(MUTATIONS))
    source_ids = list(summary.source_ids)
    turns = list(conv.turns)
    index_of = {t.id: k for k, t in enumerate(turns)}
    src_pos = index_of[draw(st.sampled_from(source_ids))]
    src = turns[src_pos]
    new_conv = conv

    if mutation == "body":
        turns[src_pos] = src.replace(body=src.body + draw(st.text(UNICODE, min_size=1, max_size=4)))
    elif mutation == "role":
        turns[src_pos] = src.replace(
            role=draw(st.sampled_from([r for r in ROLES if r != src.role]))
        )
    elif mutation == "sequence":
        new_seq = fresh_sequence((t.sequence for t in turns), draw(SEQUENCE))
        turns[src_pos] = src.replace(sequence=new_seq)
    elif mutation == "protected":
        if src.protected:
            turns[src_pos] = src.replace(protected=False, protection_reason=None)
        else:
            turns[src_pos] = src.replace(
                protected=True, protection_reason=draw(st.sampled_from((None, *REASONS)))
            )
    elif mutation == "group":
        if src.group is None or draw(st.booleans()):
            taken_groups = {t.group for t in turns if t.group is not None}
            turns[src_pos] = src.replace(group=fresh_id(taken_groups, "moved-group"))
        else:
            turns[src_pos] = src.replace(group=None)
    elif mutation == "meta":
        old = src.meta or {}
        if old and draw(st.booleans()):
            turns[src_pos] = src.replace(meta=None)
        elif old:
            key = draw(st.sampled_from(sorted(old)))
            turns[src_pos] = src.replace(meta={**old, key: old[key] + "!"})
        else:
            turns[src_pos] = src.replace(meta={"tool_call_id": "call-1"})
    elif mutation == "remove":
        del turns[src_pos]
    elif mutation == "remove-preserved":
        others = [k for k, t in enumerate(turns) if t.id not in set(source_ids)]
        if others:
            del turns[draw(st.sampled_from(others))]
    elif mutation == "swap":
        other_pos = draw(
            st.sampled_from([k for k in range(len(turns)) if k != src_pos] or [src_pos])
        )
        a, b = turns[src_pos], turns[other_pos]
        if other_pos != src_pos:
            turns[src_pos] = a.replace(sequence=b.sequence)
            turns[other_pos] = b.replace(sequence=a.sequence)
    elif mutation == "append":
        top = max(t.sequence for t in turns)
        for extra in range(draw(st.integers(1, 3))):
            seq = (
                top + 1 + extra
                if top + 1 + extra <= MAX_SEQ
                else fresh_sequence((t.sequence for t in turns), 0)
            )
            turns.append(
                lf.Turn(
                    fresh_id((t.id for t in turns), "new"),
                    seq,
                    draw(st.sampled_from(ROLES)),
                    draw(BODY),
                    protected=draw(st.booleans()),
                )
            )
    elif mutation == "policy":
        policy = policy + "-next"
    elif mutation == "conversation-id":
        new_conv = rebuild(conv, turns, conv_id=conv.id + "-other")
    elif mutation == "ids-reverse":
        summary = with_changes(summary, source_ids=tuple(reversed(source_ids)))
    elif mutation == "ids-drop":
        summary = with_changes(summary, source_ids=tuple(s for s in source_ids if s != src.id))
    elif mutation == "ids-duplicate":
        at = draw(st.integers(0, len(source_ids)))
        summary = with_changes(summary, source_ids=(*source_ids[:at], src.id, *source_ids[at:]))
    elif mutation == "ids-unknown":
        at = draw(st.integers(0, len(source_ids)))
        unknown = fresh_id(turn_ids, "ghost")
        summary = with_changes(summary, source_ids=(*source_ids[:at], unknown, *source_ids[at:]))
    elif mutation == "ids-empty":
        summary = with_changes(summary, source_ids=())
    elif mutation == "fingerprint":
        summary = with_changes(summary, source_fingerprint="lf1:" + "0" * 64)

    if (
        new_conv is conv
        and mutation not in ("none", "policy")
        and not mutation.startswith(("ids-", "fingerprint"))
    ):
        new_conv = rebuild(conv, turns)

    preserved_ids = draw(
        st.sampled_from(
            (
                None,
                tuple(plan.preserved_ids),
                (*plan.preserved_ids, fresh_id(turn_ids, "vanished")),
            )
        )
    )
    return Scenario(
        case, keep_tail, plan, from_plan, summary, policy, new_conv, mutation, preserved_ids
    )


@COMMON
@given(cases(min_size=1, max_size=10), st.integers(1, 5), SUMMARY_TEXT, POLICY, st.booleans())
def test_envelopes_match_reference(
    case: Case, keep_tail: int, text: str, policy: str, drop_one: bool
) -> None:
    plan = lf.plan_compaction(case.conv, keep_tail, "plan-x")
    turns = list(case.conv.turns)
    if drop_one and plan.compacted_ids:
        # A compacted turn missing from `turns` must yield None.
        turns = [t for t in turns if t.id != plan.compacted_ids[-1]]
    env = lf.create_summary_envelope(plan, turns, "sum-1", policy, text)
    expected = ref.create_summary_envelope(plan_dict(plan), turns, "sum-1", policy, text)
    if expected is None:
        assert env is None
    else:
        assert env is not None
        assert envelope_dict(env) == expected
        # A fresh envelope is current on the conversation it was made from.
        assert lf.check_summary(env, case.conv, policy).current is True


# check, assemble and accept share one test: generating a scenario costs far more
# than running the three comparisons, and the file must stay well under a minute.


def check_matches_reference(sc: Scenario) -> None:
    got = lf.check_summary(sc.summary, sc.conv, sc.policy)
    expected = ref.check_summary(sc.summary, sc.conv.id, sc.conv.turns, sc.policy)
    assert (got.current, got.reason, got.turn_id) == expected
    assert lf.is_summary_current(sc.summary, sc.conv, sc.policy) == expected[0]
    # Sanity of the oracle itself against SPEC §6.
    if sc.mutation in MUST_INVALIDATE and not (sc.mutation == "swap" and len(sc.case.conv) < 2):
        assert expected[0] is False
    if sc.mutation in ("none", "append", "remove-preserved") and not _splits_a_group(sc):
        assert expected == (True, None, None)


def _splits_a_group(sc: Scenario) -> bool:
    """SPEC §15.4: a non-source turn shares a group with a source (then `group-split`)."""
    sources = set(sc.summary.source_ids)
    groups = {t.group for t in sc.conv.turns if t.id in sources and t.group is not None}
    return any(t.id not in sources and t.group in groups for t in sc.conv.turns)


def assemble_matches_reference(sc: Scenario) -> None:
    ctx = lf.assemble_context(sc.conv, sc.summary, sc.policy, sc.preserved_ids)
    expected = ref.assemble_context(
        sc.conv.id, sc.conv.turns, sc.summary, sc.policy, sc.preserved_ids
    )
    assert context_tuple(ctx) == expected
    assert ctx.history_boundary is None
    assert_context_invariants(ctx, sc.conv)

    no_summary = lf.assemble_context(sc.conv, None, sc.policy)
    assert context_tuple(no_summary) == ref.assemble_context(
        sc.conv.id, sc.conv.turns, None, sc.policy
    )
    assert_context_invariants(no_summary, sc.conv)

    if sc.from_plan and sc.mutation == "none":
        # Invariant 5: right after planning, the newest keep_tail turns are raw,
        # and so is everything the plan preserved.
        raw = {i.id for i in ctx.items if isinstance(i, lf.TurnItem)}
        newest = sc.conv.turns[max(len(sc.conv) - sc.keep_tail, 0) :]
        assert {t.id for t in newest} <= raw
        assert set(sc.plan.preserved_ids) <= raw


def accept_matches_reference(sc: Scenario, which: str) -> None:
    candidate = None if which == "none" else sc.summary
    active = sc.summary.plan_id if which != "other" else sc.summary.plan_id + "-newer"
    got = lf.accept_summary_result(candidate, sc.conv, sc.policy, active)
    expected = ref.accept_summary_result(candidate, sc.conv.id, sc.conv.turns, sc.policy, active)
    assert (got.accepted, got.reason, got.detail) == expected
    if got.accepted:
        assert got.summary == candidate


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(("active", "other", "none")))
def test_check_assemble_accept_match_reference(sc: Scenario, which: str) -> None:
    check_matches_reference(sc)
    assemble_matches_reference(sc)
    accept_matches_reference(sc, which)
