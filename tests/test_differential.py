"""Differential property tests of fingerprints and plans: the real ``ledgerfold`` package
against ``reference.py`` on random conversations (strategies in differential_strategies.py).
Turn digests and list fingerprints (SPEC §3), ordered-ID comparison, and compaction plans
(SPEC §4) must agree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import ledgerfold as lf

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from differential_strategies import COMMON, ID_TEXT, Case, cases, fresh_id, pkg_turn, plan_dict  # noqa: E402

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
