"""SPEC §17.5 under §15.1, §15.4 and §15.5, as a state machine on a real SQLite file: appends,
edits of covered turns (recent and old), protection, retractions, erasures, purges,
retention, pruning, bodies changed outside ledgerfold then revalidated, compactions that
fail (the summarizer raises, returns a blank or an overlong text) and compactions on two
connections, one of them changing the ledger while the other's summarizer is writing.

After every step: no summarizer request held text the ledger no longer says (its turns, and
every text its previous summary was built from), the context uses no stale summary, every
accepted version covers exactly the turns its text was built from, and no erased body (nor
a purged turn's earlier version) is anywhere in the file."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import ledgerfold as lf
from ledgerfold.revalidate import revalidate_database

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from checkpoint_machine import CONV, PV, Model, ModelTurn, Recorder, body, file_texts  # noqa: E402

picks = st.integers(0, 10_000)
MODES = st.sampled_from(["ok", "ok", "ok", "ok", "raise", "blank", "long"])


class CheckpointMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="ledgerfold-checkpoints-"))
        self.path = self.directory / "ledger.db"
        self.stores = [lf.SQLiteStore(self.path), lf.SQLiteStore(self.path)]
        self.model = Model()
        self.pending: list[str] = []  # calls awaiting their result
        self.answers: dict[str, list[str]] = {}  # call turn -> its results
        self.recorder = Recorder(self.model)
        self.sealed: set[str] = set()  # the sources of the newest version wholly purged
        self.policy = lf.CompactionPolicy(
            PV,
            keep_tail=2,
            min_new_turns=2,
            keep_versions=1,
            keep_checkpoints=3,
            max_summary_tokens=3_000,
        )

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def _pick(self, turns: list[ModelTurn], pick: int) -> ModelTurn | None:
        return turns[pick % len(turns)] if turns else None

    def _covered(self) -> list[ModelTurn]:
        summary = self.stores[0].current_summary(CONV)
        if summary is None:
            return []
        live = {t.id: t for t in self.model.live()}
        return [live[i] for i in summary.source_ids if i in live]

    def _edit(self, turn: ModelTurn, store: int = 0) -> None:
        token = self.model.new_token(turn.id)
        self.stores[store].edit(CONV, turn.id, body=body(token))
        turn.tokens.append(token)

    def _gone(self, turn: ModelTurn, state: str) -> None:
        """A retraction: of a live call, its live results too (SPEC §17.2); an erasure of
        a call, its retracted results too. A purged call has no live result (a purge
        splits no unit: `no_purge_leaves_a_result_of_a_call_it_took`)."""
        was_live = turn.state == "live"
        turn.state = state
        for result in (self.model.turns[i] for i in self.answers.get(turn.id, ())):
            taken = was_live if result.state == "live" else result.state == "retracted"
            if taken and (result.state == "live" or state == "erased"):
                result.state = state

    def _settle(self, pick: int, expected: str | None = None) -> None:
        """The agent loop: a compaction after each change, on either connection. When the
        summary went stale and a version it was built on is kept with its sources all
        unchanged and compactable, the compaction extends the newest such one (SPEC §17.5)."""
        force = pick % 3 == 0
        expected = expected or self._checkpoint()
        if expected is not None and not force and self._backed_off():
            expected = None  # a rebuild waits out the back-off as a rebase would (§15.8)
        outcome = lf.Compactor(self.stores[pick % 2], self.policy, self.recorder).compact(
            CONV, force=force
        )
        if expected is not None:
            assert outcome.accepted and outcome.summary is not None, outcome
            assert outcome.summary.parent_id == expected, outcome.summary.parent_id

    def _checkpoint(self) -> str | None:
        """The ID of the checkpoint the next compaction must extend, or None when the
        summary is not stale or no kept ancestor is usable."""
        context = self.stores[0].context(CONV, PV)
        if context.fallback is None or context.fallback == "preserved-missing":
            return None
        history = self.stores[0].summary_history(CONV)
        accepted = [r for r in history if r.status in ("current", "superseded", "stale")]
        if context.fallback == "no-summary":  # an erasure took it: every version left
            lineage = [r.envelope.text for r in reversed(accepted) if r.envelope is not None]
        else:
            head = accepted[-1] if accepted else None  # the version the pointer designates
            if head is None or head.envelope is None or head.status != "stale":
                return None
            lineage = self.recorder.ancestors(head.envelope.text)
            if any(self.model.turns[i].state == "purged" for i in head.envelope.source_ids):
                # Sealed: itself first, when its sources were edited back (SPEC §17.5).
                lineage = [head.envelope.text, *lineage]
        plan = lf.plan_compaction(
            self.stores[0].load(CONV), self.policy.keep_tail, "oracle", preserve_roles=("system",)
        )
        compacted = set(plan.compacted_ids)
        kept = {
            r.envelope.text: r.envelope for r in history if r.envelope and r.status != "rejected"
        }
        for text in lineage:  # newest first
            version = kept.get(text)
            if version is None:
                if any(
                    self.model.turns[i].state in ("purged", "erased")
                    for i in self.recorder.derived[text]
                ):
                    # Erased with a turn it was built on: the link through it is gone, and
                    # the store may no longer know the older ones for ancestors (a rebase).
                    break
                continue  # pruned: the store keeps the links to what pruning kept
            derived = self.recorder.derived[text]
            if not all(self.model.sound(i, token) for i, token in derived.items()):
                continue
            live = [i for i in version.source_ids if self.model.turns[i].state == "live"]
            if not set(live) <= compacted:  # coverage never shrinks
                continue
            if compacted - set(live):  # something to extend it with
                return version.id
        return None

    def _backed_off(self) -> bool:
        """Whether the back-off keeps an unforced rebuild waiting: after k consecutive
        failures it is due, as the rebase it stands for, once the plan compacts
        `min_new_turns × 2^k` turns (SPEC §15.8, `tests/test_rebuild_backoff.py`)."""
        failures = self.stores[0].consecutive_failures(CONV)
        if not failures:
            return False
        plan = lf.plan_compaction(
            self.stores[0].load(CONV), self.policy.keep_tail, "oracle", preserve_roles=("system",)
        )
        return len(plan.compacted_ids) < self.policy.min_new_turns << min(failures, 6)

    # ------------------------------------------------------------------ rules

    @initialize(rounds=st.integers(1, 6))
    def history(self, rounds: int) -> None:
        for round_ in range(rounds):
            self.append(3, False)
            self._settle(round_)

    @rule(count=st.integers(1, 4), protected=st.booleans())
    def append(self, count: int, protected: bool) -> None:
        for k in range(count):
            turn_id = f"t{self.model.written}"
            self.model.written += 1
            token = self.model.new_token(turn_id)
            guarded = protected and k == 0
            turn = self.stores[0].append(
                CONV,
                "user" if self.model.written % 2 else "assistant",
                body(token),
                id=turn_id,
                protected=guarded,
                protection_reason="pending-confirmation" if guarded else None,
            )
            self.model.turns[turn_id] = ModelTurn(
                turn_id, turn.sequence, turn.role, [token], protected=guarded
            )

    @rule(answer_now=st.booleans())
    def call(self, answer_now: bool) -> None:
        """An assistant turn calling a tool; its result now or later (`answer`): a call
        without its result stays raw, and folds into a later extension below its slot."""
        turn_id = f"t{self.model.written}"
        self.model.written += 1
        token = self.model.new_token(turn_id)
        calls = json.dumps([{"id": f"call-{turn_id}", "type": "function"}])
        turn = self.stores[0].append(
            CONV, "assistant", body(token), id=turn_id, meta={"tool_calls": calls}
        )
        self.model.turns[turn_id] = ModelTurn(turn_id, turn.sequence, turn.role, [token])
        self.pending.append(turn_id)
        if answer_now:
            self.answer(len(self.pending) - 1)

    @rule(pick=picks)
    def answer(self, pick: int) -> None:
        if not self.pending:
            return
        call = self.pending.pop(pick % len(self.pending))
        if self.model.turns[call].state != "live":
            return
        turn_id = f"t{self.model.written}"
        self.model.written += 1
        token = self.model.new_token(turn_id)
        turn = self.stores[0].append(
            CONV, "tool", body(token), id=turn_id, meta={"tool_call_id": f"call-{call}"}
        )
        self.model.turns[turn_id] = ModelTurn(turn_id, turn.sequence, turn.role, [token])
        self.answers.setdefault(call, []).append(turn_id)
        self._settle(pick)

    @rule(pick=picks, recent=st.booleans(), store=st.integers(0, 1))
    def edit_covered(self, pick: int, recent: bool, store: int) -> None:
        covered = [t for t in self._covered() if not t.protected]
        if covered:
            # A recent one (the newest few) or any.
            back = pick % min(3, len(covered)) if recent else pick % len(covered)
            self._edit(covered[-1 - back], store)
        self._settle(pick)

    @rule(pick=picks)
    def edit_any(self, pick: int) -> None:
        turn = self._pick(self.model.live(), pick)
        if turn is not None:
            self._edit(turn)
        self._settle(pick)

    @rule(pick=picks)
    def edit_back(self, pick: int) -> None:
        """A turn given an earlier body again: a text built from that body is sound again."""
        turn = self._pick([t for t in self.model.live() if len(t.tokens) > 1], pick)
        if turn is not None:
            token = turn.tokens[-2]
            self.stores[0].edit(CONV, turn.id, body=body(token))
            turn.tokens.append(token)
        self._settle(pick)

    @rule(pick=picks)
    def edit_undone(self, pick: int) -> None:
        """A covered turn edited, then given its body back before the next compaction: a
        sealed summary whose sources are unchanged again is extended, not rebased (SPEC
        §17.5; `_checkpoint` expects it)."""
        turn = self._pick([t for t in self._covered() if not t.protected], pick)
        if turn is not None:
            token = turn.token
            self._edit(turn)
            self.stores[0].edit(CONV, turn.id, body=body(token))
            turn.tokens.append(token)
        self._settle(pick)

    @rule(pick=picks)
    def toggle_protection(self, pick: int) -> None:
        turn = self._pick(self.model.live(), pick)
        if turn is None:
            return
        turn.protected = not turn.protected
        self.stores[0].edit(
            CONV,
            turn.id,
            protected=turn.protected,
            protection_reason="active-constraint" if turn.protected else None,
        )
        self._settle(pick)

    @rule(pick=picks, erase=st.booleans())
    def retract(self, pick: int, erase: bool) -> None:
        live = self.model.live()
        if len(live) <= 3:
            return
        turn = self._pick(live, pick)
        assert turn is not None
        self.stores[0].retract(CONV, turn.id, erase=erase)
        self._gone(turn, "erased" if erase else "retracted")
        self._settle(pick)

    @rule(pick=picks)
    def erase_gone(self, pick: int) -> None:
        """Erase a turn retracted or purged earlier."""
        gone = [t for t in self.model.turns.values() if t.state in ("retracted", "purged")]
        turn = self._pick(sorted(gone, key=lambda t: t.sequence), pick)
        if turn is not None:
            self.stores[0].retract(CONV, turn.id, erase=True)
            self._gone(turn, "erased")
        self._settle(pick)

    @rule(pick=picks)
    def purge(self, pick: int) -> None:
        live = self.model.live()
        if len(live) <= 4:
            return
        through = live[pick % (len(live) // 2)].sequence
        self.stores[0].purge_through(CONV, through, "retention")
        self._note_purged()
        self._settle(pick)

    @rule(retain=st.integers(2, 6))
    def retention(self, retain: int) -> None:
        self.stores[0].apply_retention(CONV, retain_turns=retain)
        self._note_purged()

    def _note_purged(self) -> None:
        states = {
            row[0]: row[1]
            for row in sqlite3.connect(self.path).execute(
                "SELECT id, state FROM turns WHERE conversation_id = ?", (CONV,)
            )
        }
        for turn in self.model.turns.values():
            if turn.state in ("live", "retracted") and states.get(turn.id) == 2:
                # A retracted turn's text is no summary's to keep: it goes with the purge.
                turn.state = "purged" if turn.state == "live" else "erased"

    @rule(keep=st.integers(0, 2), keep_checkpoints=st.integers(1, 8), settle=st.booleans())
    def prune(self, keep: int, keep_checkpoints: int, settle: bool) -> None:
        """A prune on the other connection, also while no summary is current."""
        self.stores[1].prune_versions(CONV, keep=keep, keep_checkpoints=keep_checkpoints)
        if settle:
            self._settle(keep)

    @rule(pick=picks, keep=st.integers(0, 2))
    def erase_then_prune(self, pick: int, keep: int) -> None:
        covered = self._covered()
        if len(self.model.live()) <= 3 or not covered:
            return
        turn = covered[-1 - pick % len(covered)]
        self.stores[0].retract(CONV, turn.id, erase=True)
        self._gone(turn, "erased")
        expected = self._checkpoint()  # pruning keeps it (SPEC §17.5)
        self.stores[1].prune_versions(CONV, keep=keep)
        self._settle(pick, expected)

    @rule(keep_tail=st.integers(1, 4), chunked=st.booleans())
    def change_policy(self, keep_tail: int, chunked: bool) -> None:
        """Coverage may shrink: a rebase, leaving the old lineage's versions behind. A
        small `max_input_tokens` folds a rebuild's backlog in chunks (SPEC §15.8)."""
        self.policy = lf.CompactionPolicy(
            PV,
            keep_tail=keep_tail,
            min_new_turns=2,
            keep_versions=1,
            keep_checkpoints=3,
            max_input_tokens=20 if chunked else 8_000,
            max_summary_tokens=3_000,
        )

    @rule(pick=picks)
    def tamper_then_revalidate(self, pick: int) -> None:
        """A body changed outside ledgerfold, then revalidation (which repairs its digest as
        an edit would and marks the summaries citing it stale)."""
        turn = self._pick([t for t in self._covered() if not t.protected], pick)
        if turn is None:
            return
        token = self.model.new_token(turn.id)
        with sqlite3.connect(self.path) as db:
            db.execute(
                "UPDATE turns SET body = ? WHERE conversation_id = ? AND id = ?",
                (body(token), CONV, turn.id),
            )
        turn.tokens.append(token)
        revalidate_database(self.path, workers=1)
        self._settle(pick)

    @rule(store=st.integers(0, 1), force=st.booleans(), mode=MODES)
    def compact(self, store: int, force: bool, mode: str) -> None:
        self.recorder.mode = mode
        try:
            outcome = lf.Compactor(self.stores[store], self.policy, self.recorder).compact(
                CONV, force=force
            )
        finally:
            self.recorder.mode = "ok"
        if mode != "ok":
            assert not outcome.accepted

    @rule(
        store=st.integers(0, 1),
        pick=picks,
        what=st.sampled_from(["edit", "erase", "compact", "prune"]),
    )
    def compact_while_other_writes(self, store: int, pick: int, what: str) -> None:
        """The other connection edits or erases a source of the request, compacts, or
        prunes every version it may (a rebuild's checkpoint too), while this one's
        summarizer is writing: the plan is overtaken (`stale`), never a `failed` one."""
        other = self.stores[1 - store]

        def meddle() -> None:
            if what == "compact":
                lf.Compactor(other, self.policy, self.recorder).compact(CONV, force=True)
                return
            if what == "prune":
                other.prune_versions(CONV, keep=0, keep_checkpoints=0)
                return
            covered = [t for t in self._covered() if not t.protected] or [
                t for t in self.model.live() if not t.protected
            ]
            turn = self._pick(covered, pick)
            if turn is None or len(self.model.live()) <= 3:
                return
            if what == "edit":
                self._edit(turn, 1 - store)
            else:
                other.retract(CONV, turn.id, erase=True)
                self._gone(turn, "erased")

        self.recorder.meddle = meddle
        outcome = lf.Compactor(self.stores[store], self.policy, self.recorder).compact(
            CONV, force=True
        )
        self.recorder.meddle = None
        assert outcome.status != "failed", outcome.reason

    # ------------------------------------------------------------------ invariants

    @invariant()
    def summarizer_saw_only_current_text(self) -> None:
        assert self.recorder.violations == []

    @invariant()
    def context_uses_no_stale_summary(self) -> None:
        for store in self.stores:
            context = store.context(CONV, PV)
            raw = {item.id for item in context.items if item.kind != "summary"}
            protected = {t.id for t in self.model.live() if t.protected}
            assert protected <= raw
            if context.summary is None or context.fallback is not None:
                continue
            assert not raw & set(context.summary.source_ids)
            derived = self.recorder.derived.get(context.summary.text)
            assert derived is not None
            for turn_id, token in derived.items():
                assert self.model.sound(turn_id, token), (turn_id, token)
            assert set(derived) == set(context.summary.source_ids)

    @invariant()
    def every_version_covers_what_its_text_was_built_from(self) -> None:
        for record in self.stores[0].summary_history(CONV):
            if record.status not in ("current", "superseded", "stale"):
                continue
            envelope = record.envelope
            assert envelope is not None
            derived = self.recorder.derived.get(envelope.text)
            assert derived is not None, record.status
            assert set(derived) == set(envelope.source_ids), record.status
            if envelope.parent_id is not None:
                parent = next(
                    (
                        r.envelope
                        for r in self.stores[0].summary_history(CONV)
                        if r.envelope is not None and r.envelope.id == envelope.parent_id
                    ),
                    None,
                )
                if parent is not None and parent.text in self.recorder.derived:
                    assert set(parent.source_ids) <= set(envelope.source_ids)

    @invariant()
    def no_purge_leaves_a_result_of_a_call_it_took(self) -> None:
        """A purge without `force` splits no unit (SPEC §17.2), even one the sealed summary
        covers: a live result of a purged call could no longer be found by the call's
        erasure (its meta went with the purge), and would keep what the call fetched."""
        for call, results in self.answers.items():
            if self.model.turns[call].state == "purged":
                assert all(self.model.turns[i].state != "live" for i in results), call

    @invariant()
    def the_sealed_base_survives(self) -> None:
        """SPEC §17.5, §15.5: once a version covers only purged turns (a purge's sealed
        base, or a sealed summary purged whole), a version not stale covers them all until
        an erasure takes one of them (reported as `summary.sealed-lost`): merged turns,
        edits made and undone, pruning and compactions on either connection keep it."""
        if any(self.model.turns[i].state == "erased" for i in self.sealed):
            self.sealed = set()
        kept = [
            set(r.envelope.source_ids)
            for r in self.stores[0].summary_history(CONV)
            if r.status in ("current", "superseded") and r.envelope is not None
        ]
        assert not self.sealed or any(self.sealed <= sources for sources in kept), sorted(
            self.sealed
        )
        for sources in kept:
            if self.sealed < sources and all(
                self.model.turns[i].state == "purged" for i in sources
            ):
                self.sealed = sources

    @invariant()
    def no_erased_text_is_in_the_file(self) -> None:
        forbidden: dict[str, str] = {}
        purged_ok: set[str] = set()
        for turn in self.model.turns.values():
            if turn.state == "erased":
                forbidden.update((token, turn.id) for token in turn.tokens)
            elif turn.state == "purged":
                forbidden.update((token, turn.id) for token in turn.tokens if token != turn.token)
                purged_ok.add(turn.token)
        if not forbidden and not purged_ok:
            return
        # The bytes of the file and its WAL (erasing calls checkpoint it): `secure_delete`
        # leaves no erased row in free pages. An older copy of a row in the unused space of
        # a page in use is its documented limit (docs/retention.md), which `vacuum` clears.
        wal = Path(f"{self.path}-wal")
        data = self.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
        if any(token.encode() in data for token in forbidden):
            self.stores[0].vacuum()
            data = self.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
            assert not [token for token in forbidden if token.encode() in data]
        for table, text in file_texts(self.path):
            for token in forbidden:
                assert token not in text, (table, forbidden[token], token)
            if table != "summaries":
                for token in purged_ok:
                    assert token not in text, (table, token)


CheckpointMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_checkpoint_rules_hold_under_edits = CheckpointMachine.TestCase
