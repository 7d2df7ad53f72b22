"""Stateful property test (issue 7): random operation sequences against a real `SQLiteStore`
file and a `Compactor`, checked after every step against a plain in-test model of the ledger
and against every invariant of SPEC §1.

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
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import ledgerfold as lf
from ledgerfold import SummaryItem, TurnItem
from ledgerfold.tokens import approx_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from source_index import check_source_index  # noqa: E402

CONVERSATIONS = ("c1", "c2")
ROLES = ("system", "user", "assistant", "tool")
REASONS = ("pending-confirmation", "active-constraint", "audit-evidence", "unverified-provenance")
POLICIES = ("policy-1", "policy-2", "policy-3")
SHARED_GROUPS = ("g-shared-a", "g-shared-b")
SECRET = "SECRET-STATEFUL-\u2028"

conversations = st.sampled_from(CONVERSATIONS)
# Any valid text: no lone surrogates (those are bad input, tested by `reject_bad_input`).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
bodies = st.one_of(texts, texts.map(lambda text: SECRET + text))
keys = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=8)
metas = st.one_of(st.none(), st.dictionaries(keys, texts, max_size=3))
protections = st.one_of(
    st.just((False, None)),
    st.tuples(st.just(True), st.one_of(st.none(), st.sampled_from(REASONS))),
)
groups = st.one_of(st.none(), st.sampled_from(SHARED_GROUPS))
picks = st.integers(min_value=0, max_value=10_000)  # an index into the live turns, modulo


@dataclass(frozen=True)
class ModelTurn:
    """A turn as the model keeps it; `meta` is a sorted tuple of pairs or None."""

    id: str
    sequence: int
    role: str
    body: str
    protected: bool
    protection_reason: str | None
    group: str | None
    meta: tuple[tuple[str, str], ...] | None

    @classmethod
    def of(cls, turn: lf.Turn) -> ModelTurn:
        meta = turn.meta
        return cls(
            turn.id,
            turn.sequence,
            turn.role,
            turn.body,
            turn.protected,
            turn.protection_reason,
            turn.group,
            None if meta is None else tuple(sorted(meta.items())),
        )

    @property
    def meta_dict(self) -> dict[str, str] | None:
        return None if self.meta is None else dict(self.meta)

    def ref(self) -> ref.RefTurn:
        return ref.RefTurn(
            self.id,
            self.sequence,
            self.role,
            self.body,
            self.protected,
            self.protection_reason,
            self.group,
            self.meta_dict,
        )


def _meta(meta: dict[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    # An empty mapping is no meta (the store and `Turn` read it back as None).
    return tuple(sorted(meta.items())) if meta else None


@dataclass
class ModelRecord:
    """One entry of `summary_history`: an accepted version (with its envelope), or a
    `failed` / `rejected` attempt."""

    summary_id: str | None
    status: str
    reason: str | None
    envelope: lf.SummaryEnvelope | None = None
    #: Every turn whose text this summary's text was made from, as it was then: the new
    #: turns of its request plus, for a rolling summary, everything its parent was made from.
    derived_from: dict[str, ModelTurn] = field(default_factory=dict)
    #: Live turns below its slot it did not cover when accepted (kept raw there).
    kept: frozenset[str] = frozenset()


@dataclass
class ModelConversation:
    turns: list[ModelTurn] = field(default_factory=list)  # live, ascending sequence
    revision: int = 0
    last_sequence: int = 0  # sequences are never reused, retracted and purged included
    exists: bool = False
    used_ids: set[str] = field(default_factory=set)  # every turn ID ever written
    purged: dict[str, int] = field(default_factory=dict)  # purged turn ID -> sequence
    # Turns as they were before a purge took them: a sealed summary's purged sources are
    # checked by their digests (SPEC §15.5).
    purged_turns: dict[str, ModelTurn] = field(default_factory=dict)
    retracted: list[ModelTurn] = field(default_factory=list)  # purge takes these too
    pointer: str | None = None  # the summary the conversation points at
    erased: int = 0  # versions purge erased (the store counts them as pruned)
    history: list[ModelRecord] = field(default_factory=list)
    boundary: tuple[int, str] | None = None
    active_plan: str | None = None  # the registered plan a commit must name
    recorded_plans: set[str] = field(default_factory=set)  # plans with any record

    def register_plan(self, plan_id: str) -> None:
        """A newly registered plan; the one it supersedes, if it ended without any record,
        gets `failed`/`abandoned` (SPEC §15.8)."""
        if self.active_plan is not None and self.active_plan not in self.recorded_plans:
            self.history.append(ModelRecord(None, "failed", "abandoned"))
            self.recorded_plans.add(self.active_plan)
        self.active_plan = plan_id

    def plan_recorded(self, plan_id: str, *, accepted: bool) -> None:
        self.recorded_plans.add(plan_id)
        if accepted:  # an accepted result clears the active plan
            self.active_plan = None

    @property
    def current(self) -> ModelRecord | None:
        found = [record for record in self.history if record.status == "current"]
        assert len(found) <= 1
        return found[0] if found else None

    @property
    def pointed(self) -> ModelRecord | None:
        """The last accepted version (what the conversation's summary pointer designates),
        unless a purge erased it."""
        if self.pointer is None:  # failed records carry no ID: they never match
            return None
        for record in self.history:
            if record.summary_id == self.pointer and record.status != "rejected":
                return record
        return None

    def sealed_turns(self, record: ModelRecord | None) -> list[ModelTurn]:
        """A version's purged sources, as they were (its sealed sources)."""
        if record is None or record.envelope is None:
            return []
        return [self.purged_turns[i] for i in record.envelope.source_ids if i in self.purged]

    def mark_stale(self, turn_id: str, reason: str) -> None:
        for record in self.history:
            if record.envelope is None or turn_id not in record.envelope.source_ids:
                continue
            if record.status in ("current", "superseded") or (
                record.status == "stale"
                and reason == "source-missing"
                and record.reason != "source-missing"
            ):
                record.status, record.reason = "stale", reason

    def mark_group_split(self, joined: list[str], *, answers_too: bool = False) -> None:
        """SPEC §15.4, §17.2: turns that join a unit holding a source of a version, without
        being its sources, split it: that version goes stale (`group-split`). A unit is
        joined through a group, or by a result answering a call (its caller, the newest
        assistant turn naming the call); an edit also joins an assistant turn to the results
        of its calls (`answers_too`)."""
        by_id = {turn.id: turn for turn in self.turns}
        groups = {by_id[turn_id].group for turn_id in joined if by_id[turn_id].group}
        members = {turn.id for turn in self.turns if turn.group in groups}
        joining = [by_id[turn_id].ref() for turn_id in joined]
        wanted = {
            (t.meta or {}).get("tool_call_id") for t in joining if t.role == "tool" and t.meta
        } - {None}
        for turn in reversed(self.turns):
            named = ref._call_ids(turn.ref()) if wanted else set()
            if named & wanted:
                members.add(turn.id)
                wanted -= named
        if answers_too:
            made = set().union(*(ref._call_ids(t) for t in joining))
            members |= {
                t.id
                for t in self.turns
                if t.role == "tool" and (t.meta_dict or {}).get("tool_call_id") in made
            }
        for record in self.history:
            if record.envelope is None or record.status not in ("current", "superseded"):
                continue
            sources = set(record.envelope.source_ids)
            if sources & members and not sources & set(joined):
                record.status, record.reason = "stale", "group-split"

    def failures(self) -> int:
        """`failed` records since the newest accepted version (the back-off's count)."""
        count = 0
        for record in reversed(self.history):
            if record.envelope is not None and record.status != "rejected":
                break
            count += record.status == "failed"
        return count

    def accept(
        self, envelope: lf.SummaryEnvelope, derived_from: dict[str, ModelTurn] | None = None
    ) -> None:
        self.plan_recorded(envelope.plan_id, accepted=True)
        if derived_from is None:  # made from exactly its sources, as they are now
            by_id = {turn.id: turn for turn in self.turns}
            derived_from = {i: by_id[i] for i in envelope.source_ids if i in by_id}
        for record in self.history:
            if record.status == "current":
                record.status = "superseded"
        sequence = {turn.id: turn.sequence for turn in self.turns} | self.purged
        slot = max(sequence[turn_id] for turn_id in envelope.source_ids)
        sources = set(envelope.source_ids)
        kept = frozenset(
            turn.id for turn in self.turns if turn.sequence < slot and turn.id not in sources
        )
        self.history.append(ModelRecord(envelope.id, "current", None, envelope, derived_from, kept))
        self.pointer = envelope.id

    def extended_sources(self, base: ModelRecord, added: tuple[str, ...]) -> tuple[str, ...]:
        """An extension's sources: the base's sealed ones first, then every live one in
        sequence order (new turns below the base's slot included, SPEC §17.5)."""
        assert base.envelope is not None
        by_id = {turn.id: turn for turn in self.turns}
        sealed_ids = [i for i in base.envelope.source_ids if i in self.purged]
        live_ids = [i for i in base.envelope.source_ids if i not in self.purged]
        live_ids = sorted([*live_ids, *added], key=lambda i: by_id[i].sequence)
        return (*sealed_ids, *live_ids)

    def missing_preserved(self, version: str) -> str | None:
        """SPEC §17.3: a protected turn the current summary kept raw below its slot, since
        retracted (the policies here preserve no role)."""
        current = self.pointed
        if current is None or current.status != "current" or current.envelope is None:
            return None
        if current.envelope.policy_version != version:
            return None
        gone = [t for t in self.retracted if t.id in current.kept and t.protected]
        return min(gone, key=lambda t: t.sequence).id if gone else None

    def prune(self, keep: int, spared: frozenset[str] = frozenset()) -> int:
        """SPEC §15.8: records other than the pointed one beyond the newest `keep` go (a
        conversation without any turn keeps its records: there is no tally to count them),
        except the versions in `spared` (the checkpoints the store kept, SPEC §17.5)."""
        if not self.exists:
            return 0
        pointed = self.pointed
        accepted = [
            i for i, r in enumerate(self.history) if r.status in ("current", "superseded", "stale")
        ]
        streak_from = accepted[-1] + 1 if accepted else 0
        # SPEC §17.5: the failures since the newest accepted version stay (the back-off).
        streak = [r for r in self.history[streak_from:] if r.status == "failed"]
        others = [
            r
            for r in self.history
            if r is not pointed and r.status != "current" and not any(r is f for f in streak)
        ]
        doomed = others[: max(0, len(others) - keep)]
        doomed = [r for r in doomed if r.summary_id is None or r.summary_id not in spared]
        self.history = [r for r in self.history if not any(r is d for d in doomed)]
        return len(doomed)


def _context_tuples(context: lf.AssembledContext) -> list[tuple[Any, ...]]:
    """Context items in the reference's tuple form."""
    out: list[tuple[Any, ...]] = []
    for item in context.items:
        if isinstance(item, SummaryItem):
            out.append(
                ("summary", item.id, item.text, item.through_sequence, tuple(item.source_ids))
            )
        else:
            out.append(("turn", item.id, item.role, item.text, item.sequence, item.meta))
    return out


def used_sources(summaries: list[SummaryItem]) -> set[str]:
    return set(summaries[0].source_ids) if summaries else set()


def _blank(request: lf.SummaryRequest) -> str:
    return " \n\t "


def _raising(request: lf.SummaryRequest) -> str:
    raise RuntimeError("summarizer crashed")


async def _too_slow(request: lf.SummaryRequest) -> str:
    await asyncio.sleep(3600)
    return "never"


SUMMARIZERS: dict[str, tuple[Any, float | None, str | None]] = {
    # name: (summarizer, compactor timeout, failure reason or None when it succeeds)
    "extractive": (lf.ExtractiveSummarizer(), None, None),
    "raises": (_raising, None, "summarizer-error"),
    "blank": (_blank, None, "blank-summary"),
    "timeout": (_too_slow, 0.01, "summarizer-timeout"),
}


def open_store(path: Path) -> lf.SQLiteStore:
    """A store on the file, without the fsync of every commit: no power loss is simulated
    here, and transactions, rollbacks and WAL behave the same, while the runtime is no longer
    bound by the disk of a busy machine."""
    store = lf.SQLiteStore(path)
    store._connection().execute("PRAGMA synchronous = OFF")
    return store


class LedgerMachine(RuleBasedStateMachine):
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
        if base is not None and base.envelope is not None and relayout:
            covered_set = set(base.envelope.source_ids)
            if not [turn_id for turn_id in compacted if turn_id not in covered_set]:
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
        if not new:
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

    # ------------------------------------------------------------------ ledger writes

    @initialize(
        seeds=st.lists(
            st.tuples(conversations, st.sampled_from(ROLES), bodies, protections),
            min_size=4,
            max_size=16,
        )
    )
    def seed(self, seeds: list[tuple[str, str, str, tuple[bool, str | None]]]) -> None:
        """Start from a few turns, so that compactions have something to do early."""
        for conversation in CONVERSATIONS:
            specs = [
                {
                    "id": self.fresh("t"),
                    "role": role,
                    "body": body,
                    "protected": protection[0],
                    "protection_reason": protection[1],
                }
                for target, role, body, protection in seeds
                if target == conversation
            ]
            written = self.store.append_many(conversation, specs)
            assert len(written) == len(specs)
            if written:
                self.record_append(conversation, written)

    @rule(
        conversation=conversations,
        role=st.sampled_from(ROLES),
        body=bodies,
        protection=protections,
        group=groups,
        meta=metas,
    )
    def append(
        self,
        conversation: str,
        role: str,
        body: str,
        protection: tuple[bool, str | None],
        group: str | None,
        meta: dict[str, str] | None,
    ) -> None:
        protected, reason = protection
        turn = self.store.append(
            conversation,
            role,
            body,
            id=self.fresh("t"),
            protected=protected,
            protection_reason=reason,
            group=group,
            meta=meta,
        )
        assert ModelTurn.of(turn) == ModelTurn(
            turn.id,
            self.model[conversation].last_sequence + 1,
            role,
            body,
            protected,
            reason,
            group,
            _meta(meta),
        )
        self.record_append(conversation, [turn])

    @rule(conversation=conversations, results=st.integers(1, 3), body=bodies)
    def append_tool_call(self, conversation: str, results: int, body: str) -> None:
        """An assistant tool call and its results, one group, one transaction."""
        group = self.fresh("tools")
        call_ids = [f"{group}-call-{index}" for index in range(results)]
        calls = [{"id": call_id, "type": "function"} for call_id in call_ids]
        specs: list[dict[str, Any]] = [
            {
                "id": self.fresh("t"),
                "role": "assistant",
                "body": body,
                "group": group,
                "meta": {"tool_calls": json.dumps(calls)},
            }
        ]
        specs.extend(
            {
                "id": self.fresh("t"),
                "role": "tool",
                "body": f"{SECRET} result {call_id}",
                "group": group,
                "meta": {"tool_call_id": call_id},
            }
            for call_id in call_ids
        )
        written = self.store.append_many(conversation, specs)
        assert [turn.group for turn in written] == [group] * (results + 1)
        self.record_append(conversation, written)

    @rule(conversation=conversations, body=bodies)
    def append_open_call(self, conversation: str, body: str) -> None:
        """An assistant tool call whose result has not arrived yet: kept raw (open group),
        often below the slot of the summaries made meanwhile."""
        group = self.fresh("open")
        calls = [{"id": f"{group}-call", "type": "function"}]
        spec = {
            "id": self.fresh("t"),
            "role": "assistant",
            "body": body,
            "group": group,
            "meta": {"tool_calls": json.dumps(calls)},
        }
        self.record_append(conversation, self.store.append_many(conversation, [spec]))

    @rule(conversation=conversations)
    def answer_open_call(self, conversation: str) -> None:
        """Issue 25 item 1: the late result of the oldest open call joins its group; with
        the call below a (sealed) summary's slot, compaction must go on (SPEC §17.5)."""
        model = self.model[conversation]
        answered = {
            (t.meta_dict or {}).get("tool_call_id") for t in model.turns if t.role == "tool"
        }
        waiting = [
            t
            for t in model.turns
            if t.group is not None
            and t.group.startswith("open")
            and f"{t.group}-call" not in answered
        ]
        if not waiting:
            return
        call = waiting[0]
        spec = {
            "id": self.fresh("t"),
            "role": "tool",
            "body": f"{SECRET} late result",
            "group": call.group,
            "meta": {"tool_call_id": f"{call.group}-call"},
        }
        self.record_append(conversation, self.store.append_many(conversation, [spec]))
        current = model.current
        below = current is not None and call.id in current.kept
        event(f"late result{' below the slot' if below else ''}")

    @rule(conversation=conversations)
    def unprotect_below_the_summary(self, conversation: str) -> None:
        """Issue 25 item 1: a pending confirmation kept raw below the current summary's slot
        is resolved; the summary, sealed or not, is extended over it (SPEC §17.5)."""
        model = self.model[conversation]
        current = model.current
        if current is None:
            return
        kept = [t for t in model.turns if t.id in current.kept and t.protected]
        if not kept:
            return
        old = kept[0]
        new = ModelTurn(old.id, old.sequence, old.role, old.body, False, None, old.group, old.meta)
        self.apply_edit(conversation, old, new, {"protected": False, "protection_reason": None})
        event(f"unprotect below the slot{' (sealed)' if model.sealed_turns(current) else ''}")

    @rule(conversation=conversations, count=st.integers(1, 2), body=bodies)
    def append_ungrouped_call(self, conversation: str, count: int, body: str) -> None:
        """An assistant turn calling tools, without a group: its results, arriving later
        through plain `append`, join its compaction unit by `tool_call_id` (SPEC §17.2)."""
        call_ids = [self.fresh("call") for _ in range(count)]
        calls = [{"id": call_id, "type": "function"} for call_id in call_ids]
        turn = self.store.append(
            conversation,
            "assistant",
            body,
            id=self.fresh("t"),
            meta={"tool_calls": json.dumps(calls)},
        )
        self.record_append(conversation, [turn])

    @rule(conversation=conversations, index=picks, body=bodies, orphan=st.booleans())
    def append_ungrouped_result(
        self, conversation: str, index: int, body: str, orphan: bool
    ) -> None:
        """A tool result without a group answering a call made earlier (maybe a second
        answer, maybe after its call was summarised), or a call nobody made."""
        made = sorted(
            set().union(*(ref._call_ids(t.ref()) for t in self.model[conversation].turns))
        )
        call_id = self.fresh("call") if orphan or not made else made[index % len(made)]
        turn = self.store.append(
            conversation,
            "tool",
            f"{SECRET} {body}",
            id=self.fresh("t"),
            meta={"tool_call_id": call_id},
        )
        self.record_append(conversation, [turn])

    @rule(conversation=conversations, index=picks, erase=st.booleans())
    def retract_a_call(self, conversation: str, index: int, erase: bool) -> None:
        """Retract a turn that made calls: its results go with it (SPEC §17.2)."""
        callers = [t for t in self.model[conversation].turns if ref._call_ids(t.ref())]
        if callers:
            turn = callers[index % len(callers)]
            self.retract(conversation, self.model[conversation].turns.index(turn), erase)

    @rule(conversation=conversations)
    def append_with_the_summary_id(self, conversation: str) -> None:
        """A turn whose ID equals the current summary's: the context must fall back raw
        (`duplicate-id`), never pick one of the two."""
        current = self.model[conversation].current
        if current is None or current.summary_id in self.model[conversation].used_ids:
            return
        assert current.summary_id is not None
        turn = self.store.append(conversation, "user", SECRET, id=current.summary_id)
        self.record_append(conversation, [turn])
        context = self.store.context(conversation, self.version)
        if current.envelope is not None and current.envelope.policy_version == self.version:
            assert (context.fallback, context.fallback_id) == ("duplicate-id", current.summary_id)

    def expected_purge_stop(
        self, conversation: str, recorded: int, sealed_id: str | None, keep: tuple[str, ...]
    ) -> int:
        """Where a purge without force stops (SPEC §17.2, issue 25 items 4 and 15): before
        any compaction unit (of the reference) it would take part of while another member
        stays raw, before an unanswered call, and before a kept-role turn the sealed summary
        covers. Members the sealed summary covers are not raw."""
        model = self.model[conversation]
        current = model.current
        covered = (
            set(current.envelope.source_ids)
            if sealed_id and current is not None and current.envelope
            else set()
        )
        refs = [turn.ref() for turn in model.turns]
        open_calls = ref._open_calls(refs)
        by_id = {turn.id: turn for turn in model.turns}
        while True:
            stops = [
                t.sequence
                for t in model.turns
                if t.role in keep and t.id in covered and t.sequence <= recorded
            ]
            for unit in ref.units(refs):
                members = [by_id[turn_id] for turn_id in unit]
                taken = [
                    t
                    for t in members
                    if t.sequence <= recorded and not t.protected and t.role not in keep
                ]
                if not taken:
                    continue
                left_raw = any(t not in taken and t.id not in covered for t in members)
                if left_raw or any(t.id in open_calls for t in taken):
                    stops.append(min(t.sequence for t in taken))
            if not stops:
                return recorded
            recorded = min(stops) - 1

    @rule(
        conversation=conversations,
        index=picks,
        changes=st.fixed_dictionaries(
            {},
            optional={
                "role": st.sampled_from(ROLES),
                "body": bodies,
                "protected": st.booleans(),
                "protection_reason": st.one_of(st.none(), st.sampled_from(REASONS)),
                "group": groups,
                "meta": metas,
            },
        ),
    )
    def edit(self, conversation: str, index: int, changes: dict[str, Any]) -> None:
        old = self.pick(conversation, index)
        if old is None:
            return
        new = ModelTurn(
            old.id,
            old.sequence,
            changes.get("role", old.role),
            changes.get("body", old.body),
            changes.get("protected", old.protected),
            changes.get("protection_reason", old.protection_reason),
            changes.get("group", old.group),
            _meta(changes["meta"]) if "meta" in changes else old.meta,
        )
        if new.protection_reason is not None and not new.protected:
            # A reason without protection is bad input: refused, nothing changes.
            before = self.snapshot(conversation)
            with pytest.raises(lf.InvalidInput) as caught:
                self.store.edit(conversation, old.id, **changes)
            assert caught.value.field == "protection_reason"
            assert self.snapshot(conversation) == before
            return
        self.apply_edit(conversation, old, new, changes)

    @rule(
        conversation=conversations,
        index=picks,
        protect=st.booleans(),
        reason=st.one_of(st.none(), st.sampled_from(REASONS)),
    )
    def protect_or_unprotect(
        self, conversation: str, index: int, protect: bool, reason: str | None
    ) -> None:
        old = self.pick(conversation, index)
        if old is None:
            return
        reason = reason if protect else None
        changes = {"protected": protect, "protection_reason": reason}
        new = ModelTurn(
            old.id, old.sequence, old.role, old.body, protect, reason, old.group, old.meta
        )
        self.apply_edit(conversation, old, new, changes)

    def apply_edit(
        self, conversation: str, old: ModelTurn, new: ModelTurn, changes: dict[str, Any]
    ) -> None:
        edited = self.store.edit(conversation, old.id, **changes)
        assert ModelTurn.of(edited) == new
        model = self.model[conversation]
        model.turns[model.turns.index(old)] = new
        model.revision += 1
        if new != old:  # every encoded field is in the digest: any change makes it stale
            model.mark_stale(old.id, "source-modified")
        if (
            (new.group is not None and new.group != old.group)
            or new.meta != old.meta
            or new.role != old.role
        ):
            model.mark_group_split([new.id], answers_too=True)

    @rule(conversation=conversations, index=picks, erase=st.booleans())
    def retract(self, conversation: str, index: int, erase: bool) -> None:
        turn = self.pick(conversation, index)
        if turn is None:
            return
        self.store.retract(conversation, turn.id, erase=erase)
        model = self.model[conversation]
        # SPEC §17.2: a turn that made calls takes the live results answering them along.
        made = ref._call_ids(turn.ref())
        answers = [
            t
            for t in model.turns
            if made and t.role == "tool" and (t.meta_dict or {}).get("tool_call_id") in made
        ]
        for gone in [turn, *answers]:
            model.turns.remove(gone)
            model.retracted.append(gone)
            model.mark_stale(gone.id, "source-missing")
        model.revision += 1
        if erase:  # the body is gone from the row and from the turn's history
            rows = (
                self.store._connection()
                .execute(
                    "SELECT body, meta, (SELECT COUNT(*) FROM turn_history h"
                    " WHERE h.turn_pk = t.pk)"
                    " FROM turns t WHERE conversation_id = ? AND id = ?",
                    (conversation, turn.id),
                )
                .fetchall()
            )
            assert rows == [("", None, 0)]
            # Every version (and rejected result) citing it goes: its text may quote it.
            kept = [
                record
                for record in model.history
                if record.envelope is None or turn.id not in record.envelope.source_ids
            ]
            model.erased += len(model.history) - len(kept)
            model.history = kept
            if model.pointed is None:
                model.pointer = None
            assert self.store.pruned_count(conversation) == model.erased

    @rule(conversation=conversations, confirm=st.booleans())
    def delete(self, conversation: str, confirm: bool) -> None:
        """`delete_conversation`: everything of the conversation goes; the other stays."""
        if not confirm:  # deleting an unknown conversation is not an error
            self.store.delete_conversation("never-written")
            return
        self.store.delete_conversation(conversation)
        self.model[conversation] = ModelConversation()
        conn = self.store._connection()
        for table, column in (
            ("turns", "conversation_id"),
            ("summaries", "conversation_id"),
            ("plans", "conversation_id"),
            ("history_boundaries", "conversation_id"),
            ("conversations", "id"),
        ):
            query = f"SELECT COUNT(*) FROM {table} WHERE {column} = ?"
            assert conn.execute(query, (conversation,)).fetchone()[0] == 0
        assert self.store.pruned_count(conversation) == 0

    @rule(conversation=conversations, through=st.integers(0, 30), force=st.booleans())
    def purge(self, conversation: str, through: int, force: bool) -> None:
        model = self.model[conversation]
        reason = self.fresh("retention")
        if not model.exists:
            with pytest.raises(lf.InvalidInput) as caught:
                self.store.purge_through(conversation, through, reason, force=force)
            assert caught.value.field == "conversation_id"
            return
        preview = self.store.preview_purge(conversation, through, force=force)
        # The current summary is sealed when it passes the full check (SPEC §15.5).
        current = model.current
        sealed_id = None
        if current is not None and current.envelope is not None:
            check = ref.check_summary(
                current.envelope,
                conversation,
                [turn.ref() for turn in model.turns],
                current.envelope.policy_version,
                [turn.ref() for turn in model.sealed_turns(current)],
            )
            assert check[0], check  # eager invalidation kept its status honest
            sealed_id = current.summary_id
        assert preview["sealed_summary"] == sealed_id
        boundary = self.store.purge_through(conversation, through, reason, force=force)
        recorded = min(through, model.last_sequence)  # never beyond the last sequence
        keep = () if force else ("system",)  # preserved roles stay unless forced
        if not force:
            recorded = self.expected_purge_stop(conversation, recorded, sealed_id, keep)
        through = recorded
        assert (boundary.through_sequence, boundary.reason) == (recorded, reason)
        taken = [
            t
            for t in [*model.turns, *model.retracted]
            if t.sequence <= through and (force or not t.protected) and t.role not in keep
        ]
        assert preview["turns"] == len(taken)
        for turn in taken:
            if turn in model.turns:
                model.turns.remove(turn)
            else:
                model.retracted.remove(turn)
            model.purged[turn.id] = turn.sequence
            model.purged_turns[turn.id] = turn
        # Every other version (and rejected result) citing a purged turn is erased.
        gone = {turn.id for turn in taken}
        # SPEC §17.5: the sealed base stays too: one older accepted version, all of whose
        # sources are purged now, each as it was derived (what the purged turns said).
        left = {r.envelope.id for r in self.store.summary_history(conversation) if r.envelope}
        bases = [
            record
            for record in model.history
            if record.envelope is not None
            and record.summary_id != sealed_id
            and record.summary_id in left
            and record.status != "rejected"
            and gone & set(record.envelope.source_ids)
        ]
        assert len(bases) <= 1 and (not bases or sealed_id is not None)
        for base in bases:
            event("purge: a sealed base kept")
            assert base.envelope is not None
            assert set(base.envelope.source_ids) <= set(model.purged)
            for turn_id, seen in base.derived_from.items():
                assert model.purged_turns[turn_id] == seen
        kept = [
            record
            for record in model.history
            if record.envelope is None
            or record.summary_id == sealed_id
            or any(record is base for base in bases)
            or not gone & set(record.envelope.source_ids)
        ]
        erased = len(model.history) - len(kept)
        assert preview["versions_erased"] == erased
        model.history = kept
        model.erased += erased
        if model.pointed is None:
            model.pointer = None
        model.revision += 1
        assert self.store.pruned_count(conversation) == model.erased
        # The store reports the furthest boundary; a later, smaller purge does not shrink it.
        if model.boundary is None or recorded >= model.boundary[0]:
            model.boundary = (recorded, reason)

    @rule(
        conversation=conversations,
        index=picks,
        bad=st.sampled_from(
            [
                ("edit", {"body": SECRET + "\ud800"}, "body"),
                ("edit", {"role": "admin"}, "role"),
                ("edit", {"id": "renamed"}, "id"),
                ("edit", {"sequence": 10**6}, "sequence"),
                ("edit", {"group": ""}, "group"),
                ("edit", {"meta": {"": SECRET}}, "meta"),
                ("edit", {"protected": 1}, "protected"),
                ("edit-unknown", {"body": SECRET}, "turn_id"),
                ("retract-unknown", {}, "turn_id"),
                ("append-duplicate", {}, "id"),
            ]
        ),
    )
    def reject_bad_input(
        self, conversation: str, index: int, bad: tuple[str, dict[str, Any], str]
    ) -> None:
        """Hostile input: refused with `InvalidInput` naming the field, nothing changes."""
        kind, changes, expected_field = bad
        turn = self.pick(conversation, index)
        if turn is None and kind in ("edit", "append-duplicate"):
            return
        before = self.snapshot(conversation)
        history = self.store.summary_history(conversation)
        if kind == "edit":
            assert turn is not None
            call = partial(self.store.edit, conversation, turn.id, **changes)
        elif kind == "edit-unknown":
            call = partial(self.store.edit, conversation, "no-such-turn", **changes)
        elif kind == "retract-unknown":
            call = partial(self.store.retract, conversation, "no-such-turn")
        else:
            assert turn is not None
            call = partial(self.store.append, conversation, "user", SECRET, id=turn.id)
        with pytest.raises(lf.InvalidInput) as caught:
            call()
        error = caught.value
        assert error.field == expected_field
        assert SECRET not in str(error) and SECRET not in repr(error)
        if kind == "append-duplicate":
            assert isinstance(error, lf.DuplicateId) and error.code == "duplicate-id"
        assert self.snapshot(conversation) == before
        assert self.store.summary_history(conversation) == history

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
        everything its text was derived from) is unchanged. Returns it, checked so."""
        model = self.model[conversation]
        summary = outcome.summary
        pointed = model.pointed
        if (
            base is not None
            or summary is None
            or summary.parent_id is None
            or pointed is None
            or pointed.status != "stale"
        ):
            return None
        found = [
            record
            for record in model.history
            if record.summary_id == summary.parent_id and record.status == "superseded"
        ]
        assert len(found) == 1, summary.parent_id
        checkpoint = found[0]
        assert checkpoint.envelope is not None and checkpoint.envelope.policy_version == (
            self.version
        )
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
        model.register_plan(plan_a.plan_id)
        plan_b = self.store.start_plan(conversation, self.keep_tail, self.version)
        model.register_plan(plan_b.plan_id)  # plan A ended without any record: abandoned
        assert plan_a.compacted_ids == plan_b.compacted_ids == compacted
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


LedgerMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLedgerMachine = LedgerMachine.TestCase
