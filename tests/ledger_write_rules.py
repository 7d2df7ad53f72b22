"""The stateful test's rules that write the ledger: appends (protected, tool calls and
results, hostile IDs), edits, protect/unprotect, retractions, deletes, purges and rejected
bad input, each mirrored in the model."""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

import ledgerfold as lf

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402
from ledger_machine import LedgerMachineBase  # noqa: E402
from ledger_model import (  # noqa: E402
    CONVERSATIONS,
    REASONS,
    ROLES,
    SECRET,
    ModelConversation,
    ModelTurn,
    _meta,
    bodies,
    conversations,
    groups,
    metas,
    picks,
    protections,
)


class LedgerWriteRules(LedgerMachineBase):
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
        """The late result of the oldest open call joins its group; with the call below a
        (sealed) summary's slot, compaction must go on (SPEC §17.5)."""
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
        """A pending confirmation kept raw below the current summary's slot is resolved; the
        summary, sealed or not, is extended over it (SPEC §17.5)."""
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
        """Where a purge without force stops (SPEC §17.2, §17.7): before any compaction unit
        (of the reference) it would take part of while another member stays live, raw or
        covered by the sealed summary (a purged call's meta goes, so a later erasure of the
        call could not find a result left live), before an unanswered call, and before a
        kept-role turn the sealed summary covers."""
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
                if len(taken) < len(members) or any(t.id in open_calls for t in taken):
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
        taken = [
            t
            for t in [*model.turns, *model.retracted]
            if t.sequence <= through and (force or not t.protected) and t.role not in keep
        ]
        # A purge of nothing returns the boundary the conversation has, if any.
        expected = model.boundary if not taken and model.boundary is not None else None
        assert (boundary.through_sequence, boundary.reason) == (expected or (recorded, reason))
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
        # Kept whether or not a current summary was sealed (a stale one is not): the newest
        # version whose sources are all purged, unchanged (SPEC §17.5), checked below.
        assert len(bases) <= 1
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
        assert self.store.pruned_count(conversation) == model.erased
        if not taken:  # nothing purged: no boundary, no new revision (SPEC §8)
            return
        model.revision += 1
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
