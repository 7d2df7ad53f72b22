"""The `Store` contract's rules of the agent loop (SPEC §15.4, §15.8, §17.1, §17.2, §17.5):
what a commit refuses, what makes a summary stale besides an edit, what a retraction takes
with it, what pruning keeps, and that the `Compactor` running on the store never extends a
text built on an edited turn's old content. `StoreContract` inherits these tests; like the
rest of the suite they use only the `Store` protocol's methods."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import ledgerfold as lf

__all__ = ["RuleContract"]

PV = "policy-1"
CID = "c"


def _calls(*ids: str) -> dict[str, str]:
    return {"tool_calls": json.dumps([{"id": i, "type": "function"} for i in ids])}


def _ledger(store: Any) -> None:
    """t0 the system prompt; t1..t12, t5 a pending confirmation (protected)."""
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
            for i in range(1, 13)
        ],
    )


def _forged(
    store: Any, plan: lf.CompactionPlan, ids: tuple[str, ...], parent: str | None = None
) -> lf.SummaryEnvelope:
    """An envelope over `ids` as the ledger holds them now, whatever the plan allows."""
    ledger = store.load(plan.conversation_id)
    return lf.SummaryEnvelope(
        id=f"forged-{plan.plan_id}-{len(ids)}-{parent}",
        plan_id=plan.plan_id,
        conversation_id=plan.conversation_id,
        source_revision=ledger.revision,
        source_ids=ids,
        source_fingerprint=lf.fingerprint_turns([ledger.get(i) for i in ids]),
        policy_version=PV,
        text="forged",
        parent_id=parent,
    )


def _verdict(write: lf.SummaryWrite) -> tuple[bool, str | None, str | None]:
    return write.accepted, write.reason, write.detail


class _Deriving:
    """A summarizer whose texts are unique and that records the digest of every turn each
    text was derived from (its request's turns plus all its previous text's): it notes any
    previous text derived from content the ledger no longer holds (SPEC §15.1, §17.5)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.derived: dict[str, dict[str, bytes]] = {}
        self.violations: list[str] = []

    def __call__(self, request: lf.SummaryRequest) -> str:
        ledger = self.store.load(request.conversation_id)
        derived: dict[str, bytes] = {}
        if request.previous_summary is not None:
            derived.update(self.derived[request.previous_summary])
            for turn_id, digest in derived.items():
                turn = ledger.get(turn_id)
                if turn is None or turn.digest != digest:  # edited or retracted since
                    self.violations.append(turn_id)
        derived.update((item.id, ledger.get(item.id).digest) for item in request.turns)
        text = f"S{len(self.derived)} " + " ".join(f"[seq {i.sequence}]" for i in request.turns)
        self.derived[text] = derived
        return text


class RuleContract:
    """The loop's rules every backend keeps (mixed into `StoreContract`)."""

    def test_commit_refuses_a_protected_or_preserved_role_source(self, store: Any) -> None:
        """SPEC §17.1: whatever the plan, a protected turn or one of the plan's
        `preserve_roles` is never a source (`invalid-summary`/`protected-source`)."""
        _ledger(store)
        plan = store.start_plan(CID, 4, PV, preserve_roles=("system",))
        assert "t5" not in plan.compacted_ids and "t0" not in plan.compacted_ids
        for ids in [("t1", "t2", "t3", "t4", "t5"), ("t0", "t1", "t2")]:
            write = store.commit_summary(_forged(store, plan, ids))
            assert _verdict(write) == (False, "invalid-summary", "protected-source"), ids
        assert store.current_summary(CID) is None
        assert [r.status for r in store.summary_history(CID)] == ["rejected", "rejected"]

    def test_commit_holds_the_sources_to_the_plan(self, store: Any) -> None:
        """SPEC §15.4: a source the plan does not compact (here, the raw tail) is refused."""
        _ledger(store)
        plan = store.start_plan(CID, 4, PV)
        write = store.commit_summary(_forged(store, plan, ("t1", "t2", "t3", "t12")))
        assert _verdict(write) == (False, "invalid-summary", "plan-mismatch")
        assert store.current_summary(CID) is None

    def test_commit_checks_the_parent(self, store: Any) -> None:
        """SPEC §15.1, §15.4: an extension names the current summary as its parent and
        keeps all of its sources; once that summary went stale, nothing extends it."""
        _ledger(store)
        first = store.start_plan(CID, 8, PV, preserve_roles=("system",))
        s0 = lf.create_summary_envelope(first, store.load(CID), "s0", PV, "first")
        assert s0 is not None and store.commit_summary(s0).accepted
        assert s0.source_ids == ("t1", "t2", "t3", "t4")
        extended = ("t1", "t2", "t3", "t4", "t6", "t7")
        cases: list[tuple[tuple[str, ...], str | None]] = [
            (extended, "never-written"),  # the parent is not the current summary
            (("t3", "t4", "t6", "t7"), "s0"),  # drops the parent's sources
            (("t1", "t2", "t3", "t4"), "s0"),  # adds nothing
        ]
        for ids, parent in cases:
            plan = store.start_plan(CID, 4, PV)
            write = store.commit_summary(_forged(store, plan, ids, parent))
            assert _verdict(write) == (False, "invalid-summary", "plan-mismatch"), (ids, parent)
        assert store.current_summary(CID) == s0
        store.edit(CID, "t2", body="corrected")
        assert store.current_summary(CID) is None
        plan = store.start_plan(CID, 4, PV)
        # Its text was built on the stale summary's: on t2's old content.
        write = store.commit_summary(_forged(store, plan, extended, "s0"))
        assert not write.accepted and write.reason in ("invalid-summary", "stale-source")
        assert store.current_summary(CID) is None
        fresh = _forged(store, plan, ("t1", "t2", "t3"))  # a rebase is allowed
        assert store.commit_summary(fresh).accepted

    @pytest.mark.parametrize("joins", ["by-group", "by-call"])
    def test_a_late_result_of_a_covered_call_makes_the_summary_stale(
        self, store: Any, joins: str
    ) -> None:
        """SPEC §15.4, §17.2: a turn that joins a summarised unit — by `group`, or a tool
        turn answering a summarised call — splits it: the summary is stale at once."""
        group = "g" if joins == "by-group" else None
        store.append_many(
            CID,
            [
                {"id": "u1", "role": "user", "body": "q"},
                {"id": "a1", "role": "assistant", "body": "", "meta": _calls("k1"), "group": group},
                {
                    "id": "r1",
                    "role": "tool",
                    "body": "r",
                    "meta": {"tool_call_id": "k1"},
                    "group": group,
                },
            ]
            + [{"role": "user", "body": f"later {i}"} for i in range(4)],
        )
        plan = store.start_plan(CID, 3, PV)
        assert plan.compacted_ids[:3] == ("u1", "a1", "r1")
        envelope = lf.create_summary_envelope(plan, store.load(CID), "s1", PV, "text")
        assert envelope is not None and store.commit_summary(envelope).accepted
        if joins == "by-group":
            store.append(CID, "tool", "late", group="g", meta={"tool_call_id": "k9"})
        else:
            store.append(CID, "tool", "late", meta={"tool_call_id": "k1"})
        assert store.current_summary(CID) is None
        [record] = store.summary_history(CID)
        assert (record.status, record.reason) == ("stale", "group-split")
        assert store.context(CID, PV).fallback == "stale-summary:group-split"

    def test_retracting_a_calling_turn_retracts_its_results(self, store: Any) -> None:
        """SPEC §17.2: the tool turns answering a retracted turn's calls go with it, in the
        same revision."""
        store.append_many(
            CID,
            [
                {"id": "u1", "role": "user", "body": "q"},
                {"id": "a1", "role": "assistant", "body": "", "meta": _calls("k1", "k2")},
                {"id": "r1", "role": "tool", "body": "r", "meta": {"tool_call_id": "k1"}},
                {"id": "r2", "role": "tool", "body": "r", "meta": {"tool_call_id": "k2"}},
                {"id": "u2", "role": "user", "body": "after"},
            ],
        )
        store.retract(CID, "a1")
        loaded = store.load(CID)
        assert loaded.turn_ids == ("u1", "u2") and loaded.revision == 2

    def test_retracting_a_call_takes_only_the_results_it_is_paired_with(self, store: Any) -> None:
        """SPEC §17.2: a result answers the nearest call of its ID before it, so with a call
        ID made again (`call_0` in every response) a retraction takes the retracted turn's
        own results, not every result of the ID."""
        store.append_many(
            CID,
            [
                {"id": "a1", "role": "assistant", "body": "", "meta": _calls("k")},
                {"id": "r1", "role": "tool", "body": "r", "meta": {"tool_call_id": "k"}},
                {"id": "a2", "role": "assistant", "body": "", "meta": _calls("k")},
                {"id": "r2", "role": "tool", "body": "r", "meta": {"tool_call_id": "k"}},
                {"id": "u1", "role": "user", "body": "after"},
            ],
        )
        store.retract(CID, "a2")
        assert store.load(CID).turn_ids == ("a1", "r1", "u1")
        store.retract(CID, "a1")
        assert store.load(CID).turn_ids == ("u1",)

    @pytest.mark.parametrize("call", ["append", "append_many", "edit"])
    def test_writes_refuse_tool_calls_that_are_not_calls(self, store: Any, call: str) -> None:
        """SPEC §15.8: `tool_calls` meta is a JSON array of objects each with a string `id`
        (no NaN/Infinity)."""
        store.append(CID, "assistant", "b", id="a0")
        writes: dict[str, Callable[[dict[str, str]], object]] = {
            "append": lambda meta: store.append(CID, "assistant", "b", meta=meta),
            "append_many": lambda meta: store.append_many(
                CID, [{"role": "assistant", "body": "b", "meta": meta}]
            ),
            "edit": lambda meta: store.edit(CID, "a0", meta=meta),
        }
        prefix = "turns[0].meta.tool_calls" if call == "append_many" else "meta.tool_calls"
        for text in ["not json", '{"id": "k"}', '[{"name": "f"}]', '[{"id": 7}]', "[NaN]"]:
            with pytest.raises(lf.InvalidInput) as info:
                writes[call]({"tool_calls": text})
            assert (info.value.field or "").startswith(prefix), (text, info.value.field)
        assert store.load(CID).revision == 1

    def test_pruning_keeps_the_current_version_and_the_failures_the_back_off_counts(
        self, store: Any
    ) -> None:
        """SPEC §15.8, §17.5: `prune_versions` deletes older non-current records and says
        how many; the current one and the `failed` records since it stay, so the back-off
        (`consecutive_failures`) is not reset."""
        for round_ in range(4):
            store.append_many(CID, [{"role": "user", "body": f"r{round_} {i}"} for i in range(3)])
            plan = store.start_plan(CID, 2, PV)
            envelope = lf.create_summary_envelope(plan, store.load(CID), f"s{round_}", PV, "x")
            assert envelope is not None and store.commit_summary(envelope).accepted
        for reason in ("summarizer-timeout", "summarizer-error"):
            store.record_failure(store.start_plan(CID, 2, PV).plan_id, reason)
        assert store.consecutive_failures(CID) == 2
        before = store.summary_history(CID)
        deleted = store.prune_versions(CID, keep=0)
        after = store.summary_history(CID)
        assert deleted == len(before) - len(after) and deleted >= 1
        assert [r.status for r in after].count("current") == 1
        assert store.current_summary(CID) is not None and store.current_summary(CID).id == "s3"
        assert [r.reason for r in after if r.status == "failed"] == [
            "summarizer-timeout",
            "summarizer-error",
        ]
        assert store.consecutive_failures(CID) == 2
        assert store.prune_versions(CID, keep=0) == 0  # nothing more to delete

    @pytest.mark.parametrize("change", ["edit", "retract"])
    def test_the_compactor_never_extends_a_text_of_changed_turns(
        self, store: Any, change: str
    ) -> None:
        """SPEC §15.1, §17.5: driven by a `Compactor`, after an edit or a retraction of a
        covered turn the next summary is rebuilt (from a checkpoint the change left
        unchanged, or a rebase): the summarizer never gets a previous text derived from
        the turn's old content, and the context uses the new summary."""
        summarizer = _Deriving(store)
        policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=2)
        compactor = lf.Compactor(store, policy, summarizer)
        for round_ in range(8):
            store.append_many(
                CID,
                [
                    {"id": f"t{round_}-{i}", "role": "user", "body": f"round {round_} turn {i}"}
                    for i in range(3)
                ],
            )
            assert compactor.compact(CID).status in ("accepted", "skipped")
        current = store.current_summary(CID)
        assert current is not None and current.parent_id is not None
        for victim in (current.source_ids[-4], current.source_ids[1]):
            if change == "edit":
                store.edit(CID, victim, body="corrected")
            else:
                store.retract(CID, victim)
            outcome = compactor.compact(CID)
            assert outcome.status == "accepted" and outcome.summary is not None
            assert summarizer.violations == []
            context = store.context(CID, PV)
            assert context.fallback is None and context.summary is not None
            assert context.summary.id == outcome.summary.id
            ledger = store.load(CID)
            for turn_id, digest in summarizer.derived[outcome.summary.text].items():
                assert ledger.get(turn_id) is not None and ledger.get(turn_id).digest == digest
