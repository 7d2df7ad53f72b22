"""The stateful test's machine without its rules: the store on a file, the model beside
it, what one compaction is expected to do, and the invariants checked after every step
(the rules are in ledger_write_rules.py and test_state_machine.py)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event
from hypothesis.stateful import RuleBasedStateMachine, invariant

import ledgerfold as lf
from ledgerfold import SummaryItem, TurnItem

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from ledger_model import (  # noqa: E402
    CONVERSATIONS,
    POLICIES,
    ModelConversation,
    ModelRecord,
    ModelTurn,
    _context_tuples,
    open_store,
    used_sources,
)
from source_index import check_source_index  # noqa: E402


class LedgerMachineBase(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="ledgerfold-sm-"))
        self.path = self.directory / "ledger.db"
        self.store = open_store(self.path)
        self.model = {conversation: ModelConversation() for conversation in CONVERSATIONS}
        self.version = POLICIES[0]
        self.keep_tail = 2
        self.counter = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}-{self.counter}"

    def pick(self, conversation: str, index: int) -> ModelTurn | None:
        turns = self.model[conversation].turns
        return turns[index % len(turns)] if turns else None

    def snapshot(self, conversation: str) -> tuple[Any, ...]:
        """Everything a failed or refused operation must leave as it was."""
        return (
            self.store.load(conversation),
            self.store.current_summary(conversation),
            _context_tuples(self.store.context(conversation, self.version)),
        )

    def record_append(self, conversation: str, written: list[lf.Turn]) -> None:
        model = self.model[conversation]
        for offset, turn in enumerate(written, start=1):
            assert turn.sequence == model.last_sequence + offset
        model.turns.extend(ModelTurn.of(turn) for turn in written)
        model.used_ids.update(turn.id for turn in written)
        model.last_sequence += len(written)
        model.revision += 1
        model.exists = True
        model.mark_group_split([turn.id for turn in written])

    def expected_compacted(self, conversation: str, keep_tail: int) -> tuple[str, ...]:
        model = self.model[conversation]
        plan = ref.plan_compaction(
            conversation, model.revision, [turn.ref() for turn in model.turns], keep_tail, "p"
        )
        compacted: tuple[str, ...] = plan["compacted_ids"]
        return compacted

    def expected_work(
        self, conversation: str, force: bool
    ) -> tuple[tuple[str, ...], ModelRecord | None, tuple[str, ...], str | None]:
        """What one compaction should do (SPEC §15.1, §15.8): the compacted IDs, the current
        summary it extends (None: a rebase), the uncovered turns it summarises, and why it is
        skipped (None when it runs)."""
        model = self.model[conversation]
        compacted = self.expected_compacted(conversation, self.keep_tail)
        current = model.current
        base = None
        rebase_due = False
        if (
            current is not None
            and current.envelope is not None
            and current.envelope.policy_version == self.version
        ):
            covered = current.envelope.source_ids
            live_covered = [turn_id for turn_id in covered if turn_id not in model.purged]
            if set(live_covered) <= set(compacted):
                # Turns below the summary's slot that became compactable extend it too
                # (SPEC §17.5): a sealed summary is never stuck.
                base = current
            else:
                rebase_due = True
        relayout = model.missing_preserved(self.version) is not None
        relaid = False
        if base is not None and base.envelope is not None and relayout:
            covered_set = set(base.envelope.source_ids)
            if [turn_id for turn_id in compacted if turn_id not in covered_set]:
                pass
            elif model.sealed_turns(base):
                relaid = True  # SPEC §17.3, §17.5: laid out anew by an extension adding none
            else:
                base = None  # SPEC §17.3: nothing to extend it with, laid out anew
        if (
            base is None
            and current is not None
            and current.envelope is not None
            and current.envelope.policy_version == self.version
            and model.sealed_turns(current)
        ):
            # A sealed summary is never superseded by a rebase (its purged sources could
            # not be summarised again): skipped until the plan covers its live sources.
            return compacted, None, (), "nothing-to-compact"
        new = compacted
        if base is not None and base.envelope is not None:
            covered_set = set(base.envelope.source_ids)
            new = tuple(turn_id for turn_id in compacted if turn_id not in covered_set)
        if not new and not relaid:
            return compacted, base, new, "nothing-to-compact"
        needed = 1 if force else 2 ** min(model.failures(), 6)
        if len(new) < needed and not rebase_due and not relayout:
            return compacted, base, new, "not-due"
        return compacted, base, new, None

    def check_just_committed(self, conversation: str, envelope: lf.SummaryEnvelope) -> None:
        """SPEC §1.5 and §1.6 at commit time: the plan's tail is raw and no group is split."""
        ledger = self.store.load(conversation)
        context = self.store.context(conversation, self.version)
        assert context.fallback is None
        assert context.summary is not None and context.summary.id == envelope.id
        raw = {item.id for item in context.items if isinstance(item, TurnItem)}
        for turn in ledger.turns[-self.keep_tail :]:
            assert turn.id in raw
        sources = set(envelope.source_ids)
        for unit in ref.units(ledger.turns):  # groups and tool calls (SPEC §17.2)
            assert unit <= sources or not unit & sources, unit

    # ------------------------------------------------------------------ invariants

    @invariant()
    def check_everything(self) -> None:
        existing = sorted(c for c, model in self.model.items() if model.exists)
        assert self.store.conversation_ids() == existing
        for conversation in CONVERSATIONS:
            ledger = self.check_ledger(conversation)
            self.check_history(conversation)
            for version in POLICIES:
                self.check_context(conversation, ledger, version)
        # Shared source runs: none orphaned, none holding rows no version reads.
        check_source_index(self.store._connection())

    def check_ledger(self, conversation: str) -> lf.Conversation:
        model = self.model[conversation]
        ledger = self.store.load(conversation)
        assert ledger.id == conversation
        assert ledger.revision == model.revision
        assert [ModelTurn.of(turn) for turn in ledger.turns] == model.turns
        sequences = [turn.sequence for turn in ledger.turns]
        assert sequences == sorted(set(sequences))
        return ledger

    def check_history(self, conversation: str) -> None:
        model = self.model[conversation]
        history = self.store.summary_history(conversation)
        assert [
            (r.envelope.id if r.envelope is not None else None, r.status, r.reason) for r in history
        ] == [(r.summary_id, r.status, r.reason) for r in model.history]
        assert sum(record.status == "current" for record in history) <= 1
        for record, expected in zip(history, model.history, strict=True):
            if expected.envelope is not None:
                assert record.envelope == expected.envelope
        current = model.current
        stored = self.store.current_summary(conversation)
        assert stored == (current.envelope if current is not None else None)
        boundary = self.store.history_boundary(conversation)
        got = None if boundary is None else (boundary.through_sequence, boundary.reason)
        assert got == model.boundary

    def check_context(self, conversation: str, ledger: lf.Conversation, version: str) -> None:
        model = self.model[conversation]
        context = self.store.context(conversation, version)
        ids = context.ids
        assert len(ids) == len(set(ids))  # §1.3
        summaries = [item for item in context.items if isinstance(item, SummaryItem)]
        assert len(summaries) <= 1
        raw = {item.id for item in context.items if isinstance(item, TurnItem)}
        for item in context.items:
            if isinstance(item, TurnItem):
                turn = ledger.get(item.id)
                assert turn is not None
                assert item == TurnItem(turn.id, turn.role, turn.body, turn.sequence, turn.meta)
        for turn in ledger.turns:
            if turn.protected:
                assert turn.id in raw  # §1.4
        if summaries:
            item = summaries[0]
            assert context.fallback is None
            current = self.store.current_summary(conversation)
            assert current is not None and current.id == item.id
            assert (item.text, item.source_ids) == (current.text, current.source_ids)
            assert current.policy_version == version
            sealed = {
                turn.id: ref.turn_digest(turn.ref()) for turn in model.sealed_turns(model.current)
            }
            assert lf.check_summary(current, ledger, version, sealed=sealed).current  # §1.2
            # §15.1: no context holds text made from a turn whose content has changed since
            # (tracked by the model through every rolling parent; purged turns are sealed).
            [record] = [r for r in model.history if r.summary_id == item.id]
            for turn_id, then in record.derived_from.items():
                if turn_id in sealed:
                    continue
                assert ModelTurn.of(ledger.get(turn_id)) == then  # type: ignore[arg-type]
            sources = set(item.source_ids)
            assert not raw & sources  # §1.3
            sequences = {turn.id: turn.sequence for turn in ledger.turns} | model.purged
            assert item.through_sequence == max(sequences[turn_id] for turn_id in sources)
            for turn in ledger.turns:
                if turn.sequence > item.through_sequence:
                    assert turn.id in raw
                if turn.id not in raw:
                    assert turn.id in sources
        else:
            assert context.fallback is not None
            assert ids == ledger.turn_ids
        # Context order: ascending sequence, the summary at its through_sequence.
        positions = [
            item.through_sequence if isinstance(item, SummaryItem) else item.sequence
            for item in context.items
        ]
        assert positions == sorted(positions)
        # A purged turn never comes back, raw or as a source; the context says history was
        # purged. (`history_boundary` is the furthest purge's boundary, as the store documents.)
        if summaries:
            event(f"context: summary used under {version}")
        if context.fallback == "preserved-missing":
            event("context: preserved-missing")
        # A purged turn may stay a source only of the sealed summary, never raw.
        sealed_ids = {turn.id for turn in model.sealed_turns(model.current)}
        raw_ids = {item.id for item in context.items if isinstance(item, TurnItem)}
        for turn_id in model.purged:
            assert turn_id not in raw_ids  # (a summary may carry a purged turn's ID)
            assert turn_id not in used_sources(summaries) or turn_id in sealed_ids
            assert context.history_boundary is not None
        got = context.history_boundary
        assert (None if got is None else (got.through_sequence, got.reason)) == model.boundary
        # Differential: the whole context equals the slow reference over the model.
        expected = self.expected_context(conversation, version)
        assert (_context_tuples(context), context.fallback) == expected
        # SPEC §17.2: whatever the ledger holds, the chat messages are a valid tool-call
        # sequence, and only the counted items are left out.
        messages = lf.to_chat_messages(context)
        assert ref.valid_tool_sequence(messages)
        assert len(messages) == len(context.items) - context.dropped

    def expected_context(
        self, conversation: str, version: str
    ) -> tuple[list[tuple[Any, ...]], str | None]:
        model = self.model[conversation]
        turns = [turn.ref() for turn in model.turns]
        pointed = model.pointed
        items, fallback, _ = ref.assemble_context(
            conversation,
            turns,
            pointed.envelope if pointed is not None else None,
            version,
            sealed=[turn.ref() for turn in model.sealed_turns(pointed)],
        )
        if pointed is not None and pointed.status == "stale" and fallback is None:
            # Sources edited back to their old values: a version stored stale stays unused.
            items, _, _ = ref.assemble_context(conversation, turns, None, version)
            fallback = f"stale-summary:{pointed.reason}"
        if fallback is None and model.missing_preserved(version) is not None:
            items, _, _ = ref.assemble_context(conversation, turns, None, version)
            fallback = "preserved-missing"  # SPEC §17.3
        return items, fallback
