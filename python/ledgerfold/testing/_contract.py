"""The `Store` contract suite (SPEC §9, §12): the tests every backend must pass.

Another backend proves itself with one command::

    python -m ledgerfold.testing myapp.storage:make_store

where `make_store(tmp_path)` returns a fresh, empty store (a `pathlib.Path` to a fresh
directory is passed for backends that need files). Or subclass `StoreContract` in a test
module of your own and define `make_store`; pytest collects the inherited tests.

The suite uses only the `Store` protocol's methods: nothing here looks inside a database.
It needs `pytest` (the `testing` extra: `pip install "ledgerfold[testing]"`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.store._protocol import takes_keyword
from ledgerfold.testing._contract_rules import RuleContract

__all__ = ["PV", "SECRET", "StoreContract", "fill", "summarise"]

PV = "policy-1"

#: The factory `python -m ledgerfold.testing MODULE:FACTORY` was given (see `_suite.py`).
CONFIGURED_FACTORY: Callable[[Path], Any] | None = None
SECRET = "SECRET-BODY-\u2028-do-not-log"


def fill(store: Any, conversation: str = "c", n: int = 10, **extra: Any) -> list[lf.Turn]:
    """Append `n` user turns whose bodies carry `SECRET` (no error may quote them)."""
    turns: list[lf.Turn] = store.append_many(
        conversation, [{"role": "user", "body": f"{SECRET} {i}", **extra} for i in range(n)]
    )
    return turns


def summarise(
    store: Any, conversation: str = "c", keep_tail: int = 3, summary_id: str | None = None
) -> lf.SummaryEnvelope:
    """Plan, envelope and commit one summary; assert it was accepted."""
    plan = store.start_plan(conversation, keep_tail, PV)
    envelope = lf.create_summary_envelope(
        plan, store.load(conversation), summary_id or f"s-{plan.plan_id}", PV, f"{SECRET} summary"
    )
    assert envelope is not None
    write = store.commit_summary(envelope)
    assert write.accepted, write
    return envelope


class StoreContract(RuleContract):
    """Subclass and define `make_store(self, tmp_path)`; every `test_` method is one rule of
    the protocol's contract. A store's `close()`, when it has one (it is not part of the
    protocol), is called after each test."""

    def make_store(self, tmp_path: Path) -> Any:
        raise NotImplementedError("define make_store(self, tmp_path) in your subclass")

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Any]:
        made = self.make_store(tmp_path)
        try:
            yield made
        finally:
            close = getattr(made, "close", None)
            if callable(close):
                close()

    def test_implements_the_protocol(self, store: Any) -> None:
        assert isinstance(store, lf.Store)
        assert lf.SummaryRecord is not None and "SQLiteStore" in lf.__all__

    def test_append_assigns_sequences_revisions_and_fresh_ids(self, store: Any) -> None:
        first = store.append("c", "user", "hello")
        second = store.append("c", "assistant", "hi", id="m2", meta={"name": "bot"})
        assert (first.sequence, second.sequence) == (1, 2)
        assert re.fullmatch(r"t-[0-9a-f]{32}", first.id)
        assert second.id == "m2" and second.meta == {"name": "bot"}
        loaded = store.load("c")
        assert loaded.revision == 2 and loaded.turns == (first, second)
        assert store.conversation_ids() == ["c"]

    def test_load_of_unknown_conversation_is_empty_at_revision_zero(self, store: Any) -> None:
        empty = store.load("nobody")
        assert (empty.id, empty.revision, len(empty)) == ("nobody", 0, 0)
        assert store.conversation_ids() == []

    def test_append_many_is_one_revision_and_all_or_nothing(self, store: Any) -> None:
        fill(store, n=3)
        before = store.load("c")
        with pytest.raises(lf.InvalidInput) as info:
            store.append_many(
                "c",
                [
                    {"role": "user", "body": "ok"},
                    {"role": "user", "body": "ok"},
                    {"role": "x", "body": "b"},
                ],
            )
        assert info.value.field == "turns[2].role"
        assert store.load("c") == before
        added = store.append_many(
            "c", [{"role": "user", "body": "a"}, {"role": "tool", "body": "b"}]
        )
        assert [t.sequence for t in added] == [4, 5]
        assert store.load("c").revision == before.revision + 1

    def test_turn_ids_are_unique_within_a_conversation_but_not_across(self, store: Any) -> None:
        store.append("c", "user", "a", id="m1")
        store.append("d", "user", "a", id="m1")
        with pytest.raises(lf.DuplicateId):
            store.append("c", "user", "again", id="m1")
        with pytest.raises(lf.DuplicateId):
            store.append_many("e", [{"role": "user", "body": "x", "id": "k"}] * 2)
        store.retract("c", "m1")
        with pytest.raises(lf.DuplicateId):  # a retracted ID is never reused either
            store.append("c", "user", "again", id="m1")
        assert store.load("e").revision == 0

    def test_sequences_are_never_reused_after_a_retraction(self, store: Any) -> None:
        turns = fill(store, n=3)
        store.retract("c", turns[-1].id)
        assert store.append("c", "user", "next").sequence == 4

    def test_edit_changes_fields_and_bumps_the_revision(self, store: Any) -> None:
        turns = fill(store, n=2)
        edited = store.edit(
            "c", turns[0].id, body="new", protected=True, protection_reason="audit-evidence"
        )
        assert edited == turns[0].replace(
            body="new", protected=True, protection_reason="audit-evidence"
        )
        loaded = store.load("c")
        assert loaded.revision == 2 and loaded.turns[0] == edited

    @pytest.mark.parametrize("field", ["id", "sequence", "colour"])
    def test_edit_refuses_id_sequence_and_unknown_fields(self, store: Any, field: str) -> None:
        turns = fill(store, n=1)
        with pytest.raises(lf.InvalidInput) as info:
            store.edit("c", turns[0].id, **{field: 7})
        assert info.value.field == field
        assert store.load("c").revision == 1

    def test_unknown_turn_is_named_never_its_body(self, store: Any) -> None:
        turns = fill(store, n=1)
        calls: list[Callable[[], object]] = [
            lambda: store.edit("c", "ghost", body="x"),
            lambda: store.retract("c", "ghost"),
        ]
        for call in calls:
            with pytest.raises(lf.InvalidInput) as info:
                call()
            assert "ghost" in str(info.value) and SECRET not in str(info.value)
        store.retract("c", turns[0].id)
        with pytest.raises(lf.InvalidInput):
            store.retract("c", turns[0].id)
        with pytest.raises(lf.InvalidInput):
            store.edit("other", turns[0].id, body="x")

    def test_retract_removes_from_view_and_bumps_revision(self, store: Any) -> None:
        turns = fill(store, n=3)
        store.retract("c", turns[1].id)
        loaded = store.load("c")
        assert loaded.turn_ids == (turns[0].id, turns[2].id) and loaded.revision == 2

    def test_bad_input_names_the_field(self, store: Any) -> None:
        fill(store, n=4)
        cases: list[tuple[Callable[[], object], str]] = [
            (lambda: store.append("", "user", "b"), "conversation_id"),
            (lambda: store.append(5, "user", "b"), "conversation_id"),
            (lambda: store.append("c", "user", "b", id="  "), "id"),
            (lambda: store.append("c", "user", 3), "body"),
            (lambda: store.append("c", "user", "b", protected=1), "protected"),
            (lambda: store.append("c", "user", "\ud800"), "body"),
            (lambda: store.append_many("c", "nope"), "turns"),
            (lambda: store.append_many("c", [1]), "turns[0]"),
            (lambda: store.append_many("c", [{"role": "user"}]), "turns[0].body"),
            (lambda: store.start_plan("c", True, PV), "keep_tail"),
            (lambda: store.start_plan("c", 0, PV), "keep_tail"),
            (lambda: store.start_plan("c", 2, " "), "policy_version"),
            (lambda: store.start_plan("c", 2, PV, plan_id=""), "plan_id"),
            (lambda: store.begin_compaction("c", 2, PV, min_new_turns=-1), "min_new_turns"),
            (lambda: store.begin_compaction("c", 2, PV, min_new_turns=True), "min_new_turns"),
            (lambda: store.commit_summary("s"), "envelope"),
            (lambda: store.record_failure("nope", "timeout"), "plan_id"),
            (lambda: store.record_failure("", "timeout"), "plan_id"),
            (lambda: store.context("c", ""), "policy_version"),
            (lambda: store.context("c", None), "policy_version"),
            (lambda: store.purge_through("c", -1, "r"), "sequence"),
            (lambda: store.purge_through("c", True, "r"), "sequence"),
            (lambda: store.purge_through("c", 2, ""), "reason"),
            (lambda: store.purge_through("unknown", 2, "r"), "conversation_id"),
            (lambda: store.purge_through("c", 2, "r", force="yes"), "force"),
            (lambda: store.sources_of("nope"), "summary_id"),
            (lambda: store.summaries_citing("c", ""), "turn_id"),
            (lambda: store.history_boundary(""), "conversation_id"),
        ]
        if takes_keyword(store.begin_compaction, "only_due_at_once"):  # protocol 2
            cases.append(
                (
                    lambda: store.begin_compaction("c", 2, PV, only_due_at_once=1),
                    "only_due_at_once",
                )
            )
        for call, field in cases:
            with pytest.raises(lf.InvalidInput) as info:
                call()
            assert info.value.field == field, (field, str(info.value))
        assert store.load("c").revision == 1

    def test_begin_compaction_only_due_at_once_registers_only_what_is_due_at_once(
        self, store: Any
    ) -> None:
        """`only_due_at_once=True` (the compactor below its trigger, SPEC §15.8): enough new
        turns are not enough; coverage that would shrink (a rebase) is."""
        if not takes_keyword(store.begin_compaction, "only_due_at_once"):
            pytest.skip("a store of v1.1's protocol: begin_compaction takes no only_due_at_once")
        fill(store, n=12)
        summarise(store, keep_tail=8)  # covers the first 4
        waiting = store.begin_compaction("c", 4, PV, only_due_at_once=True)
        assert (waiting.status, waiting.plan) == ("not-due", None)
        assert store.begin_compaction("c", 4, PV, min_new_turns=4).status == "ready"
        rebase = store.begin_compaction("c", 10, PV, only_due_at_once=True)  # keep_tail grew
        assert rebase.status == "ready" and rebase.plan is not None and rebase.parent is None
        assert [t.id for t in rebase.new_turns] == list(rebase.plan.compacted_ids)

    def test_commit_makes_a_current_version_with_its_index(self, store: Any) -> None:
        turns = fill(store, n=8)
        envelope = summarise(store, keep_tail=3)
        assert envelope.source_ids == tuple(t.id for t in turns[:5])
        assert store.current_summary("c") == envelope
        assert [t.id for t in store.sources_of(envelope.id)] == list(envelope.source_ids)
        assert store.summaries_citing("c", turns[0].id) == [envelope.id]
        assert store.summaries_citing("c", turns[7].id) == []
        assert store.summaries_citing("other", turns[0].id) == []
        [record] = store.summary_history("c")
        assert (record.status, record.reason, record.envelope, record.plan_id) == (
            "current",
            None,
            envelope,
            envelope.plan_id,
        )
        assert record.created_at.endswith("+00:00")
        assert store.load("c").turns == tuple(turns)  # compaction deletes no turn

    def test_a_newer_version_supersedes_the_current_one(self, store: Any) -> None:
        fill(store, n=8)
        first = summarise(store, keep_tail=5)
        fill(store, n=4)
        second = summarise(store, keep_tail=3)
        assert store.current_summary("c") == second
        assert [(r.envelope, r.status) for r in store.summary_history("c")] == [
            (first, "superseded"),
            (second, "current"),
        ]

    def test_start_plan_supersedes_older_plans_and_late_results_are_rejected(
        self, store: Any
    ) -> None:
        fill(store, n=8)
        old_plan = store.start_plan("c", 3, PV, plan_id="p-old")
        new_plan = store.start_plan("c", 3, PV)
        assert (
            new_plan.plan_id.startswith("plan-")
            and new_plan.compacted_ids == old_plan.compacted_ids
        )
        late = lf.create_summary_envelope(old_plan, store.load("c"), "s-late", PV, "late")
        write = store.commit_summary(late)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "stale-source",
            "superseded-plan",
        )
        assert store.current_summary("c") is None
        # The old plan ended without a record when the new one was registered: `abandoned`.
        abandoned, record = store.summary_history("c")
        assert (abandoned.status, abandoned.reason, abandoned.plan_id) == (
            "failed",
            "abandoned",
            old_plan.plan_id,
        )
        assert (record.status, record.reason, record.envelope) == (
            "rejected",
            "superseded-plan",
            late,
        )
        assert store.summaries_citing("c", old_plan.compacted_ids[0]) == []  # rejected: no index
        fresh = lf.create_summary_envelope(new_plan, store.load("c"), "s-new", PV, "new")
        assert fresh is not None
        assert store.commit_summary(fresh).accepted
        # A plan yields at most one accepted version: the active plan is cleared on accept.
        again = replace(fresh, id="s-again")
        assert store.commit_summary(again).detail == "superseded-plan"
        with pytest.raises(lf.InvalidInput) as info:
            store.start_plan("c", 3, PV, plan_id="p-old")
        assert info.value.field == "plan_id"

    def test_start_plan_on_an_unknown_conversation_is_empty(self, store: Any) -> None:
        plan = store.start_plan("nobody", 2, PV)
        assert plan.is_empty and plan.source_revision == 0

    def test_commit_of_a_source_edited_during_generation_is_rejected_stale(
        self, store: Any
    ) -> None:
        turns = fill(store, n=6)
        plan = store.start_plan("c", 2, PV)
        envelope = lf.create_summary_envelope(plan, store.load("c"), "s1", PV, "text")
        store.edit("c", turns[1].id, body="changed")
        write = store.commit_summary(envelope)
        assert (write.reason, write.detail) == ("stale-source", "source-modified")
        assert store.summary_history("c")[-1].status == "rejected"
        assert store.current_summary("c") is None

    def test_commit_checks_the_plans_policy_version(self, store: Any) -> None:
        fill(store, n=6)
        plan = store.start_plan("c", 2, PV)
        envelope = lf.create_summary_envelope(plan, store.load("c"), "s1", "other-policy", "text")
        assert store.commit_summary(envelope).detail == "policy-mismatch"

    def test_commit_none_is_invalid_and_records_nothing(self, store: Any) -> None:
        fill(store, n=4)
        store.start_plan("c", 2, PV)
        assert store.commit_summary(None) == lf.SummaryWrite(False, None, "invalid-summary", None)
        assert store.summary_history("c") == []

    def test_summary_ids_are_never_reused(self, store: Any) -> None:
        fill(store, n=6)
        envelope = summarise(store, keep_tail=2, summary_id="s1")
        plan = store.start_plan("c", 2, PV)
        again = lf.create_summary_envelope(plan, store.load("c"), "s1", PV, "again")
        with pytest.raises(lf.InvalidInput) as info:
            store.commit_summary(again)
        assert "s1" in str(info.value)
        assert store.current_summary("c") == envelope

    def test_record_failure_appears_in_history_without_envelope(self, store: Any) -> None:
        fill(store, n=4)
        plan = store.start_plan("c", 2, PV)
        store.record_failure(plan.plan_id, "summarizer-timeout")
        [record] = store.summary_history("c")
        assert (record.envelope, record.status, record.reason, record.plan_id) == (
            None,
            "failed",
            "summarizer-timeout",
            plan.plan_id,
        )

    def test_edit_marks_citing_summaries_stale_at_once(self, store: Any) -> None:
        turns = fill(store, n=8)
        first = summarise(store, keep_tail=5)
        second = summarise(store, keep_tail=3)
        store.edit("c", turns[7].id, body="tail edit")  # not a source: nothing goes stale
        assert store.current_summary("c") == second
        store.edit("c", turns[0].id, body=turns[0].body)  # same value: digest unchanged
        assert store.current_summary("c") == second
        store.edit("c", turns[0].id, body="changed")
        assert store.current_summary("c") is None
        statuses = [(r.envelope.id, r.status, r.reason) for r in store.summary_history("c")]
        assert statuses == [
            (first.id, "stale", "source-modified"),
            (second.id, "stale", "source-modified"),
        ]
        context = store.context("c", PV)
        assert context.fallback == "stale-summary:source-modified" and context.summary is None

    def test_retract_marks_citing_summaries_stale_source_missing(self, store: Any) -> None:
        turns = fill(store, n=6)
        envelope = summarise(store, keep_tail=2)
        store.edit("c", turns[0].id, body="changed")
        store.retract("c", turns[1].id)  # missing outranks modified, as in check_summary
        [record] = store.summary_history("c")
        assert (record.status, record.reason) == ("stale", "source-missing")
        assert [t.id for t in store.sources_of(envelope.id)] == [
            t.id for t in turns[0:1] + turns[2:4]
        ]
        assert store.context("c", PV).fallback == "stale-summary:source-missing"

    def test_context_matches_assemble_context_in_every_state(self, store: Any) -> None:
        turns = fill(store, n=6)
        store.append("c", "user", "keep me", protected=True, protection_reason="active-constraint")
        fill(store, n=4)

        def expect(pv: str) -> lf.AssembledContext:
            history = store.summary_history("c")
            pointed = next(
                (r.envelope for r in reversed(history) if r.status in ("current", "stale")), None
            )
            return lf.assemble_context(store.load("c"), pointed, pv)

        def same(pv: str) -> lf.AssembledContext:
            got: lf.AssembledContext = store.context("c", pv)
            want = expect(pv)
            assert (got.items, got.fallback, got.fallback_id) == (
                want.items,
                want.fallback,
                want.fallback_id,
            )
            return got

        assert same(PV).fallback == "no-summary"
        envelope = summarise(store, keep_tail=3)
        used = same(PV)
        assert used.fallback is None and used.summary is not None
        assert used.summary.through_sequence == 8 and used.ids[1] == envelope.id
        assert same("policy-2").fallback == "stale-summary:policy-mismatch"
        store.append("c", "user", "appended later")
        assert same(PV).fallback is None
        store.append("c", "user", "clash", id=envelope.id)
        clash = same(PV)
        assert (clash.fallback, clash.fallback_id) == ("duplicate-id", envelope.id)
        store.retract("c", envelope.id)
        assert same(PV).fallback is None
        store.edit("c", turns[2].id, body="edited")
        assert same(PV).fallback == "stale-summary:source-modified"

    def test_a_stale_version_stays_stale_when_its_source_is_edited_back(self, store: Any) -> None:
        turns = fill(store, n=6)
        summarise(store, keep_tail=2)
        store.edit("c", turns[0].id, body="changed")
        store.edit("c", turns[0].id, body=turns[0].body)
        context = store.context("c", PV)
        assert context.fallback == "stale-summary:source-modified"
        assert context.items == lf.assemble_context(store.load("c"), None, PV).items

    def test_context_places_kept_turns_before_the_summary(self, store: Any) -> None:
        a = store.append("c", "user", "a")
        keep = store.append(
            "c", "user", "rule", protected=True, protection_reason="active-constraint"
        )
        b = store.append("c", "assistant", "b")
        fill(store, n=3)
        envelope = summarise(store, keep_tail=3)
        assert envelope.source_ids == (a.id, b.id)
        context = store.context("c", PV)
        assert context.ids[:2] == (keep.id, envelope.id) and len(context) == 5

    def test_purge_records_the_boundary_and_keeps_protected_turns(self, store: Any) -> None:
        turns = fill(store, n=6)
        guard = store.append(
            "c", "user", "pending", protected=True, protection_reason="pending-confirmation"
        )
        fill(store, n=3)
        envelope = summarise(store, keep_tail=2)
        assert store.history_boundary("c") is None
        boundary = store.purge_through("c", 7, "retention-30d")
        assert isinstance(boundary, lf.HistoryBoundary)
        assert (boundary.through_sequence, boundary.reason) == (7, "retention-30d")
        assert store.history_boundary("c") == boundary
        loaded = store.load("c")
        assert loaded.turns[0] == guard and len(loaded) == 4 and loaded.revision == 4
        # The current summary is sealed (SPEC §15.5): still current, still in the context.
        assert store.summary_history("c")[0].status == "current"
        context = store.context("c", PV)
        assert context.history_boundary == boundary and guard.id in context.ids
        assert context.summary is not None and context.summary.id == envelope.id
        assert store.sources_of(envelope.id) == [loaded.turns[1]]
        forced = store.purge_through("c", 7, "legal-hold-lifted", force=True)
        assert guard.id not in store.load("c").turn_ids and store.history_boundary("c") == forced
        assert turns[0].id not in store.load("c").turn_ids

    def test_one_store_can_be_shared_by_threads(self, store: Any) -> None:
        def worker(n: int) -> None:
            for i in range(25):
                store.append("c", "user", f"{n}-{i}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        loaded = store.load("c")
        assert [t.sequence for t in loaded.turns] == list(range(1, 101)) and loaded.revision == 100
