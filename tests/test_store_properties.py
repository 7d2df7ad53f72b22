"""Property tests of `SQLiteStore` (hypothesis): random operation sequences, and after every
step `store.context()` — with its fast path that trusts stored statuses — must agree with
`assemble_context(store.load(c), <pointed version>, policy_version)`, the slow oracle.

Also checked after every step: a version stored `current` really is current by
`check_summary` (eager invalidation is honest), a stale version's stored reason is what a
full check reports, and SPEC §1 invariants 3 and 4 hold on the store's context.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold._summary import CHECK_REASONS
from ledgerfold.store._retention import sealed_digests
from ledgerfold.store._schema import TURN_PURGED

PV = "policy-1"
POLICIES = (PV, "policy-2")
C = "conv"

BODY = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
OPS = st.one_of(
    st.tuples(
        st.just("append"),
        st.sampled_from(("user", "assistant", "tool", "system")),
        st.booleans(),
        st.sampled_from((None, "g1", "g2")),
        BODY,
    ),
    st.tuples(st.just("append_many"), st.integers(1, 6)),
    st.tuples(st.just("edit"), st.integers(0, 60), st.sampled_from(("change", "revert", "same"))),
    st.tuples(st.just("protect"), st.integers(0, 60)),
    st.tuples(st.just("retract"), st.integers(0, 60)),
    st.tuples(st.just("summarise"), st.integers(1, 6)),
    st.tuples(st.just("plan"), st.integers(1, 6)),
    st.tuples(st.just("commit-pending"), st.integers(0, 10)),
    st.tuples(st.just("purge"), st.integers(0, 60), st.booleans()),
    st.tuples(
        st.just("clash"),
    ),
)


class Model:
    """Drives a store and remembers what the test needs (original bodies, pending results)."""

    def __init__(self) -> None:
        self.store = lf.SQLiteStore(":memory:")
        self.original: dict[str, str] = {}
        self.pending: list[lf.SummaryEnvelope] = []
        self.counter = 0
        # SPEC §17.3's inputs, kept by the model itself: the turns each accepted summary
        # left raw below its slot, which turns are protected, which were retracted.
        self.kept: dict[str, list[lf.Turn]] = {}
        self.protected: set[str] = set()
        self.retracted: set[str] = set()

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def live(self, index: int) -> lf.Turn | None:
        turns = self.store.load(C).turns
        return turns[index % len(turns)] if turns else None

    def plan(self, keep_tail: int) -> lf.SummaryEnvelope | None:
        plan = self.store.start_plan(C, keep_tail, PV)
        return lf.create_summary_envelope(
            plan, self.store.load(C), self.fresh("s"), PV, f"summary {self.counter}"
        )

    def apply(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        store = self.store
        if kind == "append":
            _, role, protected, group, body = op
            turn = store.append(
                C,
                role,
                body,
                protected=protected,
                protection_reason="active-constraint" if protected else None,
                group=group,
            )
            self.original[turn.id] = body
            if protected:
                self.protected.add(turn.id)
        elif kind == "append_many":
            for turn in store.append_many(
                C, [{"role": "user", "body": f"b{i}"} for i in range(op[1])]
            ):
                self.original[turn.id] = turn.body
        elif kind in ("edit", "protect", "retract", "purge"):
            turn = self.live(op[1])
            if turn is None:
                return
            if kind == "edit":
                body = {"change": self.fresh("edited "), "revert": self.original.get(turn.id)}
                store.edit(C, turn.id, body=body.get(op[2], turn.body) or "")
            elif kind == "protect":
                store.edit(C, turn.id, protected=True, protection_reason="audit-evidence")
                self.protected.add(turn.id)
            elif kind == "retract":
                store.retract(C, turn.id)
                self.retracted.add(turn.id)
            else:
                store.purge_through(C, turn.sequence, "retention", force=op[2])
        elif kind == "summarise":
            envelope = self.plan(op[1])
            if envelope is not None:
                ledger = store.load(C)
                assert store.commit_summary(envelope).accepted
                self.accepted(envelope, ledger)
        elif kind == "plan":
            envelope = self.plan(op[1])
            if envelope is not None:
                self.pending.append(envelope)
        elif kind == "commit-pending":
            if self.pending:
                envelope = self.pending.pop(op[1] % len(self.pending))
                ledger = store.load(C)
                write = store.commit_summary(envelope)
                assert write.accepted or write.reason == "stale-source"
                if write.accepted:
                    self.accepted(envelope, ledger)
        elif kind == "clash":
            history = store.summary_history(C)
            if history and history[-1].envelope is not None:
                clash_id = history[-1].envelope.id
                if clash_id not in store.load(C):
                    # A retracted turn may already hold that ID.
                    with suppress(lf.DuplicateId):
                        store.append(C, "user", "clash", id=clash_id)

    def accepted(self, envelope: lf.SummaryEnvelope, ledger: lf.Conversation) -> None:
        """Remember the live turns the summary leaves raw below its slot (its highest live
        source's sequence)."""
        sources = set(envelope.source_ids)
        slot = max((t.sequence for t in ledger.turns if t.id in sources), default=0)
        self.kept[envelope.id] = [
            t for t in ledger.turns if t.sequence < slot and t.id not in sources
        ]

    def missing(self, envelope: lf.SummaryEnvelope) -> str | None:
        """SPEC §17.3: the first turn the summary kept raw below its slot that is protected
        and has been retracted since (and not purged after): the store's context falls back
        (`preserved-missing`). This model's plans preserve no role."""
        for turn in self.kept.get(envelope.id, []):
            if turn.id in self.protected and turn.id in self.retracted and not self.purged(turn.id):
                return turn.id
        return None

    def purged(self, turn_id: str) -> bool:
        """Whether a purge reached the turn (the store's record: which turns a purge takes
        depends on units, roles and `force`, SPEC §15.5, §17.2)."""
        row = (
            self.store._connection()
            .execute("SELECT state FROM turns WHERE conversation_id = ? AND id = ?", (C, turn_id))
            .fetchone()
        )
        return row is not None and row[0] == TURN_PURGED

    def check(self) -> None:
        store = self.store
        conversation = store.load(C)
        history = store.summary_history(C)
        # The pointer; a purge erases a non-current pointed version (SPEC §15.5).
        row = (
            store._connection()
            .execute(
                "SELECT s.id, s.pk FROM conversations c JOIN summaries s"
                " ON s.pk = c.current_summary"
                " WHERE c.id = ?",
                (C,),
            )
            .fetchone()
        )
        pointed = next(
            (r for r in history if r.envelope is not None and row and r.envelope.id == row[0]),
            None,
        )
        # A sealed summary's purged sources are checked by their stored digests.
        sealed = {} if row is None else sealed_digests(store._connection(), C, row[1])
        assert sum(r.status == "current" for r in history) <= 1
        for record in history:
            if record.status == "current":
                assert record is pointed and record.envelope is not None
                assert lf.check_summary(record.envelope, conversation, PV, sealed=sealed).current
        for policy in POLICIES:
            got = store.context(C, policy)
            want = lf.assemble_context(
                conversation, pointed.envelope if pointed else None, policy, sealed=sealed
            )
            missing = (
                self.missing(pointed.envelope)
                if pointed is not None
                and pointed.envelope is not None
                and pointed.status == "current"
                and want.summary is not None
                else None
            )
            if missing is not None:
                raw = lf.assemble_context(conversation, None, policy)
                want = lf.AssembledContext(raw.items, "preserved-missing", None, missing)
            elif want.summary is not None and set(want.summary.source_ids) <= set(sealed):
                # Only sealed sources: the pure function cannot know their sequences and
                # puts the summary just below the first live turn; the store keeps the
                # sequence it recorded (documented on `Store.context`).
                # Turns kept raw below that sequence (protected ones) stay before it.
                assert got.summary is not None
                stored = lf.SummaryItem(
                    want.summary.id,
                    want.summary.text,
                    got.summary.through_sequence,
                    want.summary.source_ids,
                )
                turns = [item for item in want.items if item != want.summary]
                below = [t for t in turns if t.sequence < stored.through_sequence]  # type: ignore[union-attr]
                assert turns == below + [t for t in turns if t not in below]
                want = lf.AssembledContext(
                    (*below, stored, *turns[len(below) :]),
                    want.fallback,
                    want.history_boundary,
                    want.fallback_id,
                )
            if pointed is not None and pointed.status == "stale":
                if want.fallback is None:  # sources edited back: stale stays stale
                    raw = lf.assemble_context(conversation, None, policy)
                    want = lf.AssembledContext(raw.items, f"stale-summary:{pointed.reason}")
                elif policy == PV:
                    # The context says what the check finds now (SPEC §8: the first failing
                    # check); the record keeps why the version went stale, which differs once
                    # a second change hits it (a late tool result, then an edit).
                    assert want.fallback is not None
                    assert want.fallback.startswith("stale-summary:")
                    assert pointed.reason in CHECK_REASONS
            assert got.items == want.items
            assert (got.fallback, got.fallback_id) == (want.fallback, want.fallback_id)
            assert got.history_boundary == store.history_boundary(C)
            ids = [item.id for item in got.items]
            summary = got.summary
            cited = set(summary.source_ids) if summary else set()
            assert len(ids) == len(set(ids)) and not cited & set(ids)  # invariant 3
            protected = {t.id for t in conversation.turns if t.protected}
            assert protected <= set(ids)  # invariant 4
        current = store.current_summary(C)
        assert current == (pointed.envelope if pointed and pointed.status == "current" else None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, max_size=24))
def test_store_context_agrees_with_assemble_context(ops: list[tuple[Any, ...]]) -> None:
    model = Model()
    try:
        model.check()
        for op in ops:
            model.apply(op)
            model.check()
    finally:
        model.store.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=8), st.integers(1, 4))
def test_revision_counts_every_ledger_write_and_sequences_are_never_reused(
    batches: list[int], retracts: int
) -> None:
    with lf.SQLiteStore() as store:
        sequences: list[int] = []
        for size in batches:
            added = store.append_many(C, [{"role": "user", "body": "x"}] * size)
            sequences.extend(t.sequence for t in added)
        for _ in range(min(retracts, len(sequences))):
            store.retract(C, store.load(C).turns[-1].id)
        later = store.append(C, "user", "y")
        assert sequences == list(range(1, len(sequences) + 1))
        assert later.sequence == len(sequences) + 1
        assert store.load(C).revision == len(batches) + min(retracts, len(sequences)) + 1
