"""Adversarial tests of the rolling fast path (SPEC §15.1, §15.2, §15.4): the cached
fingerprint state (`SourceDigests`) extended at each rolling commit, the identity memo of
`plan.extend_ids`, and the `Store` protocol's `parent_digests`.

The stateful test drives two `SQLiteStore` instances on one file (each with its own warm
version cache) through appends, edits, protection changes, bodies changed by raw SQL then
revalidated, retractions (with erasure), purges, prunes, whole-conversation deletions that
bring back the same conversation, turn, plan and summary IDs, and compactions (the
`Compactor`, and the store's own calls with honest and forged envelopes, some started on one
instance and committed on the other after a change). Its oracle is a plain model of what was
written: the digests it compares with come from `tests/reference.py` over the model's turn
contents (a purged turn keeps the content it had when purged), never from the store's caches
or index.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import ledgerfold as lf
from ledgerfold import _native
from ledgerfold import _plan as planning
from ledgerfold._native import SourceDigests
from ledgerfold._summary import extended_fingerprint
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store._protocol import CompactionWork

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

CONVERSATIONS = ("c1", "c2")
VERSION = "v1"
KEEP_TAIL = 2
GROUPS = (None, None, None, "g1", "g2")
conversations = st.sampled_from(CONVERSATIONS)
instances = st.integers(0, 1)
picks = st.integers(0, 10_000)


@dataclass
class ModelTurn:
    id: str
    sequence: int
    role: str
    body: str
    protected: bool = False
    group: str | None = None
    state: str = "live"  # live, retracted or purged
    meta: dict[str, str] | None = None

    def ref(self) -> ref.RefTurn:
        return ref.RefTurn(
            self.id,
            self.sequence,
            self.role,
            self.body,
            self.protected,
            None,
            self.group,
            self.meta,
        )


@dataclass
class ModelConversation:
    turns: dict[str, ModelTurn] = field(default_factory=dict)
    next_turn: int = 0  # turn, plan and summary IDs restart after a deletion: they come again
    next_plan: int = 0
    next_summary: int = 0
    last_sequence: int = 0

    def live(self) -> list[ModelTurn]:
        return [turn for turn in self.turns.values() if turn.state == "live"]


def open_store(path: Path) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path)
    store._connection().execute("PRAGMA synchronous = OFF")
    return store


class RollingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="ledgerfold-rolling-"))
        self.path = self.directory / "ledger.db"
        self.stores = [open_store(self.path), open_store(self.path)]
        self.model = {cid: ModelConversation() for cid in CONVERSATIONS}
        # Fingerprints of every accepted version, by summary ID, as the oracle computed them
        # at commit time (a version is immutable: the store must keep reporting this one).
        self.accepted: dict[str, str] = {}

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ the oracle

    def expected_fingerprint(self, cid: str, source_ids: tuple[str, ...]) -> str | None:
        """The reference fingerprint of these sources as the model has them, or None when
        one is missing or retracted (no current summary may cite it) or they are not in
        order: purged (sealed) sources first, then the live ones in sequence order (a turn
        kept below a sealed summary's slot may join it later, SPEC §17.5)."""
        turns = self.model[cid].turns
        found = [turns.get(turn_id) for turn_id in source_ids]
        if any(turn is None or turn.state == "retracted" for turn in found):
            return None
        states = [turn.state for turn in found if turn is not None]
        if states != sorted(states, key=lambda state: state != "purged"):
            return None  # a sealed source after a live one
        live = [turn.sequence for turn in found if turn is not None and turn.state == "live"]
        if live != sorted(live) or len(set(live)) != len(live):
            return None
        return ref.fingerprint_turns(turn.ref() for turn in found if turn is not None)

    def check_accepted(self, envelope: lf.SummaryEnvelope) -> None:
        expected = self.expected_fingerprint(envelope.conversation_id, envelope.source_ids)
        assert expected is not None, (envelope, "an accepted version cites a changed turn")
        assert envelope.source_fingerprint == expected, envelope
        self.accepted[envelope.id] = envelope.source_fingerprint

    def next_id(self, cid: str, kind: str) -> str:
        model = self.model[cid]
        if kind == "turn":
            model.next_turn += 1
            return f"t{model.next_turn}"
        if kind == "plan":
            model.next_plan += 1
            return f"p-{cid}-{model.next_plan}"
        model.next_summary += 1
        return f"s-{cid}-{model.next_summary}"

    # ------------------------------------------------------------------ ledger rules

    @rule(
        at=instances,
        cid=conversations,
        count=st.integers(1, 6),
        group=st.sampled_from(GROUPS),
        protect=st.booleans(),
    )
    def append(self, at: int, cid: str, count: int, group: str | None, protect: bool) -> None:
        model = self.model[cid]
        specs = [
            {
                "id": self.next_id(cid, "turn"),
                "role": ("user", "assistant")[i % 2],
                "body": f"body {model.next_turn} of {cid}",
                "group": group if i == 0 else None,
                "protected": protect and i == 0,
            }
            for i in range(count)
        ]
        written = self.stores[at].append_many(cid, specs)
        for turn in written:
            model.turns[turn.id] = ModelTurn(
                turn.id, turn.sequence, turn.role, turn.body, turn.protected, turn.group
            )
            model.last_sequence = turn.sequence

    @rule(at=instances, cid=conversations, index=picks, kind=st.sampled_from(("body", "protect")))
    def edit(self, at: int, cid: str, index: int, kind: str) -> None:
        live = self.model[cid].live()
        if not live:
            return
        turn = live[index % len(live)]
        if kind == "body":
            self.stores[at].edit(cid, turn.id, body=turn.body + "!")
            turn.body += "!"
        else:
            self.stores[at].edit(cid, turn.id, protected=not turn.protected)
            turn.protected = not turn.protected

    @rule(at=instances, cid=conversations)
    def call_a_tool(self, at: int, cid: str) -> None:
        """An assistant tool call whose result comes later (kept raw while open)."""
        model = self.model[cid]
        turn_id = self.next_id(cid, "turn")
        meta = {"tool_calls": json.dumps([{"id": f"call-{turn_id}", "type": "function"}])}
        (turn,) = self.stores[at].append_many(
            cid,
            [{"id": turn_id, "role": "assistant", "body": "", "group": turn_id, "meta": meta}],
        )
        model.turns[turn.id] = ModelTurn(
            turn.id, turn.sequence, "assistant", "", False, turn_id, meta=meta
        )
        model.last_sequence = turn.sequence

    @rule(at=instances, cid=conversations)
    def answer_late(self, at: int, cid: str) -> None:
        """Issue 25 item 1: the oldest open call gets its result, often below a (sealed)
        summary's slot: compaction must go on and fold the pair in."""
        model = self.model[cid]
        answered = {
            (turn.meta or {}).get("tool_call_id") for turn in model.turns.values() if turn.meta
        }
        waiting = [
            turn
            for turn in model.live()
            if turn.meta is not None
            and "tool_calls" in turn.meta
            and f"call-{turn.id}" not in answered
        ]
        if not waiting:
            return
        call = waiting[0]
        turn_id = self.next_id(cid, "turn")
        meta = {"tool_call_id": f"call-{call.id}"}
        (turn,) = self.stores[at].append_many(
            cid,
            [{"id": turn_id, "role": "tool", "body": "result", "group": call.group, "meta": meta}],
        )
        model.turns[turn.id] = ModelTurn(
            turn.id, turn.sequence, "tool", "result", False, call.group, meta=meta
        )
        model.last_sequence = turn.sequence
        event("late result")

    @rule(at=instances, cid=conversations)
    def resolve_below_the_slot(self, at: int, cid: str) -> None:
        """Issue 25 item 1: a protected turn kept raw below the current summary's slot is
        unprotected (a confirmation resolved)."""
        model = self.model[cid]
        current = self.stores[at].current_summary(cid)
        if current is None:
            return
        slot = max(
            (model.turns[i].sequence for i in current.source_ids if i in model.turns), default=0
        )
        below = [t for t in model.live() if t.protected and t.sequence < slot]
        if not below:
            return
        self.stores[at].edit(cid, below[0].id, protected=False)
        below[0].protected = False
        event("resolved below the slot")

    @rule(at=instances, cid=conversations, index=picks, erase=st.booleans())
    def retract(self, at: int, cid: str, index: int, erase: bool) -> None:
        live = self.model[cid].live()
        if not live:
            return
        turn = live[index % len(live)]
        self.stores[at].retract(cid, turn.id, erase=erase)
        turn.state = "retracted"
        made = ref._call_ids(turn.ref())  # SPEC §17.2: its results go with it
        for other in live:
            if other.role == "tool" and (other.meta or {}).get("tool_call_id") in made:
                other.state = "retracted"

    @rule(at=instances, cid=conversations, calls=st.integers(1, 2))
    def append_call(self, at: int, cid: str, calls: int) -> None:
        """An assistant turn calling tools, without a group (its results come later)."""
        model = self.model[cid]
        turn_id = self.next_id(cid, "turn")
        call_ids = [f"{turn_id}-call-{n}" for n in range(calls)]
        meta = {"tool_calls": json.dumps([{"id": c, "type": "function"} for c in call_ids])}
        turn = self.stores[at].append(cid, "assistant", "calling", id=turn_id, meta=meta)
        model.turns[turn.id] = ModelTurn(turn.id, turn.sequence, "assistant", "calling", meta=meta)
        model.last_sequence = turn.sequence

    @rule(at=instances, cid=conversations, index=picks, orphan=st.booleans())
    def append_result(self, at: int, cid: str, index: int, orphan: bool) -> None:
        """A tool result without a group, through plain `append`: for a call made earlier
        (live or not, answered or not) or for a call nobody made."""
        model = self.model[cid]
        made = sorted(set().union(*(ref._call_ids(t.ref()) for t in model.turns.values())))
        turn_id = self.next_id(cid, "turn")
        call_id = f"{turn_id}-nobody" if orphan or not made else made[index % len(made)]
        meta = {"tool_call_id": call_id}
        turn = self.stores[at].append(cid, "tool", "result", id=turn_id, meta=meta)
        model.turns[turn.id] = ModelTurn(turn.id, turn.sequence, "tool", "result", meta=meta)
        model.last_sequence = turn.sequence

    @rule(at=instances, cid=conversations, index=picks)
    def retract_a_call(self, at: int, cid: str, index: int) -> None:
        live = self.model[cid].live()
        callers = [turn for turn in live if ref._call_ids(turn.ref())]
        if callers:
            self.retract(at, cid, live.index(callers[index % len(callers)]), False)

    @rule(cid=conversations, index=picks)
    def tamper_and_revalidate(self, cid: str, index: int) -> None:
        """A body changed behind the library's back (raw SQL), then a deep revalidation:
        it repairs the stored digest (issue 25 item 3), so later summaries are fingerprinted
        from the body as it is (`check_accepted`) and an edit is compared with it."""
        live = self.model[cid].live()
        if not live:
            return
        turn = live[index % len(live)]
        with sqlite3.connect(self.path) as conn:
            conn.execute(
                "UPDATE turns SET body = body || '~' WHERE conversation_id = ? AND id = ?",
                (cid, turn.id),
            )
        conn.close()
        turn.body += "~"
        report = revalidate_database(self.path, workers=1)
        assert (cid, turn.id) in report.wrong_digests
        assert report.digests_repaired == report.digests_wrong

    @rule(at=instances, cid=conversations, back=st.integers(0, 12), force=st.booleans())
    def purge(self, at: int, cid: str, back: int, force: bool) -> None:
        model = self.model[cid]
        if not model.turns:
            return
        open_calls = ref._open_calls([turn.ref() for turn in model.live()])
        boundary = self.stores[at].purge_through(
            cid, max(0, model.last_sequence - back), "test", force=force
        )
        if not force:  # issue 25 item 4: a purge stops before an unanswered call
            taken = {t.id for t in model.live() if t.sequence <= boundary.through_sequence}
            assert not taken & open_calls, (taken & open_calls, boundary)
        for turn in model.turns.values():
            if (
                turn.state != "purged"
                and turn.sequence <= boundary.through_sequence
                and (force or not turn.protected)
            ):
                turn.state = "purged"  # its content stays what it was: the sealed digest's

    @rule(at=instances, cid=conversations)
    def delete_and_recreate(self, at: int, cid: str) -> None:
        """The same conversation comes back with the same turn IDs (and, as compactions
        run, the same plan and summary IDs, on reused row numbers)."""
        self.stores[at].delete_conversation(cid)
        self.model[cid] = ModelConversation()
        for summary_id in [s for s in self.accepted if s.startswith(f"s-{cid}-")]:
            del self.accepted[summary_id]
        self.append(at, cid, 5, None, False)

    @rule(at=instances, cid=conversations, keep=st.integers(0, 2))
    def prune(self, at: int, cid: str, keep: int) -> None:
        self.stores[at].prune_versions(cid, keep=keep)

    @rule(at=instances)
    def reopen(self, at: int) -> None:
        self.stores[at].close()
        self.stores[at] = open_store(self.path)

    # ------------------------------------------------------------------ compactions

    @rule(at=instances, cid=conversations, budget=st.sampled_from((10**9, 10**9, 12)))
    def compact(self, at: int, cid: str, budget: int) -> None:
        policy = lf.CompactionPolicy(
            VERSION, keep_tail=KEEP_TAIL, min_new_turns=1, max_input_tokens=budget
        )
        compactor = lf.Compactor(
            self.stores[at],
            policy,
            lambda request: f"summary of {len(request.turns)}",
            summary_id_factory=lambda: self.next_id(cid, "summary"),
        )
        outcome = compactor.compact(cid, force=True)
        event(f"compact: {outcome.status}")
        if outcome.accepted:
            assert outcome.summary is not None
            event(f"compact: accepted, parent={outcome.summary.parent_id is not None}")
            self.check_accepted(outcome.summary)

    @rule(
        at=instances,
        cid=conversations,
        rounds=st.lists(st.integers(1, 5), min_size=1, max_size=4),
        budget=st.sampled_from((10**9, 10**9, 12)),
    )
    def converse(self, at: int, cid: str, rounds: list[int], budget: int) -> None:
        """The agent loop: a few turns, then a compaction (rolling once one exists)."""
        for count in rounds:
            self.append(at, cid, count, None, False)
            self.compact(at, cid, budget)

    @rule(
        begin_at=instances,
        commit_at=instances,
        cid=conversations,
        forgery=st.sampled_from(
            (
                "none",
                "none",
                "fingerprint",
                "other-parent",
                "drop-parent",
                "other-conversation",
                "skip-covered",
            )
        ),
        meanwhile=st.sampled_from(
            ("nothing", "nothing", "edit", "append", "purge", "prune", "recreate")
        ),
        index=picks,
        before=st.integers(0, 4),
    )
    def compact_by_hand(
        self,
        begin_at: int,
        commit_at: int,
        cid: str,
        forgery: str,
        meanwhile: str,
        index: int,
        before: int,
    ) -> None:
        """`begin_compaction` on one instance, maybe a change through the other, then
        `commit_summary` on either, with the envelope a compactor builds or a forged one."""
        if before:
            self.append(begin_at, cid, before, None, False)
        work = self.stores[begin_at].begin_compaction(
            cid, KEEP_TAIL, VERSION, plan_id=self.next_id(cid, "plan")
        )
        if work.plan is None:
            return
        plan = work.plan
        covered = () if work.parent is None else work.parent.source_ids
        added = tuple(turn.id for turn in work.new_turns)
        source_ids = plan.compacted_ids  # the memo's tuple, when the store built it
        fingerprint = extended_fingerprint(work.parent_digests, work.new_turns)
        parent_id = None if work.parent is None else work.parent.id
        conversation = cid
        # New turns below the parent's slot (SPEC §17.5): the sources in the plan's order,
        # fingerprinted over the parent's digests (handed as bytes then) and the new turns'.
        merged = work.parent is not None and not planning.starts_with_ids(source_ids, covered)
        if merged:
            assert isinstance(work.parent_digests, bytes)
            digest = {i: work.parent_digests[32 * k : 32 * k + 32] for k, i in enumerate(covered)}
            digest.update((turn.id, turn.digest) for turn in work.new_turns)
            fingerprint = _native.fingerprint_digests(b"".join(digest[i] for i in source_ids))
            event("by hand: below the slot")
            if forgery == "skip-covered":
                return self.abandon(work)
        if forgery == "fingerprint":
            fingerprint = "lf1:" + "0" * 64
        elif forgery == "other-parent":
            others = [s for s in self.accepted if s.startswith(f"s-{cid}-") and s != parent_id]
            if not others:
                return self.abandon(work)
            parent_id = others[index % len(others)]
        elif forgery == "drop-parent" and parent_id is not None:
            parent_id = None  # a rebase of text written on top of the parent: not its sources
        elif forgery == "other-conversation":
            conversation = CONVERSATIONS[1 - CONVERSATIONS.index(cid)]
        elif forgery == "skip-covered":
            if not covered or len(added) < 2:  # nothing to shift
                return self.abandon(work)
            # One covered ID dropped, one new turn's digest left out of the fingerprint: as
            # long as the IDs after the parent's count are taken as the new ones, the
            # fingerprint checks; only a prefix check that compares (or truly knows) the
            # IDs refuses it.
            source_ids = source_ids[1:]
            fingerprint = extended_fingerprint(work.parent_digests, work.new_turns[1:])
        if meanwhile == "edit":
            self.edit(1 - begin_at, cid, index, "body")
        elif meanwhile == "append":
            self.append(1 - begin_at, cid, 1, None, False)
        elif meanwhile == "purge":
            self.purge(1 - begin_at, cid, 4, False)
        elif meanwhile == "prune":
            self.prune(1 - begin_at, cid, 0)
        elif meanwhile == "recreate":
            # The conversation comes back (same turn IDs and bodies) with a plan of the very
            # same ID active: the pending result's plan check passes.
            self.delete_and_recreate(1 - begin_at, cid)
            self.stores[1 - begin_at].begin_compaction(
                cid, KEEP_TAIL, VERSION, plan_id=plan.plan_id
            )
            self.model[cid].next_plan = int(plan.plan_id.rsplit("-", 1)[1])  # taken again
        if forgery != "skip-covered" and not merged:
            assert source_ids[: len(covered)] == covered and source_ids[len(covered) :] == added
        envelope = lf.SummaryEnvelope(
            id=self.next_id(conversation, "summary"),
            plan_id=plan.plan_id,
            conversation_id=conversation,
            source_revision=plan.source_revision,
            source_ids=source_ids,
            source_fingerprint=fingerprint,
            policy_version=VERSION,
            text="by hand",
            parent_id=parent_id,
        )
        write = self.stores[commit_at].commit_summary(envelope)
        event(f"by hand: {forgery}/{meanwhile} {write.accepted} {write.detail}")
        if write.accepted:
            assert forgery in ("none", "drop-parent"), (forgery, write)
            self.check_accepted(envelope)
        elif forgery == "none" and meanwhile in ("nothing", "append"):
            raise AssertionError(f"an honest envelope was refused: {write}")

    def abandon(self, work: CompactionWork) -> None:
        assert work.plan is not None
        self.stores[0].record_failure(work.plan.plan_id, "summarizer-error")

    # ------------------------------------------------------------------ invariants

    @invariant()
    def every_summary_in_use_matches_its_sources(self) -> None:
        for cid in CONVERSATIONS:
            for store in self.stores:
                current = store.current_summary(cid)
                if current is not None:
                    expected = self.expected_fingerprint(cid, current.source_ids)
                    assert current.source_fingerprint == expected, (cid, current)
                context = store.context(cid, VERSION)
                # SPEC §17.2: whatever the ledger holds, a valid tool-call sequence.
                assert ref.valid_tool_sequence(lf.to_chat_messages(context))
                used = context.summary
                if used is not None:
                    assert current is not None and used.id == current.id
                for record in store.summary_history(cid):
                    envelope = record.envelope
                    if record.status in ("current", "superseded", "stale"):
                        assert envelope is not None
                        assert self.accepted.get(envelope.id) == envelope.source_fingerprint


RollingMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRollingMachine = RollingMachine.TestCase


# -- deterministic cases --------------------------------------------------------------------

POLICY = lf.CompactionPolicy(VERSION, keep_tail=2, min_new_turns=1, max_input_tokens=10**9)


def _say(store: lf.SQLiteStore, cid: str, count: int, stem: str = "turn") -> None:
    turns = store.load(cid).turns
    start = turns[-1].sequence if turns else 0  # unique IDs even after a purge
    store.append_many(
        cid,
        [
            {"id": f"{stem}{start + i}", "role": ("user", "assistant")[i % 2], "body": f"b{i}"}
            for i in range(count)
        ],
    )


def _reference(store: lf.SQLiteStore, envelope: lf.SummaryEnvelope) -> str:
    turns = {turn.id: turn for turn in store.load(envelope.conversation_id).turns}
    return ref.fingerprint_turns(turns[turn_id] for turn_id in envelope.source_ids)


def _compact(store: Any, cid: str = "c") -> lf.SummaryEnvelope:
    outcome = lf.Compactor(store, POLICY, lambda request: "summary").compact(cid)
    assert outcome.accepted and outcome.summary is not None, outcome
    return outcome.summary


def _damage_index(path: Path, *digests: object) -> None:
    """Overwrite the stored digests of the first sources of every run, as a change made
    outside ledgerfold (or a bad sector) would."""
    with sqlite3.connect(path) as raw:
        for position, digest in enumerate(digests):
            raw.execute(
                "UPDATE run_sources SET turn_digest = ? WHERE position = ?", (digest, position)
            )
    raw.close()


@pytest.mark.parametrize(
    "digests",
    [(bytes(32),), (bytes(31),), (b"y" * 33,), ("x" * 32,), (bytes(31), bytes(33))],
    ids=["other-digest", "short", "long", "text", "lengths-that-make-up"],
)
def test_a_damaged_source_index_is_not_extended_but_rebased(
    tmp_path: Path, digests: tuple[object, ...]
) -> None:
    """Regression: the stored digests of a summary's sources were trusted when read back, so
    after a damaged row an extension was accepted bound to a fingerprint its sources do not
    have (the context then served it), or the compaction raised `InvalidInput`/`TypeError`.
    Now digests that do not reproduce the summary's fingerprint make a rebase due."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        _say(store, "c", 10)
        first = _compact(store)
    _damage_index(path, *digests)
    with lf.SQLiteStore(path) as store:  # a cold cache: the digests come from the index
        _say(store, "c", 3)
        rebase = _compact(store)
        assert rebase.parent_id is None and set(first.source_ids) <= set(rebase.source_ids)
        assert rebase.source_fingerprint == _reference(store, rebase)
        assert lf.check_summary(rebase, store.load("c"), VERSION).current
        assert store.context("c", VERSION).summary is not None
        # The rebase wrote a new index: the loop rolls on from it.
        _say(store, "c", 3)
        rolled = _compact(store)
        assert rolled.parent_id == rebase.id
        assert rolled.source_fingerprint == _reference(store, rolled)


def test_a_commit_on_a_store_reading_a_damaged_index_checks_the_whole_ledger(
    tmp_path: Path,
) -> None:
    """The compaction began on a store whose cache holds the true digests; the index is
    damaged; another store (cold) commits. Its fast path cannot be trusted, so the envelope
    is checked on the ledger: accepted, with the reference fingerprint (it was refused as
    `source-modified` before: an honest result lost)."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as warm, lf.SQLiteStore(path) as cold:
        _say(warm, "c", 10)
        _compact(warm)
        _say(warm, "c", 3)
        work = warm.begin_compaction("c", 2, VERSION)
        assert work.parent is not None and isinstance(work.parent_digests, SourceDigests)
        _damage_index(path, bytes(32))
        plan = work.plan
        assert plan is not None
        envelope = lf.SummaryEnvelope(
            id="s2",
            plan_id=plan.plan_id,
            conversation_id="c",
            source_revision=plan.source_revision,
            source_ids=plan.compacted_ids,
            source_fingerprint=extended_fingerprint(work.parent_digests, work.new_turns),
            policy_version=VERSION,
            text="extends",
            parent_id=work.parent.id,
        )
        write = cold.commit_summary(envelope)
        assert write.accepted, write
        assert envelope.source_fingerprint == _reference(cold, envelope)


def test_a_damaged_index_of_a_sealed_summary_leaves_it_sealed(tmp_path: Path) -> None:
    """The rebase a damaged index makes due never supersedes a sealed summary (it holds what
    the purged turns said): nothing is compacted instead, and no extension is accepted."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        _say(store, "c", 10)
        sealed = _compact(store)
        store.purge_through("c", 3, "retention")
    with sqlite3.connect(path) as raw:  # a live source's digest (position 5: turn5)
        raw.execute("UPDATE run_sources SET turn_digest = ? WHERE position = 5", (bytes(32),))
    raw.close()
    with lf.SQLiteStore(path) as store:
        _say(store, "c", 3)
        outcome = lf.Compactor(store, POLICY, lambda request: "summary").compact("c")
        assert not outcome.accepted
        current = store.current_summary("c")
        assert current is not None and current.id == sealed.id


# -- forged envelopes (SPEC §15.4) ------------------------------------------------------------


def _begin(store: lf.SQLiteStore, cid: str) -> tuple[lf.CompactionPlan, CompactionWork]:
    work = store.begin_compaction(cid, 2, VERSION)
    assert work.plan is not None and work.parent is not None
    return work.plan, work


def _forged(work: CompactionWork, summary_id: str, **changes: Any) -> lf.SummaryEnvelope:
    plan = work.plan
    assert plan is not None and work.parent is not None
    honest = lf.SummaryEnvelope(
        id=summary_id,
        plan_id=plan.plan_id,
        conversation_id=plan.conversation_id,
        source_revision=plan.source_revision,
        source_ids=plan.compacted_ids,
        source_fingerprint=extended_fingerprint(work.parent_digests, work.new_turns),
        policy_version=VERSION,
        text="forged",
        parent_id=work.parent.id,
    )
    return dataclasses.replace(honest, **changes)


def test_forged_envelopes_on_the_plans_own_tuple_are_refused(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _say(store, "c", 10)
        oldest = _compact(store)
        _say(store, "c", 3)
        _compact(store)
        _say(store, "c", 3)
        cases = [
            ({"source_fingerprint": "lf1:" + "0" * 64}, ("stale-source", "source-modified")),
            ({"parent_id": oldest.id}, ("invalid-summary", "plan-mismatch")),
            ({"parent_id": "nobody"}, ("invalid-summary", "plan-mismatch")),
            ({"policy_version": "v2"}, ("stale-source", "policy-mismatch")),
            ({"conversation_id": "other"}, ("stale-source", "superseded-plan")),
        ]
        for number, (changes, verdict) in enumerate(cases):
            plan, work = _begin(store, "c")
            envelope = _forged(work, f"forged-{number}", **changes)
            assert envelope.source_ids is plan.compacted_ids  # the memo's very tuple
            write = store.commit_summary(envelope)
            assert (write.accepted, write.reason, write.detail) == (False, *verdict), changes
        # The honest one still goes through after all that.
        _, work = _begin(store, "c")
        honest = _forged(work, "honest")
        assert store.commit_summary(honest).accepted
        assert honest.source_fingerprint == _reference(store, honest)


@pytest.mark.parametrize("bad", ["\ud800", 7, None])
@pytest.mark.parametrize("late", [False, True], ids=["extension", "late-result"])
def test_a_source_id_sqlite_cannot_take_is_invalid_input(
    tmp_path: Path, bad: object, late: bool
) -> None:
    """Regression: a lone surrogate among an extension's new IDs (or anywhere in a result
    refused before its sources are checked, whose record stores them) raised the driver's
    `UnicodeEncodeError` out of `commit_summary`; an int or None was refused as
    `source-missing` on the fast path while the ledger check calls it `InvalidInput`. Now it
    is `InvalidInput` naming `summary.source_ids` on every path, and nothing is written."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _say(store, "c", 10)
        _compact(store)
        _say(store, "c", 3)
        plan, work = _begin(store, "c")
        forged = _forged(
            work,
            "forged",
            source_ids=(*plan.compacted_ids, bad),
            plan_id="an-older-plan" if late else plan.plan_id,
        )
        history = store.summary_history("c")
        with pytest.raises(lf.InvalidInput) as raised:
            store.commit_summary(forged)
        assert raised.value.field == "summary.source_ids"
        assert store.summary_history("c") == history
        honest = _forged(work, "honest")  # the plan is still the active one
        assert store.commit_summary(honest).accepted
        assert honest.source_fingerprint == _reference(store, honest)


def test_a_tuple_built_for_another_conversation_is_refused(tmp_path: Path) -> None:
    """Two conversations with the same turn IDs and covered digests: an envelope for one made
    of the other's plan tuple and fingerprint state (same IDs, other new bodies) is refused
    by the fingerprint, whatever the memo remembers."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        for cid in ("c", "d"):
            _say(store, cid, 10)
            _compact(store, cid)
        store.append_many("c", [{"id": "n", "role": "user", "body": "c's own"}] * 1)
        store.append_many("d", [{"id": "n", "role": "user", "body": "d's own"}] * 1)
        _say(store, "c", 2, stem="tail")
        _say(store, "d", 2, stem="tail")
        _, work_c = _begin(store, "c")
        plan_d, work_d = _begin(store, "d")  # built last: the memo holds d's tuple
        assert work_d.parent is not None
        assert planning.starts_with_ids(plan_d.compacted_ids, work_d.parent.source_ids)
        forged = _forged(
            work_c,
            "forged",
            source_ids=plan_d.compacted_ids,
            source_fingerprint=extended_fingerprint(work_d.parent_digests, work_d.new_turns),
        )
        write = store.commit_summary(forged)
        assert (write.reason, write.detail) == ("stale-source", "source-modified")
        _, work_c = _begin(store, "c")
        honest = _forged(work_c, "honest")
        assert store.commit_summary(honest).accepted
        assert honest.source_fingerprint == _reference(store, honest)


def test_the_memo_does_not_vouch_for_another_conversations_prefix(tmp_path: Path) -> None:
    """The memo holds `d`'s plan tuple (d's covered IDs + new IDs); `c` has as many covered
    turns, other IDs, and the same new turns. An envelope for `c` on `d`'s tuple, with the
    fingerprint `c`'s parent state and new turns give, names sources `c` does not have: the
    memo must not take it for a tuple that starts with `c`'s covered IDs."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        same = [{"id": f"n{i}", "role": "user", "body": "same"} for i in range(6)]
        for cid in ("c", "d"):
            _say(store, cid, 8, stem=f"{cid}-")
            store.append_many(cid, same[:2])  # the tail the first compaction leaves raw
            _compact(store, cid)
            store.append_many(cid, same[2:])
        _, work_c = _begin(store, "c")
        plan_d, work_d = _begin(store, "d")  # built last: the memo holds d's tuple
        assert work_c.parent is not None and work_d.parent is not None
        assert len(work_c.parent.source_ids) == len(work_d.parent.source_ids)
        assert work_c.new_turns == work_d.new_turns
        forged = _forged(work_c, "forged", source_ids=plan_d.compacted_ids)
        write = store.commit_summary(forged)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "stale-source",
            "source-missing",
        )


def test_threads_rolling_two_conversations_keep_every_fingerprint(tmp_path: Path) -> None:
    """Rolling compactions of two conversations on one store from two threads (each tuple
    `extend_ids` builds carries its own prefix; no shared memo to overwrite): every accepted
    version has its reference fingerprint."""
    errors: list[BaseException] = []
    accepted: list[lf.SummaryEnvelope] = []
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:

        def loop(cid: str) -> None:
            try:
                compactor = lf.Compactor(store, POLICY, lambda request: "summary")
                for _ in range(25):
                    _say(store, cid, 2)
                    outcome = compactor.compact(cid)
                    if outcome.accepted and outcome.summary is not None:
                        accepted.append(outcome.summary)
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=loop, args=(cid,)) for cid in ("c", "d")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert sum(envelope.parent_id is not None for envelope in accepted) > 30
        for envelope in accepted:
            assert envelope.source_fingerprint == _reference(store, envelope)


# -- a store of one's own handing plain bytes ---------------------------------------------------


class BytesStore:
    """A `Store` that delegates to `SQLiteStore` but hands `parent_digests` as plain bytes
    (32 per source, read from the index), as a store without `SourceDigests` would."""

    def __init__(self, inner: lf.SQLiteStore) -> None:
        self.inner = inner
        self.handed: list[type] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def begin_compaction(self, *args: Any, **kwargs: Any) -> CompactionWork:
        work = self.inner.begin_compaction(*args, **kwargs)
        if work.parent is None:
            return work
        rows = self.inner._connection().execute(
            "SELECT ss.turn_digest FROM summary_sources ss JOIN summaries s"
            " ON s.pk = ss.summary_pk WHERE s.id = ? ORDER BY ss.position",
            (work.parent.id,),
        )
        digests = b"".join(row[0] for row in rows)
        self.handed.append(type(digests))
        return dataclasses.replace(work, parent_digests=digests)


def test_a_store_handing_bytes_rolls_with_the_compactor(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "ledger.db") as inner:
        store = BytesStore(inner)
        _say(inner, "c", 10)
        _compact(store)
        for _ in range(4):
            _say(inner, "c", 3)
            rolled = _compact(store)
            assert rolled.parent_id is not None
            assert rolled.source_fingerprint == _reference(inner, rolled)
        assert store.handed == [bytes] * 4
        assert inner.context("c", VERSION).summary is not None


# -- two processes ----------------------------------------------------------------------------

_CHILD = """
import sys
import ledgerfold as lf
path, step = sys.argv[1], sys.argv[2]
with lf.SQLiteStore(path) as store:
    if step == "recreate":
        store.delete_conversation("c")
        store.append_many("c", [
            {"id": f"turn{i}", "role": ("user", "assistant")[i % 2], "body": f"other {i}"}
            for i in range(12)
        ])
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        ids = iter(["s1", "s2"])
        lf.Compactor(store, policy, lambda r: "other", summary_id_factory=lambda: next(ids)
        ).compact("c")
    elif step == "edit":
        store.edit("c", "turn1", body="changed elsewhere")
"""


@pytest.mark.parametrize("step", ["recreate", "edit"])
def test_another_process_changing_the_conversation_under_a_warm_cache(
    tmp_path: Path, step: str
) -> None:
    """This process's cache holds the fingerprint state of `s1`; another process deletes the
    conversation and brings back the same conversation, turn and summary IDs with other
    bodies (on the reused row), or edits a covered turn. The next compaction here must not
    extend from the cached state: every accepted version keeps its reference fingerprint."""
    path = tmp_path / "ledger.db"
    ids = iter(["s1", "s2", "s3", "s4"])
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(
            store, POLICY, lambda request: "mine", summary_id_factory=lambda: next(ids)
        )
        _say(store, "c", 10)
        assert compactor.compact("c").accepted
        _say(store, "c", 2)
        assert compactor.compact("c").accepted  # s2 extends s1: the cache is warm
        subprocess.run([sys.executable, "-c", _CHILD, str(path), step], check=True, timeout=60)
        _say(store, "c", 2)
        outcome = compactor.compact("c")
        current = store.current_summary("c")
        assert current is not None
        assert current.source_fingerprint == _reference(store, current)
        if outcome.accepted and outcome.summary is not None:
            assert outcome.summary.source_fingerprint == _reference(store, outcome.summary)
        assert lf.check_summary(current, store.load("c"), VERSION).current
