"""Differential property tests: the real ``ledgerfold`` package against ``reference.py``.

Random conversations (unicode ids, sparse sequences given out of order, all roles,
protection, groups of 1–4 turns, meta, CJK/emoji/empty bodies) are fed to both
implementations; every observable result must agree. SPEC §1 invariants 3–6 are
also checked directly on the package's output.
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

MAX_SEQ = 2**63 - 1
ROLES = ("system", "user", "assistant", "tool")
REASONS = ("pending-confirmation", "active-constraint", "audit-evidence", "unverified-provenance")
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
PLAN_FIELDS = (
    "plan_id",
    "conversation_id",
    "source_revision",
    "compacted_ids",
    "preserved_ids",
    "through_sequence",
)

COMMON = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- strategies

# No surrogates: lone surrogates are invalid input by SPEC §2.
UNICODE = st.characters(codec="utf-8")
ASCII_ID = st.text(alphabet="abcxyz0123456789-_:.", min_size=1, max_size=6)
ID_TEXT = st.one_of(ASCII_ID, st.text(UNICODE, min_size=1, max_size=6))
SPECIAL_BODIES = (
    "",
    "只读本地资料",
    "ok 👍\nline two\r\n\ttab",
    "👨\u200d👩\u200d👧 family",
    "\x00nul",
    "Write 3 files? (yes/no)",
    "<|im_start|>system\n",
)
BODY = st.one_of(st.sampled_from(SPECIAL_BODIES), st.text(UNICODE, max_size=40))
META_KEY = st.one_of(
    st.sampled_from(("tool_calls", "tool_call_id", "name", "a", "ab", "b", "\ue000", "😀")),
    st.text(UNICODE, min_size=1, max_size=5),
)
META = st.one_of(st.none(), st.dictionaries(META_KEY, st.text(UNICODE, max_size=12), max_size=3))
SEQUENCE = st.one_of(st.integers(0, 60), st.integers(0, MAX_SEQ))
POLICY = st.sampled_from(("p1", "p2", "策略-3"))
# Leading/trailing whitespace of several kinds, so stripping is exercised.
WS = st.sampled_from(("", " ", "\n", "\t ", "\u3000", "\u00a0"))
SUMMARY_TEXT = st.one_of(
    st.builds(lambda a, b, c: a + b + c, WS, st.text(UNICODE, max_size=30), WS),
    WS,
)


@st.composite
def ref_turn_lists(draw: st.DrawFn, min_size: int = 0, max_size: int = 12) -> list[ref.RefTurn]:
    """Turns in a random (not sequence) order, with groups shared by 1–4 turns."""
    n = draw(st.integers(min_size, max_size))
    ids = draw(st.lists(ID_TEXT, min_size=n, max_size=n, unique=True))
    seqs = draw(st.lists(SEQUENCE, min_size=n, max_size=n, unique=True))
    groups: list[str | None] = [None] * n
    order = draw(st.permutations(range(n)))
    i = 0
    group_no = 0
    while i < n:
        size = draw(st.integers(0, 4))
        if size == 0:
            i += 1
            continue
        # Suffix keeps group names distinct even when the drawn stem repeats.
        name = (
            draw(st.one_of(st.just("g"), st.text(UNICODE, min_size=1, max_size=3))) + f"#{group_no}"
        )
        group_no += 1
        for j in order[i : i + size]:
            groups[j] = name
        i += size
    turns = []
    for k in range(n):
        protected = draw(st.sampled_from((False, False, False, True)))
        reason = draw(st.sampled_from((None, *REASONS))) if protected else None
        turns.append(
            ref.RefTurn(
                id=ids[k],
                sequence=seqs[k],
                role=draw(st.sampled_from(ROLES)),
                body=draw(BODY),
                protected=protected,
                protection_reason=reason,
                group=groups[k],
                meta=draw(META),
            )
        )
    return turns


def pkg_turn(t: ref.RefTurn) -> Any:
    return lf.Turn(
        t.id,
        t.sequence,
        t.role,
        t.body,
        protected=t.protected,
        protection_reason=t.protection_reason,
        group=t.group,
        meta=dict(t.meta) if t.meta is not None else None,
    )


@dataclass(frozen=True)
class Case:
    conv_id: str
    revision: int
    ref_turns: list[ref.RefTurn]  # in the (unsorted) order given to Conversation
    conv: Any  # lf.Conversation


@st.composite
def cases(draw: st.DrawFn, min_size: int = 0, max_size: int = 12) -> Case:
    turns = draw(ref_turn_lists(min_size=min_size, max_size=max_size))
    conv_id = draw(ID_TEXT)
    # Leaves room for the +1 a mutated snapshot gets.
    revision = draw(st.one_of(st.integers(0, 100), st.integers(0, MAX_SEQ - 1)))
    conv = lf.Conversation(conv_id, revision, [pkg_turn(t) for t in turns])
    return Case(conv_id, revision, turns, conv)


# ---------------------------------------------------------------- helpers


def fields_of(obj: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


def with_changes(obj: Any, **changes: Any) -> Any:
    # Works for dataclasses and keyword-constructible native classes alike.
    return type(obj)(**{**fields_of(obj, ENVELOPE_FIELDS), **changes})


def plan_dict(plan: Any) -> dict[str, Any]:
    d = fields_of(plan, PLAN_FIELDS)
    d["compacted_ids"] = tuple(d["compacted_ids"])
    d["preserved_ids"] = tuple(d["preserved_ids"])
    return d


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


def fresh_id(taken: Iterable[str], stem: str) -> str:
    used = set(taken)
    candidate = stem
    n = 0
    while candidate in used:
        n += 1
        candidate = f"{stem}~{n}"
    return candidate


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


# ---------------------------------------------------------------- §3 fingerprints


@COMMON
@given(cases())
def test_digests_and_fingerprints_match_reference(case: Case) -> None:
    conv = case.conv
    ordered_ref = sorted(case.ref_turns, key=lambda t: t.sequence)
    assert [t.id for t in conv.turns] == [t.id for t in ordered_ref]
    assert len(conv) == len(case.ref_turns)
    assert [t.id for t in conv] == [t.id for t in ordered_ref]
    assert conv.id == case.conv_id
    assert conv.revision == case.revision
    for pt, rt in zip(conv.turns, ordered_ref, strict=True):
        assert (
            pt.id,
            pt.sequence,
            pt.role,
            pt.body,
            pt.protected,
            pt.protection_reason,
            pt.group,
        ) == (
            rt.id,
            rt.sequence,
            rt.role,
            rt.body,
            rt.protected,
            rt.protection_reason,
            rt.group,
        )
        # An empty meta may read back as {} or None (same encoding); otherwise an equal dict.
        if rt.meta:
            assert pt.meta == dict(rt.meta)
            assert type(pt.meta) is dict
        else:
            assert not pt.meta
        assert isinstance(pt.digest, bytes)
        assert pt.digest == ref.turn_digest(rt) == ref.turn_digest(pt)
        assert rt.id in conv
        assert conv.get(rt.id) == pt
    assert conv.get(fresh_id((t.id for t in conv.turns), "absent")) is None
    # Sequence order, the given (unsorted) order, and a reversal all agree.
    assert lf.fingerprint_turns(conv.turns) == ref.fingerprint_turns(ordered_ref)
    given_order = [pkg_turn(t) for t in case.ref_turns]
    assert lf.fingerprint_turns(given_order) == ref.fingerprint_turns(case.ref_turns)
    assert lf.fingerprint_turns(list(reversed(conv.turns))) == ref.fingerprint_turns(
        list(reversed(ordered_ref))
    )


@COMMON
@given(
    st.lists(st.sampled_from(("a", "b", "c", "é", "🙂")), max_size=5),
    st.lists(st.sampled_from(("a", "b", "c", "é", "🙂")), max_size=5),
)
def test_same_ordered_ids_matches_reference(a: list[str], b: list[str]) -> None:
    expected = ref.same_ordered_ids(a, b)
    assert lf.same_ordered_ids(a, b) == expected
    assert lf.same_ordered_ids(tuple(a), list(b)) == expected
    assert lf.same_ordered_ids(a, a) is True


# ---------------------------------------------------------------- §4 planning


@COMMON
@given(cases(), st.integers(1, 14), ID_TEXT)
def test_plans_match_reference(case: Case, keep_tail: int, plan_stem: str) -> None:
    plan_id = "plan-" + plan_stem
    plan = lf.plan_compaction(case.conv, keep_tail, plan_id)
    expected = ref.plan_compaction(case.conv_id, case.revision, case.ref_turns, keep_tail, plan_id)
    assert plan_dict(plan) == expected
    assert isinstance(plan.compacted_ids, tuple)
    assert isinstance(plan.preserved_ids, tuple)

    # Invariant 6: groups all-or-nothing.
    compacted = set(plan.compacted_ids)
    members: dict[str, set[str]] = {}
    for t in case.conv.turns:
        if t.group is not None:
            members.setdefault(t.group, set()).add(t.id)
    for group_ids in members.values():
        assert group_ids <= compacted or not (group_ids & compacted)
    # Protected and tail turns are never compacted; every turn lands on exactly one side.
    tail = {t.id for t in case.conv.turns[max(len(case.conv) - keep_tail, 0) :]}
    assert not compacted & tail
    assert not any(case.conv.get(cid).protected for cid in compacted)
    assert compacted.isdisjoint(plan.preserved_ids)
    assert compacted | set(plan.preserved_ids) == {t.id for t in case.conv.turns}


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
