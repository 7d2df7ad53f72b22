"""A second backend, written as another database's author would: an in-memory `Store` (the
v1.1 protocol) over dicts, built only from ledgerfold's public names (`ledgerfold`,
`ledgerfold.store`). The shared rules run inside its "transactions"; it only keeps rows
(`memory_store_rows.py`, retention in `memory_store_retention.py`). It keeps no checkpoints
(a v1.1 store rebases after an edit) and has no recall.

`MemoryStore(bugs=...)` plants one named rule bug, so the tests can check that the shipped
contract suite (`ledgerfold.testing`) notices each of them."""

from __future__ import annotations

import copy
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold.store import CompactionWork, compaction_status

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from memory_store_retention import RetentionMethods  # noqa: E402
from memory_store_rows import (  # noqa: E402
    TURN_KEYS,
    Conversation,
    Plan,
    Record,
    bad,
    call_ids,
    check_tool_calls,
    flag,
    integer,
    now,
    text,
)

__all__ = ["BUGS", "MemoryStore", "make_store"]

#: Rule bugs a store may plant (each one breaks one rule of the contract).
BUGS = frozenset(
    {
        "accept-protected-source",  # commit accepts what the rule refuses as protected-source
        "edit-keeps-current",  # an edit marks no citing summary stale
        "append-keeps-group-split",  # a late tool result leaves the summary current
        "ignore-plan-sources",  # commit does not hold the sources to the plan's IDs
        "no-lineage",  # commit leaves out `lineage=True`: no current summary, no parent check
        "prune-failures",  # pruning drops the failed records the back-off counts
        "purge-protected",  # purge takes protected turns without force
        "retract-keeps-results",  # retracting a calling turn leaves its results
        "accept-bad-tool-calls",  # `tool_calls` meta is not checked
    }
)


class MemoryStore(RetentionMethods):
    """The `Store` protocol over dicts: every method runs under one lock on a copy of the
    conversation it changes, which replaces the original only when the method succeeds."""

    def __init__(self, *, bugs: Iterable[str] = ()) -> None:
        self.bugs = frozenset(bugs)
        assert self.bugs <= BUGS, self.bugs - BUGS
        self._lock = threading.RLock()
        self._conversations: dict[str, Conversation] = {}
        self._plans: dict[str, tuple[str, Plan]] = {}
        self._summary_ids: set[str] = set()
        self._pk = 0

    def close(self) -> None:
        """Nothing to release."""

    @contextmanager
    def _write(self, cid: str) -> Iterator[Conversation]:
        with self._lock:
            work = copy.deepcopy(self._conversations.get(cid, Conversation()))
            plans, summary_ids = dict(self._plans), set(self._summary_ids)
            try:
                yield work
            except BaseException:  # all or nothing: the plans and IDs as they were
                self._plans, self._summary_ids = plans, summary_ids
                raise
            self._conversations[cid] = work

    def _read(self, cid: str) -> Conversation:
        return self._conversations.get(cid, Conversation())

    def _next_pk(self) -> int:
        self._pk += 1
        return self._pk

    # -- the ledger -------------------------------------------------------------------

    def append(self, conversation_id: str, role: str, body: str, **keywords: Any) -> lf.Turn:
        spec = {"role": role, "body": body, **keywords}
        try:
            return self._append(conversation_id, [spec], prefix=False)[0]
        except lf.InvalidInput:
            raise

    def append_many(
        self, conversation_id: str, turns: Iterable[Mapping[str, Any]]
    ) -> list[lf.Turn]:
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
            raise bad("turns", "must be an iterable of mappings", "wrong-type")
        return self._append(conversation_id, list(turns), prefix=True)

    def _append(self, cid: str, specs: list[Any], *, prefix: bool) -> list[lf.Turn]:
        cid = text("conversation_id", cid)
        with self._write(cid) as conv:
            made: list[lf.Turn] = []
            for index, spec in enumerate(specs):
                name = f"turns[{index}]" if prefix else ""
                made.append(self._turn(conv, spec, name))
            if not made:
                return []
            conv.revision += 1
            self._recheck_current(cid, conv)
            return made

    def _turn(self, conv: Conversation, spec: Any, name: str) -> lf.Turn:
        def at(key: str) -> str:
            return f"{name}.{key}" if name else key

        if not isinstance(spec, Mapping):
            raise bad(name or "turn", "must be a mapping", "wrong-type")
        for key in spec:
            if key not in (*TURN_KEYS, "sequence"):
                raise bad(at(str(key)), "unknown field", "unknown-field")
        for key in ("role", "body"):
            if key not in spec:
                raise bad(at(key), "is required", "missing")
        turn_id = spec.get("id")
        turn_id = f"t-{uuid.uuid4().hex}" if turn_id is None else text(at("id"), turn_id)
        if turn_id in conv.turns:
            raise lf.DuplicateId(
                f"{at('id')}: {turn_id!r} is already in the conversation", id=turn_id
            )
        sequence = spec.get("sequence")
        if sequence is None:
            sequence = conv.high + 1
        elif integer(at("sequence"), sequence, 0) <= conv.high:
            raise bad(at("sequence"), "must exceed every sequence written")
        if "accept-bad-tool-calls" not in self.bugs:
            check_tool_calls(at("meta"), spec.get("meta"))
        fields = {k: spec[k] for k in TURN_KEYS if k in spec and k != "id"}
        try:
            turn = lf.Turn(turn_id, sequence, **fields)
        except lf.InvalidInput as error:
            raise bad(at(error.field or "turn"), str(error), error.problem or "invalid") from None
        conv.turns[turn.id], conv.state[turn.id] = turn, "live"
        conv.created[turn.id] = datetime.now(UTC)
        conv.high = sequence
        return turn

    def _recheck_current(self, cid: str, conv: Conversation) -> None:
        """An append or edit that splits a unit of the current summary (a late tool result:
        SPEC §15.4, §17.2) makes it stale now: its check against the ledger says so."""
        current = conv.current()
        if current is None or "append-keeps-group-split" in self.bugs:
            return
        assert current.envelope is not None
        check = lf.check_summary(
            current.envelope,
            conv.load(cid),
            current.envelope.policy_version,
            sealed=conv.sealed(current),
        )
        if not check.current:
            conv.mark(current, "stale", check.reason)

    def _live_turn(self, conv: Conversation, turn_id: object) -> lf.Turn:
        turn_id = text("turn_id", turn_id)
        if conv.state.get(turn_id) != "live":
            raise bad("turn_id", f"no live turn {turn_id!r}", "unknown")
        return conv.turns[turn_id]

    def edit(self, conversation_id: str, turn_id: str, **changes: Any) -> lf.Turn:
        cid = text("conversation_id", conversation_id)
        for key in changes:
            if key not in TURN_KEYS or key == "id":
                raise bad(key, "cannot be edited", "not-allowed")
        with self._write(cid) as conv:
            old = self._live_turn(conv, turn_id)
            if "accept-bad-tool-calls" not in self.bugs:
                check_tool_calls("meta", changes.get("meta", old.meta))
            new = old.replace(**changes)
            conv.turns[old.id] = new
            conv.revision += 1
            if new.digest != old.digest and "edit-keeps-current" not in self.bugs:
                for record in self._citing(conv, old.id):
                    if record.status != "stale":
                        conv.mark(record, "stale", "source-modified")
            self._recheck_current(cid, conv)
            return new

    def _citing(self, conv: Conversation, turn_id: str) -> list[Record]:
        return [
            r
            for r in conv.history
            if r.envelope is not None
            and r.status in ("current", "superseded", "stale")
            and turn_id in r.envelope.source_ids
        ]

    def retract(self, conversation_id: str, turn_id: str, *, erase: bool = False) -> None:
        cid = text("conversation_id", conversation_id)
        flag("erase", erase)
        with self._write(cid) as conv:
            if erase and conv.state.get(str(turn_id)) == "retracted":
                gone = [conv.turns[str(turn_id)]]
            else:
                gone = [self._live_turn(conv, turn_id)]
            if "retract-keeps-results" not in self.bugs:  # SPEC §17.2: a call's results go too
                gone += _own_results(list(conv.live()), gone[0])
            for turn in gone:
                conv.state[turn.id] = "retracted"
                if erase:
                    conv.turns[turn.id] = turn.replace(body="")
                for record in self._citing(conv, turn.id):
                    conv.mark(record, "stale", "source-missing")
            conv.revision += 1

    def load(self, conversation_id: str) -> lf.Conversation:
        cid = text("conversation_id", conversation_id)
        with self._lock:
            return self._read(cid).load(cid)

    def get_turns(self, conversation_id: str, turn_ids: Iterable[str]) -> list[lf.Turn]:
        wanted = set(turn_ids)
        return [t for t in self.load(conversation_id).turns if t.id in wanted]

    def conversation_ids(self) -> list[str]:
        with self._lock:
            return sorted(c for c, conv in self._conversations.items() if conv.turns)

    # -- plans and commits ---------------------------------------------------------------

    def start_plan(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        plan_id: str | None = None,
        *,
        preserve_roles: Iterable[str] = (),
    ) -> lf.CompactionPlan:
        cid = text("conversation_id", conversation_id)
        integer("keep_tail", keep_tail, 1)
        policy_version = text("policy_version", policy_version)
        plan_id = f"plan-{uuid.uuid4().hex}" if plan_id is None else text("plan_id", plan_id)
        roles = tuple(preserve_roles)
        with self._lock:
            if cid not in self._conversations or not self._conversations[cid].turns:
                # An unknown conversation: the empty plan, nothing registered (as SQLiteStore).
                return lf.plan_compaction(lf.Conversation(cid, 0, []), keep_tail, plan_id)
        with self._write(cid) as conv:
            plan = lf.plan_compaction(conv.load(cid), keep_tail, plan_id, preserve_roles=roles)
            self._register(cid, conv, Plan(plan, policy_version, roles, None))
            return plan

    def _register(self, cid: str, conv: Conversation, planned: Plan) -> None:
        plan_id = planned.plan.plan_id
        if plan_id in self._plans:
            raise bad("plan_id", f"plan {plan_id!r} already exists", "duplicate")
        previous = conv.active
        if previous is not None and not self._plans[previous][1].ended:
            conv.history.append(
                Record(self._next_pk(), previous, None, "failed", "abandoned", now())
            )
            self._end(previous)
        self._plans[plan_id] = (cid, planned)
        conv.active = plan_id

    def _end(self, plan_id: str) -> None:
        cid, planned = self._plans[plan_id]
        self._plans[plan_id] = (cid, replace(planned, ended=True))

    def begin_compaction(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        *,
        preserve_roles: Iterable[str] = (),
        min_new_turns: int = 1,
        only_due_at_once: bool = False,
        plan_id: str | None = None,
    ) -> CompactionWork:
        cid = text("conversation_id", conversation_id)
        integer("keep_tail", keep_tail, 1)
        policy_version = text("policy_version", policy_version)
        integer("min_new_turns", min_new_turns, 1)
        flag("only_due_at_once", only_due_at_once)
        plan_id = f"plan-{uuid.uuid4().hex}" if plan_id is None else text("plan_id", plan_id)
        roles = tuple(preserve_roles)
        with self._write(cid) as conv:
            failures = self._failures(conv)
            conversation = conv.load(cid)
            plan = lf.plan_compaction(conversation, keep_tail, plan_id, preserve_roles=roles)
            current = conv.current()
            parent: lf.SummaryEnvelope | None = None
            rebase_due = relayout = backlog = False
            digests = b""
            compacted = plan.compacted_ids
            if current is not None and current.envelope is not None:
                envelope = current.envelope
                sealed = conv.sealed(current)
                relayout = any(conv.state.get(i) == "retracted" for i in current.kept)
                live_sources = [i for i in envelope.source_ids if i not in sealed]
                if envelope.policy_version != policy_version:
                    pass  # another policy's summary: a rebase, not due at once
                elif set(live_sources) <= set(plan.compacted_ids) and not (
                    # Nothing to extend it with: laid out anew (SPEC §17.3) by a rebase, or,
                    # sealed, by an extension adding no turn (§17.5: never rebased away).
                    relayout
                    and not set(plan.compacted_ids) - set(envelope.source_ids)
                    and not sealed
                ):
                    parent = envelope
                    digests = b"".join(d for _, d in current.digests)
                    added = [i for i in plan.compacted_ids if i not in set(envelope.source_ids)]
                    merged = sorted(
                        live_sources + added, key=lambda i: conversation.get(i).sequence
                    )  # type: ignore[union-attr]
                    compacted = tuple(i for i in envelope.source_ids if i in sealed) + tuple(merged)
                    _, parent_plan = self._plans[envelope.plan_id]
                    through = (
                        max(conversation.get(i).sequence for i in live_sources)
                        if live_sources
                        else 0
                    )  # type: ignore[union-attr]
                    backlog = parent_plan.plan.through_sequence > through
                elif sealed:  # never rebase a sealed summary away
                    return CompactionWork("nothing-to-compact", failures=failures)
                else:
                    rebase_due = True
            covered = set() if parent is None else set(parent.source_ids)
            new_turns = tuple(
                t for t in conversation.turns if t.id in compacted and t.id not in covered
            )
            relaid = relayout and parent is not None and not new_turns
            status = compaction_status(
                len(new_turns) or int(relaid),
                min_new_turns,
                rebase_due=rebase_due,
                backlog_left=backlog,
                relayout=relayout,
                failures=failures,
                only_due_at_once=only_due_at_once,
            )
            if status != "ready":
                return CompactionWork(status, failures=failures)
            plan = replace(plan, compacted_ids=compacted)
            self._register(
                cid, conv, Plan(plan, policy_version, roles, None if parent is None else parent.id)
            )
            return CompactionWork("ready", plan, parent, digests, new_turns, failures)

    def _failures(self, conv: Conversation) -> int:
        count = 0
        for record in reversed(conv.history):
            if record.envelope is not None and record.status != "rejected":
                break
            count += record.status == "failed"
        return count

    def consecutive_failures(self, conversation_id: str) -> int:
        cid = text("conversation_id", conversation_id)
        with self._lock:
            return self._failures(self._read(cid))

    def commit_summary(self, envelope: lf.SummaryEnvelope | None) -> lf.SummaryWrite:
        if envelope is None:
            return lf.SummaryWrite(False, None, "invalid-summary", None)
        if not isinstance(envelope, lf.SummaryEnvelope):
            raise bad("envelope", "must be a SummaryEnvelope", "wrong-type")
        cid = envelope.conversation_id
        with self._write(cid) as conv:
            if envelope.id in self._summary_ids:
                raise bad("envelope.id", f"summary {envelope.id!r} already exists", "duplicate")
            owner, planned = self._plans.get(envelope.plan_id, (None, None))
            conversation = conv.load(cid)
            current = conv.current()
            current_envelope = None if current is None else current.envelope
            stored = {} if current is None else dict(current.digests)
            sealed = {i: d for i, d in stored.items() if conv.state.get(i) == "purged"}
            if planned is None or owner != cid or conv.active != envelope.plan_id:
                write = lf.SummaryWrite(False, envelope, "stale-source", "superseded-plan")
            else:
                write = lf.accept_summary_result(
                    envelope,
                    conversation,
                    planned.policy_version,
                    conv.active,
                    plan=None if "ignore-plan-sources" in self.bugs else planned.plan,
                    current=current_envelope,
                    # None: the conversation has no current summary (not "skip the rules").
                    lineage=None if "no-lineage" in self.bugs else True,
                    sealed=sealed,
                    preserve_roles=() if "accept-protected-source" in self.bugs else planned.roles,
                )
                if "accept-protected-source" in self.bugs and write.detail == "protected-source":
                    write = lf.SummaryWrite(True, envelope, None, None)
            self._summary_ids.add(envelope.id)
            if planned is not None and owner == cid:
                self._end(envelope.plan_id)
            if not write.accepted:
                conv.history.append(
                    Record(
                        self._next_pk(),
                        envelope.plan_id,
                        envelope,
                        "rejected",
                        write.detail,
                        now(),
                    )
                )
                return write
            if current is not None:
                conv.mark(current, "superseded", None)
            conv.active = None
            digests = tuple(
                (i, sealed[i] if i in sealed else conversation.get(i).digest)  # type: ignore[union-attr]
                for i in envelope.source_ids
            )
            live = [conversation.get(i).sequence for i in envelope.source_ids if i not in sealed]  # type: ignore[union-attr]
            assert planned is not None
            kept = tuple(
                t.id
                for t in conversation.turns
                if live
                and t.sequence < max(live)
                and t.id not in set(envelope.source_ids)
                and (t.protected or t.role in planned.roles)
            )
            if not live and current is not None:  # every source sealed: the parent's slot
                kept = tuple(i for i in current.kept if conversation.get(i) is not None)
            conv.history.append(
                Record(
                    self._next_pk(),
                    envelope.plan_id,
                    envelope,
                    "current",
                    None,
                    now(),
                    digests,
                    kept,
                )
            )
            return write

    def record_failure(self, plan_id: str, reason: str) -> None:
        plan_id = text("plan_id", plan_id)
        reason = text("reason", reason)
        with self._lock:
            if plan_id not in self._plans:
                raise bad("plan_id", f"unknown plan {plan_id!r}", "unknown")
            cid = self._plans[plan_id][0]
        with self._write(cid) as conv:
            conv.history.append(Record(self._next_pk(), plan_id, None, "failed", reason, now()))
            self._end(plan_id)

    # -- reads ------------------------------------------------------------------------------

    def current_summary(self, conversation_id: str) -> lf.SummaryEnvelope | None:
        cid = text("conversation_id", conversation_id)
        with self._lock:
            current = self._read(cid).current()
            return None if current is None else current.envelope

    def summary_history(self, conversation_id: str) -> list[lf.SummaryRecord]:
        cid = text("conversation_id", conversation_id)
        with self._lock:
            return [
                lf.SummaryRecord(r.envelope, r.status, r.reason, r.created_at, r.plan_id)
                for r in self._read(cid).history
            ]

    def _find(self, summary_id: object) -> tuple[str, Conversation, Record]:
        summary_id = text("summary_id", summary_id)
        for cid, conv in self._conversations.items():
            for record in conv.history:
                if record.envelope is not None and record.envelope.id == summary_id:
                    return cid, conv, record
        raise bad("summary_id", f"unknown summary {summary_id!r}", "unknown")

    def sources_of(self, summary_id: str) -> list[lf.Turn]:
        with self._lock:
            _, conv, record = self._find(summary_id)
            assert record.envelope is not None
            return [
                conv.turns[i] for i in record.envelope.source_ids if conv.state.get(i) == "live"
            ]

    def summaries_citing(self, conversation_id: str, turn_id: str) -> list[str]:
        cid = text("conversation_id", conversation_id)
        turn_id = text("turn_id", turn_id)
        with self._lock:
            return [r.envelope.id for r in self._citing(self._read(cid), turn_id)]  # type: ignore[union-attr]

    def context(self, conversation_id: str, policy_version: str) -> lf.AssembledContext:
        cid = text("conversation_id", conversation_id)
        policy_version = text("policy_version", policy_version)
        with self._lock:
            conv = self._read(cid)
            conversation = conv.load(cid)
            pointed = conv.pointed()
            if pointed is None or pointed.status == "stale":
                raw = lf.assemble_context(conversation, None, policy_version)
                fallback = "no-summary" if pointed is None else f"stale-summary:{pointed.reason}"
                return replace(raw, fallback=fallback, history_boundary=conv.boundary)
            kept = [i for i in pointed.kept if conv.state.get(i) != "purged"]
            assembled = lf.assemble_context(
                conversation, pointed.envelope, policy_version, kept, sealed=conv.sealed(pointed)
            )
            return replace(assembled, history_boundary=conv.boundary)

    def history_boundary(self, conversation_id: str) -> lf.HistoryBoundary | None:
        cid = text("conversation_id", conversation_id)
        with self._lock:
            return self._read(cid).boundary


def make_store(tmp_path: object) -> MemoryStore:
    """The factory for `python -m ledgerfold.testing memory_store:make_store`."""
    return MemoryStore()


def _own_results(live: list[lf.Turn], caller: lf.Turn) -> list[lf.Turn]:
    """The live tool turns answering `caller`'s calls (SPEC §17.2): a result answers the
    nearest live call of its ID before it, else (stored before its call) the first after it."""
    own: list[lf.Turn] = []
    for call_id in call_ids(caller):
        calls = [t.sequence for t in live if call_id in call_ids(t)]
        for turn in live:
            if turn.role != "tool" or (turn.meta or {}).get("tool_call_id") != call_id:
                continue
            before = [at for at in calls if at < turn.sequence]
            paired = before[-1] if before else min(calls, default=None)
            if paired == caller.sequence:
                own.append(turn)
    return own
