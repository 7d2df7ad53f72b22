"""Adversarial stateful test of the rolling fast path (SPEC §15.1, §15.2, §15.4): the cached
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

import json
import shutil
import sqlite3
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import ledgerfold as lf
from ledgerfold import _native
from ledgerfold import _plan as planning
from ledgerfold._summary import extended_fingerprint
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store._protocol import CompactionWork

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from rolling_support import VERSION  # noqa: E402

CONVERSATIONS = ("c1", "c2")


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
        """The oldest open call gets its result, often below a (sealed)
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
        """A protected turn kept raw below the current summary's slot is
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
        it repairs the stored digest, so later summaries are fingerprinted
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
        # What went is what the store purged: a turn below the boundary may stay live (an
        # unanswered call kept raw below an earlier retention boundary, a protected turn).
        purged = self.purged_ids(cid)
        went = [
            turn for turn in model.turns.values() if turn.state != "purged" and turn.id in purged
        ]
        assert all(turn.sequence <= boundary.through_sequence for turn in went), boundary
        if not force:  # a purge takes no unanswered call (a protected one it never takes)
            taken = {turn.id for turn in went if turn.state == "live"}
            assert not taken & open_calls, (taken & open_calls, boundary)
            assert not any(turn.protected for turn in went), boundary
            still = {turn.id for turn in self.stores[at].load(cid).turns}
            assert open_calls <= still, (open_calls - still, boundary)
        for turn in went:
            turn.state = "purged"  # its content stays what it was: the sealed digest's

    def purged_ids(self, cid: str) -> set[str]:
        """The IDs of the conversation's purged turns, as the file holds them."""
        with sqlite3.connect(self.path) as conn:
            purged = {
                row[0]
                for row in conn.execute(
                    "SELECT id FROM turns WHERE conversation_id = ? AND state = 2", (cid,)
                )
            }
        conn.close()
        return purged

    @rule(at=instances, cid=conversations, retain=st.integers(0, 6))
    def apply_retention(self, at: int, cid: str, retain: int) -> None:
        """The retention policy's purge: only turns the current summary covers go (SPEC
        §15.5), so never an unanswered call, a protected turn, or a turn kept raw."""
        model = self.model[cid]
        current = self.stores[at].current_summary(cid)
        open_calls = ref._open_calls([turn.ref() for turn in model.live()])
        boundary = self.stores[at].apply_retention(cid, retain_turns=retain)
        if boundary is None:
            return
        assert current is not None, boundary
        purged = self.purged_ids(cid)
        went = [
            turn for turn in model.turns.values() if turn.state != "purged" and turn.id in purged
        ]
        gone_live = {turn.id for turn in went if turn.state == "live"}
        assert not gone_live & open_calls, (gone_live & open_calls, boundary)
        assert gone_live <= set(current.source_ids), gone_live - set(current.source_ids)
        assert not any(turn.protected for turn in went), boundary
        assert all(turn.sequence <= boundary.through_sequence for turn in went), boundary
        for turn in went:
            turn.state = "purged"  # its content stays what it was: the sealed digest's
        event("retention: purged")

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
