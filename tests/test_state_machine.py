"""Stateful property test: random operation sequences against a real `SQLiteStore` file and
a `Compactor`, checked after every step against a plain in-test model of the ledger
(ledger_model.py) and against every invariant of SPEC §1. The machine's bookkeeping and
invariant checks are in ledger_machine.py, its ledger-writing rules in ledger_write_rules.py;
this file adds the compaction rules and runs the whole machine.

Rules: appends (protected with reasons, tool call + results groups, hostile IDs), edits of
any field but `id`/`sequence`, protect/unprotect, retractions, compactions with summarizers
that succeed, raise, return blank text or time out, two plans finishing out of order (at
the store level and through `acompact`), policy upgrades, purges with and without `force`,
rejected bad input, and closing and reopening the store on the same file.

What holds, exactly (checked by `check_everything` after every step):

- `store.load(c)` equals the model: IDs, sequences, roles, bodies, flags, group, meta and the
  revision. Purged turns leave the ledger view (their bodies are deleted, SPEC §9); an empty
  `meta` reads back as None.
- `summary_history(c)` equals the model's record list (status and reason of every attempt),
  so at most one version is `current`, and `current_summary(c)` is that version.
- `store.context(c, v)` has no ID twice, no turn both raw and a source, every protected live
  turn raw, every live turn newer than the summary's `through_sequence` raw, every other live
  turn missing from it a source of the used summary; a used summary passes `check_summary`
  against `load(c)` under `v`; and the whole context equals the slow reference
  (`reference.assemble_context`) over the model. The newest `keep_tail` turns are raw right
  after a compaction commits (checked in the rule: later retractions of tail turns may
  legitimately leave a current summary's sources as the newest live turns).
- Groups (§6): checked on the ledger at commit time, since a later edit may move a turn into
  or out of a group without touching the summary's sources.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

import ledgerfold as lf
from ledgerfold.tokens import approx_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from ledger_model import (  # noqa: E402
    CONVERSATIONS,
    POLICIES,
    SECRET,
    SUMMARIZERS,
    ModelRecord,
    bodies,
    conversations,
    open_store,
)
from ledger_write_rules import LedgerWriteRules  # noqa: E402


class LedgerMachine(LedgerWriteRules):
    # ------------------------------------------------------------------ compaction

    @rule(
        conversation=conversations,
        kind=st.sampled_from(sorted(SUMMARIZERS)),
        force=st.booleans(),
        max_input_tokens=st.sampled_from([10**9, 10**9, 40, 12]),
    )
    def compact(self, conversation: str, kind: str, force: bool, max_input_tokens: int) -> None:
        """One compaction; with a small `max_input_tokens` a backlog folds in chunks."""
        model = self.model[conversation]
        summarizer, timeout, failure = SUMMARIZERS[kind]
        compacted, base, new, skipped = self.expected_work(conversation, force)
        before = self.snapshot(conversation)
        policy = self.policy(max_input_tokens=max_input_tokens)
        outcome = lf.Compactor(self.store, policy, summarizer, timeout=timeout).compact(
            conversation, force=force
        )
        event(f"compact: {outcome.status} {outcome.reason} {'rolling' if base else 'rebase'}")
        checkpoint = self.rebuilt_from(conversation, base, outcome)
        if checkpoint is not None:  # SPEC §17.5: a stale summary rebuilt from a checkpoint
            base, skipped = checkpoint, None
            covered_set = set(checkpoint.envelope.source_ids)  # type: ignore[union-attr]
            new = tuple(turn_id for turn_id in compacted if turn_id not in covered_set)
        if skipped is not None:
            assert outcome == lf.CompactionOutcome("skipped", None, skipped)
            assert self.snapshot(conversation) == before
            return
        plan_id = self.store.summary_history(conversation)[-1].plan_id
        model.register_plan(plan_id)
        if failure is not None:
            # SPEC §1.8: the ledger and the previous current summary exactly as they were.
            assert outcome == lf.CompactionOutcome("failed", None, failure)
            assert self.snapshot(conversation) == before
            model.history.append(ModelRecord(None, "failed", failure))
            model.plan_recorded(plan_id, accepted=False)
            return
        assert outcome.status == "accepted", outcome
        envelope = outcome.summary
        assert envelope is not None
        by_id = {turn.id: turn for turn in model.turns}
        chunk = self.expected_chunk(conversation, new, max_input_tokens)
        if base is not None and base.envelope is not None:
            # Rolling (§15.1): every turn the parent covered, then the new ones.
            assert envelope.parent_id == base.summary_id
            assert envelope.source_ids == model.extended_sources(base, chunk)
            derived = dict(base.derived_from) | {i: by_id[i] for i in chunk}
        else:
            assert envelope.parent_id is None
            assert envelope.source_ids == chunk
            derived = {i: by_id[i] for i in chunk}
        sealed = {turn.id for turn in model.sealed_turns(base)}
        assert set(envelope.source_ids) <= set(compacted) | sealed
        assert envelope.policy_version == self.version
        assert self.store.load(conversation) == before[0]  # §1.1: the ledger is not rewritten
        model.accept(envelope, derived)
        self.check_just_committed(conversation, envelope)

    def rebuilt_from(
        self, conversation: str, base: ModelRecord | None, outcome: lf.CompactionOutcome
    ) -> ModelRecord | None:
        """SPEC §17.5: where the model expects a rebase of a stale summary, the store may
        extend a checkpoint instead: an older accepted version whose every source (and so
        everything its text was derived from) is unchanged; so may it when an erasure took
        the pointed version with the turn. Returns it, checked so."""
        model = self.model[conversation]
        summary = outcome.summary
        pointed = model.pointed
        if (
            base is not None
            or summary is None
            or summary.parent_id is None
            or (pointed is not None and pointed.status != "stale")
        ):
            return None
        # The stale head itself is the first candidate when it is sealed (h48, §17.5: a
        # sealed summary is never replaced by a rebase while an extension can cover the work).
        found = [
            record
            for record in model.history
            if record.summary_id == summary.parent_id
            and (
                record.status == "superseded"
                or (record is pointed and record.status == "stale" and model.sealed_turns(record))
            )
        ]
        assert len(found) == 1, summary.parent_id
        checkpoint = found[0]
        assert checkpoint.envelope is not None
        assert checkpoint.envelope.policy_version == self.version
        live = {turn.id: turn for turn in model.turns}
        for turn_id, seen in checkpoint.derived_from.items():
            assert live.get(turn_id, model.purged_turns.get(turn_id)) == seen, turn_id
        event("compact: rebuilt from a checkpoint")
        return checkpoint

    def policy(self, max_input_tokens: int = 10**9) -> lf.CompactionPolicy:
        """No automatic pruning (the `prune` rule prunes, so the model knows when); no
        preserved roles, as the reference plans."""
        return lf.CompactionPolicy(
            self.version,
            keep_tail=self.keep_tail,
            min_new_turns=1,
            max_input_tokens=max_input_tokens,
            keep_versions=None,
            preserve_roles=(),
        )

    def expected_chunk(
        self, conversation: str, new: tuple[str, ...], budget: int
    ) -> tuple[str, ...]:
        """SPEC §15.8, written independently of `ledgerfold._fold`: the longest prefix of the
        new turns that ends between groups and whose texts fit the budget; if none, the first
        turn with the rest of its group (cut to fit)."""
        if not new:  # a re-layout (SPEC §17.3): the summarizer gets no turn
            return ()
        by_id = {turn.id: turn for turn in self.model[conversation].turns}
        turns = [by_id[i] for i in new]
        unit = ref.unit_of([t.ref() for t in turns])  # the new turns' units (SPEC §17.2)

        def closed(k: int) -> bool:  # no unit has members on both sides of the cut
            before = {unit[t.id] for t in turns[:k]}
            return not any(unit[t.id] in before for t in turns[k:])

        best = 0
        for k in range(1, len(turns) + 1):
            if closed(k) and sum(approx_tokens(t.body) for t in turns[:k]) <= budget:
                best = k
        if best == 0:
            best = next(k for k in range(1, len(turns) + 1) if closed(k))
        return tuple(t.id for t in turns[:best])

    @rule(
        conversation=conversations,
        bodies_=st.lists(bodies, min_size=1, max_size=6),
        max_input_tokens=st.sampled_from([10**9, 40]),
    )
    def converse(self, conversation: str, bodies_: list[str], max_input_tokens: int) -> None:
        """The agent loop: a few plain turns, then a compaction (rolling when it can)."""
        written = [
            self.store.append(
                conversation, "user" if n % 2 == 0 else "assistant", body, id=self.fresh("t")
            )
            for n, body in enumerate(bodies_)
        ]
        for turn in written:
            self.record_append(conversation, [turn])
        self.compact(conversation, "extractive", False, max_input_tokens)

    @rule(conversation=conversations, keep=st.integers(0, 3), checkpoints=st.integers(0, 2))
    def prune(self, conversation: str, keep: int, checkpoints: int) -> None:
        """Version pruning (SPEC §15.8): the pointed version and the newest `keep` others
        stay, and the checkpoints (SPEC §17.5: superseded or stale versions only, never a
        failed or rejected record); the rest go with their text and index rows; the current
        context is unchanged."""
        model = self.model[conversation]
        before = self.store.context(conversation, self.version)
        counted = self.store.pruned_count(conversation)
        deleted = self.store.prune_versions(conversation, keep=keep, keep_checkpoints=checkpoints)
        left = {r.envelope.id for r in self.store.summary_history(conversation) if r.envelope}
        spared = frozenset(
            r.summary_id
            for r in model.history
            if r.summary_id in left and r.status in ("superseded", "stale")
        )
        assert deleted == model.prune(keep, spared)
        assert {r.summary_id for r in model.history if r.summary_id} == left
        model.erased += deleted  # the store counts pruned and purge-erased versions together
        assert self.store.pruned_count(conversation) == counted + deleted
        assert self.store.context(conversation, self.version) == before
        event(f"prune: {deleted} deleted")

    @rule(conversation=conversations)
    def plans_commit_out_of_order(self, conversation: str) -> None:
        """Plan A, then plan B; B's result commits first, A's arrives late: A is refused as
        `superseded-plan` and never replaces B (SPEC §1.7)."""
        model = self.model[conversation]
        if model.sealed_turns(model.current) or model.sealed_turns(model.pointed):
            # (A stale sealed summary is rebuilt from its sealed base, SPEC §17.5.)
            # A plan extending a sealed summary covers its purged sources, which
            # `create_summary_envelope` cannot fingerprint from the ledger; the Compactor
            # extends it from the stored digests (the `compact` rules cover that).
            return
        compacted = self.expected_compacted(conversation, self.keep_tail)
        plan_a = self.store.start_plan(conversation, self.keep_tail, self.version)
        plan_b = self.store.start_plan(conversation, self.keep_tail, self.version)
        if model.exists:  # a conversation never written to gets empty plans, unregistered
            model.register_plan(plan_a.plan_id)
            model.register_plan(plan_b.plan_id)  # plan A ended without any record: abandoned
        assert plan_a.compacted_ids == plan_b.compacted_ids
        if len(plan_b.compacted_ids) != len(compacted):
            # A rebuild from a sealed checkpoint (SPEC §17.5): the plan also covers the
            # checkpoint's purged sources, which `create_summary_envelope` cannot fingerprint
            # from the ledger (the Compactor extends it from the stored digests, which the
            # `compact` rules cover). The live IDs are still the pure rule's.
            sealed = [i for i in plan_b.compacted_ids if i in model.purged]
            assert sealed and plan_b.compacted_ids[len(sealed) :] == compacted
            event("out of order: a rebuild from a sealed checkpoint")
            return
        assert plan_b.compacted_ids == compacted
        ledger = self.store.load(conversation)
        envelope_b = lf.create_summary_envelope(
            plan_b, ledger, self.fresh("s-b"), self.version, f"{SECRET} summary B"
        )
        envelope_a = lf.create_summary_envelope(
            plan_a, ledger, self.fresh("s-a"), self.version, f"{SECRET} summary A"
        )
        event(f"out of order: {'empty plan' if not compacted else 'committed'}")
        if not compacted:
            assert envelope_a is None and envelope_b is None
            before = self.snapshot(conversation)
            write = self.store.commit_summary(None)
            assert (write.accepted, write.reason) == (False, "invalid-summary")
            assert self.snapshot(conversation) == before
            return
        assert envelope_a is not None and envelope_b is not None
        accepted = self.store.commit_summary(envelope_b)
        assert accepted.accepted, accepted
        model.accept(envelope_b)
        late = self.store.commit_summary(envelope_a)
        assert (late.accepted, late.reason, late.detail) == (
            False,
            "stale-source",
            "superseded-plan",
        )
        model.history.append(ModelRecord(envelope_a.id, "rejected", "superseded-plan", envelope_a))
        assert self.store.current_summary(conversation) == envelope_b
        self.check_just_committed(conversation, envelope_b)

    @rule(conversation=conversations)
    def acompact_race(self, conversation: str) -> None:
        """Two `acompact` calls; the newer plan's summarizer finishes first, the older one's
        result arrives late and is refused."""
        model = self.model[conversation]
        _, base, new, skipped = self.expected_work(conversation, force=True)
        compacted = skipped is None
        policy = self.policy()

        async def race() -> tuple[lf.CompactionOutcome, lf.CompactionOutcome]:
            started = {"older": asyncio.Event(), "newer": asyncio.Event()}
            release = {"older": asyncio.Event(), "newer": asyncio.Event()}

            def summarizer(name: str) -> Any:
                async def summarize(request: lf.SummaryRequest) -> str:
                    started[name].set()
                    await release[name].wait()
                    return f"{SECRET} summary by the {name} plan"

                return summarize

            older = lf.Compactor(self.store, policy, summarizer("older"))
            newer = lf.Compactor(self.store, policy, summarizer("newer"))
            older_task = asyncio.create_task(older.acompact(conversation, force=True))
            newer_task = asyncio.create_task(newer.acompact(conversation, force=True))
            if not compacted:
                return await older_task, await newer_task
            await started["older"].wait()
            await started["newer"].wait()
            release["newer"].set()
            newer_outcome = await newer_task
            release["older"].set()
            return await older_task, newer_outcome

        before = self.snapshot(conversation)
        late, newer = asyncio.run(race())
        event(f"acompact race: {newer.status}")
        if not compacted:
            nothing = lf.CompactionOutcome("skipped", None, "nothing-to-compact")
            assert (late, newer) == (nothing, nothing)
            assert self.snapshot(conversation) == before
            return
        assert newer.status == "accepted" and newer.summary is not None
        assert late == lf.CompactionOutcome("stale", None, "superseded-plan")
        if base is not None and base.envelope is not None:
            assert newer.summary.parent_id == base.summary_id
            assert newer.summary.source_ids == model.extended_sources(base, new)
        rejected = self.store.summary_history(conversation)[-1]
        assert rejected.status == "rejected" and rejected.envelope is not None
        # Both plans registered before either finished: the older one was abandoned when
        # the newer was registered, and its late result is refused as superseded.
        model.register_plan(rejected.plan_id)
        model.register_plan(newer.summary.plan_id)
        model.accept(newer.summary)
        model.history.append(
            ModelRecord(rejected.envelope.id, "rejected", "superseded-plan", rejected.envelope)
        )
        assert self.store.current_summary(conversation) == newer.summary
        self.check_just_committed(conversation, newer.summary)

    @rule(version=st.sampled_from(POLICIES), keep_tail=st.integers(1, 4))
    def change_policy(self, version: str, keep_tail: int) -> None:
        """A policy upgrade (or downgrade): summaries of another version are not used."""
        self.version, self.keep_tail = version, keep_tail

    @rule()
    def reopen(self) -> None:
        self.store.close()
        with pytest.raises(lf.StoreError):
            self.store.load(CONVERSATIONS[0])
        self.store = open_store(self.path)


LedgerMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLedgerMachine = LedgerMachine.TestCase
