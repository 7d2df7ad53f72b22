"""One acceptance rule (SPEC §7, §15.4, §17.1): the same rule table, and random candidates,
against the pure `accept_summary_result` and `SQLiteStore.commit_summary`."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf

PV = "v1"
CID = "c"
ROLES = ("system",)
_counter = itertools.count()


def _ledger(store: lf.SQLiteStore) -> None:
    """t0 the system prompt, t1..t14; t5 a pending confirmation (protected)."""
    store.append_many(
        CID,
        [{"id": "t0", "role": "system", "body": "be brief"}]
        + [
            {
                "id": f"t{i}",
                "role": "user" if i % 2 else "assistant",
                "body": f"body {i}",
                "protected": i == 5,
                "protection_reason": "pending-confirmation" if i == 5 else None,
            }
            for i in range(1, 15)
        ],
    )


class World:
    """A store with a current summary `s0` (t1..t4) and an active plan `p1` extending it."""

    def __init__(self, path: Path) -> None:
        self.store = lf.SQLiteStore(path)
        _ledger(self.store)
        p0 = self.store.start_plan(CID, 10, PV, "p0", preserve_roles=ROLES)
        s0 = lf.create_summary_envelope(p0, self.store.load(CID), "s0", PV, "first")
        assert s0 is not None and self.store.commit_summary(s0).accepted
        self.s0 = s0
        self.plan = self.store.start_plan(CID, 4, PV, "p1", preserve_roles=ROLES)
        assert self.plan.compacted_ids == tuple(f"t{i}" for i in (1, 2, 3, 4, 6, 7, 8, 9, 10))

    def envelope(
        self,
        ids: tuple[str, ...],
        *,
        parent: str | None = "s0",
        plan: str = "p1",
        good: bool = True,
    ) -> lf.SummaryEnvelope:
        ledger = self.store.load(CID)
        turns = [ledger.get(i) for i in ids]
        fingerprint = lf.fingerprint_turns([t for t in turns if t is not None])
        if not good:
            fingerprint = lf.fingerprint_turns([t for t in ledger.turns if t.id == "t14"])
        return lf.SummaryEnvelope(
            id=f"cand-{next(_counter)}",
            plan_id=plan,
            conversation_id=CID,
            source_revision=ledger.revision,
            source_ids=ids,
            source_fingerprint=fingerprint,
            policy_version=PV,
            text="candidate",
            parent_id=parent,
        )

    def pure(self, candidate: lf.SummaryEnvelope | None) -> tuple[bool, str | None, str | None]:
        write = lf.accept_summary_result(
            candidate,
            self.store.load(CID),
            PV,
            "p1",
            plan=self.plan,
            current=self.store.current_summary(CID),
            preserve_roles=ROLES,
        )
        return write.accepted, write.reason, write.detail

    def stored(self, candidate: lf.SummaryEnvelope | None) -> tuple[bool, str | None, str | None]:
        write = self.store.commit_summary(candidate)
        return write.accepted, write.reason, write.detail


EXTENDED = ("t1", "t2", "t3", "t4", "t6", "t7", "t8")

#: (name, candidate, expected verdict)
CASES: list[tuple[str, Callable[[World], lf.SummaryEnvelope | None], tuple[object, ...]]] = [
    ("none", lambda w: None, (False, "invalid-summary", None)),
    ("accepted", lambda w: w.envelope(EXTENDED), (True, None, None)),
    ("rebase", lambda w: w.envelope(("t1", "t2", "t3"), parent=None), (True, None, None)),
    (
        "superseded-plan",
        lambda w: w.envelope(EXTENDED, plan="p0"),
        (False, "stale-source", "superseded-plan"),
    ),
    (
        "protected source",
        lambda w: w.envelope(("t1", "t2", "t3", "t4", "t5", "t6")),
        (False, "invalid-summary", "protected-source"),
    ),
    (
        "protected source, rebase",
        lambda w: w.envelope(("t5", "t6"), parent=None),
        (False, "invalid-summary", "protected-source"),
    ),
    (
        "preserved role",
        lambda w: w.envelope(("t0", "t1", "t2", "t3", "t4", "t6"), parent=None),
        (False, "invalid-summary", "protected-source"),
    ),
    (
        "outside the plan (the tail)",
        lambda w: w.envelope(("t1", "t2", "t3", "t4", "t12")),
        (False, "invalid-summary", "plan-mismatch"),
    ),
    (
        "parent not current",
        lambda w: w.envelope(EXTENDED, parent="never-written"),
        (False, "invalid-summary", "plan-mismatch"),
    ),
    (
        "parent's sources dropped",
        lambda w: w.envelope(("t3", "t4", "t6")),
        (False, "invalid-summary", "plan-mismatch"),
    ),
    (
        "adds nothing to its parent",
        lambda w: w.envelope(("t1", "t2", "t3", "t4")),
        (False, "invalid-summary", "plan-mismatch"),
    ),
    (
        "modified",
        lambda w: w.envelope(EXTENDED, good=False),
        (False, "stale-source", "source-modified"),
    ),
    (
        "missing",
        lambda w: w.envelope(("t1", "t2", "t3", "t4", "t99")),
        (False, "stale-source", "source-missing"),
    ),
    (
        "reordered",
        lambda w: w.envelope(("t1", "t2", "t3", "t4", "t7", "t6")),
        (False, "stale-source", "source-reordered"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_rule_table_holds_for_the_pure_function_and_the_store(
    tmp_path: Path, case: tuple[str, Callable[[World], lf.SummaryEnvelope | None], object]
) -> None:
    _, make, expected = case
    world = World(tmp_path / "ledger.db")
    candidate = make(world)
    assert world.pure(candidate) == expected
    assert world.stored(candidate) == expected
    world.store.close()


def test_a_protected_source_is_refused_by_the_pure_function_without_any_plan() -> None:
    """SPEC §17.1 "always": no `plan`, no `current` — still refused, and `assemble_context`
    never gets to leave the protected turn out (SPEC §1.4)."""
    turns = [
        lf.Turn("a", 1, "user", "x"),
        lf.Turn("b", 2, "assistant", "y", protected=True, protection_reason="pending-confirmation"),
        lf.Turn("c", 3, "user", "z"),
    ]
    conversation = lf.Conversation(CID, 3, turns)
    candidate = lf.SummaryEnvelope(
        id="s",
        plan_id="p",
        conversation_id=CID,
        source_revision=3,
        source_ids=("a", "b"),
        source_fingerprint=lf.fingerprint_turns(turns[:2]),
        policy_version=PV,
        text="s",
    )
    write = lf.accept_summary_result(candidate, conversation, PV, "p")
    assert (write.accepted, write.reason, write.detail) == (
        False,
        "invalid-summary",
        "protected-source",
    )
    role = lf.accept_summary_result(
        candidate.__class__(
            **{
                **_fields(candidate),
                "source_ids": ("a",),
                "source_fingerprint": lf.fingerprint_turns(turns[:1]),
            }
        ),
        conversation,
        PV,
        "p",
        preserve_roles=("user",),
    )
    assert role.detail == "protected-source"


def _fields(envelope: lf.SummaryEnvelope) -> dict[str, object]:
    return {name: getattr(envelope, name) for name in envelope.__slots__}  # type: ignore[attr-defined]


_ALL = (*(f"t{i}" for i in range(15)), "t99")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    ids=st.lists(st.sampled_from(_ALL), min_size=1, max_size=9, unique=True),
    shuffle=st.booleans(),
    parent=st.sampled_from([None, "s0", "other"]),
    plan=st.sampled_from(["p1", "p0"]),
    good=st.booleans(),
)
def test_random_candidates_get_the_same_verdict_from_both(
    tmp_path_factory: pytest.TempPathFactory,
    ids: list[str],
    shuffle: bool,
    parent: str | None,
    plan: str,
    good: bool,
) -> None:
    world = World(tmp_path_factory.mktemp("acc") / "ledger.db")
    if not shuffle:
        ids = sorted(ids, key=lambda i: int(i[1:]))
    candidate = world.envelope(tuple(ids), parent=parent, plan=plan, good=good)
    assert world.pure(candidate) == world.stored(candidate)
    world.store.close()


def test_an_extension_of_a_sealed_summary_gets_the_same_verdict(tmp_path: Path) -> None:
    """With `sealed` (the purged sources' digests), the pure rule accepts what the store
    accepts, and refuses a candidate that drops a sealed source the same way."""
    world = World(tmp_path / "ledger.db")
    before = {turn.id: turn for turn in world.store.load(CID).turns}
    world.store.purge_through(CID, 3, "retention")  # t0 (system) stays; t1, t2 go
    sealed = {i: before[i].digest for i in ("t1", "t2")}
    ledger = world.store.load(CID)
    assert ledger.get("t1") is None
    plan = world.store.start_plan(CID, 4, PV, "p2", preserve_roles=ROLES)
    ids = (*world.s0.source_ids, "t6", "t7")
    digests = [before[i].digest for i in ids]

    def candidate(source_ids: tuple[str, ...]) -> lf.SummaryEnvelope:
        return lf.SummaryEnvelope(
            id=f"cand-{next(_counter)}",
            plan_id="p2",
            conversation_id=CID,
            source_revision=ledger.revision,
            source_ids=source_ids,
            source_fingerprint=lf._native.fingerprint_digests(
                b"".join(before[i].digest for i in source_ids)
            ),
            policy_version=PV,
            text="extension",
            parent_id="s0",
        )

    assert len(digests) == len(ids)
    for source_ids, expected in [
        (ids[2:], (False, "invalid-summary", "plan-mismatch")),  # drops the sealed ones
        (ids, (True, None, None)),
    ]:
        envelope = candidate(source_ids)
        write = lf.accept_summary_result(
            envelope,
            world.store.load(CID),
            PV,
            "p2",
            plan=plan,
            current=world.store.current_summary(CID),
            sealed=sealed,
            preserve_roles=ROLES,
        )
        assert (write.accepted, write.reason, write.detail) == expected
        assert world.stored(envelope) == expected
    world.store.close()


def test_with_no_current_summary_an_extension_is_refused_by_both(tmp_path: Path) -> None:
    """SPEC §15.1, §15.4: after `s0` went stale there is no current summary, so a candidate
    extending `s0` (its text built on the edited turn's old content) is refused. A store's
    commit passes `lineage=True`: `current=None` then means "no current summary", not "skip
    the parent rules"."""
    world = World(tmp_path / "ledger.db")
    world.store.edit(CID, "t2", body="corrected")
    assert world.store.current_summary(CID) is None
    candidate = world.envelope(EXTENDED)  # parent s0, fingerprinted on the ledger as it is

    def pure(**lineage: bool) -> tuple[bool, str | None, str | None]:
        write = lf.accept_summary_result(
            candidate,
            world.store.load(CID),
            PV,
            "p1",
            plan=world.plan,
            current=world.store.current_summary(CID),
            preserve_roles=ROLES,
            **lineage,
        )
        return write.accepted, write.reason, write.detail

    assert pure(lineage=True) == (False, "invalid-summary", "plan-mismatch")
    assert pure() == (True, None, None)  # no `current`, no lineage: SPEC §17.1's default
    assert world.stored(candidate)[0] is False
    rebase = world.envelope(("t1", "t2", "t3"), parent=None)
    write = lf.accept_summary_result(
        rebase, world.store.load(CID), PV, "p1", plan=world.plan, lineage=True
    )
    assert write.accepted  # a rebase has no parent to check
    with pytest.raises(lf.InvalidInput) as info:
        lf.accept_summary_result(rebase, world.store.load(CID), PV, "p1", lineage=1)  # type: ignore[arg-type]
    assert info.value.field == "lineage"
    world.store.close()
