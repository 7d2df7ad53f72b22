"""The agent loop's side of `SQLiteStore` (SPEC §15.2, §15.8): planning, the start of a
compaction, the failure streak the back-off counts, and version pruning. `SQLiteStore`
holds one `CompactionLoop` and its public methods of these names delegate to it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from ledgerfold import _due as due
from ledgerfold import _validate
from ledgerfold._plan import CompactionPlan, preserve_roles_arg
from ledgerfold.store import _compaction as compaction
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _summaries as summaries
from ledgerfold.store._context_cache import ContextCache
from ledgerfold.store._database import Database, Transaction, time_ago
from ledgerfold.store._protocol import CompactionWork

__all__ = ["CompactionLoop"]

_log = logging.getLogger("ledgerfold.store")


class CompactionLoop:
    """The loop's methods over the store's transaction and version cache; `contexts`
    keeps, with a context, that nothing was due at once for it (`_context_cache`)."""

    def __init__(
        self,
        transaction: Transaction,
        cache: summaries.VersionCache,
        db: Database,
        contexts: ContextCache,
    ) -> None:
        self._transaction = transaction
        self._cache = cache
        self._db = db
        self._contexts = contexts

    def start_plan(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        plan_id: str | None = None,
        *,
        preserve_roles: Iterable[str] = (),
    ) -> CompactionPlan:
        """Plan on the current ledger; the plan becomes the active one, superseding older
        (an older plan that ended without any record gets `failed`/`abandoned`). An unknown
        conversation gets the empty plan, and nothing is registered."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        _validate.integer("keep_tail", keep_tail, minimum=1)
        policy_version = _validate.text("policy_version", policy_version)
        plan_id = (
            "plan-" + uuid.uuid4().hex if plan_id is None else _validate.text("plan_id", plan_id)
        )
        roles = preserve_roles_arg(preserve_roles)
        with self._transaction(write=True, operation="start_plan") as conn:
            pointed = summaries.pointed(conn, self._cache, conversation_id)
            planned = compaction.plan_view(
                conn,
                self._cache,
                pointed,
                conversation_id,
                keep_tail,
                policy_version,
                roles,
                plan_id,
            )
            if ledger.conversation_row(conn, conversation_id) is None:
                # No turn was ever written to it (or it was deleted): the empty plan, with
                # nothing registered, so no plan or `failed` record of no conversation.
                return planned.plan
            compaction.register(conn, planned, policy_version, roles)
        self._log_plan(planned.plan)
        return planned.plan

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
        """One transaction for the start of a compaction (what `Compactor` calls): plan on
        the current ledger and, when at least `min_new_turns` compactable turns are not yet
        covered by the current summary (or coverage would shrink, which makes a rebase due at
        once), register the plan and return it with the summary it may extend, that
        summary's stored source digests and the uncovered turns. Otherwise nothing is
        registered (`status` ``not-due`` or ``nothing-to-compact``). With `only_due_at_once`,
        only what is due at once registers a plan (`min_new_turns` aside), and when nothing
        is, the answer comes from the current summary alone, without planning."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        _validate.integer("keep_tail", keep_tail, minimum=1)
        policy_version = _validate.text("policy_version", policy_version)
        _validate.integer("min_new_turns", min_new_turns, minimum=1)
        _validate.flag("only_due_at_once", only_due_at_once)
        if plan_id is not None:
            plan_id = _validate.text("plan_id", plan_id)
        roles = preserve_roles_arg(preserve_roles)
        asked = (keep_tail, roles)
        if only_due_at_once:  # answered before, and nothing but appends since: no queries
            with self._db.lock:
                stamp = self._contexts.stamp(self._db.connection(), self._db.control_changes)
                known = self._contexts.not_due_at_once(
                    stamp, conversation_id, policy_version, asked
                )
            if known is not None:
                return CompactionWork("not-due", failures=known)
        if plan_id is None:
            plan_id = "plan-" + uuid.uuid4().hex
        with self._transaction(
            write=True, operation="begin_compaction", scope=conversation_id
        ) as conn:
            failures = compaction.failure_streak(conn, conversation_id)
            pointed = summaries.pointed(conn, self._cache, conversation_id)
            if only_due_at_once and not compaction.due_at_once(
                conn, self._cache, pointed, policy_version, keep_tail, roles, failures
            ):
                # Read before this transaction writes anything (it writes nothing here).
                stamp = self._contexts.stamp(conn, self._db.control_changes)
                self._contexts.note_not_due_at_once(
                    stamp, conversation_id, policy_version, asked, failures
                )
                return CompactionWork("not-due", failures=failures)
            relayout = compaction.preserved_gone(conn, pointed, policy_version)
            planned = compaction.plan_view(
                conn,
                self._cache,
                pointed,
                conversation_id,
                keep_tail,
                policy_version,
                roles,
                plan_id,
                relayout=relayout,
            )
            status = due.compaction_status(
                # A rebuild from a checkpoint replaces a stale summary (SPEC §17.5) and is
                # due when the rebase it stands for would be: with all the compacted turns
                # new (the back-off counts them, §15.8), not only those after the checkpoint.
                len(planned.plan.compacted_ids)
                if planned.rebuild
                else len(planned.new_turns) or int(planned.relaid),  # a re-layout adds none
                min_new_turns,
                rebase_due=planned.rebase_due,
                backlog_left=compaction.left_a_backlog(conn, planned.base),
                relayout=relayout,
                failures=failures,
                only_due_at_once=only_due_at_once,
            )
            if status != "ready":
                return CompactionWork(status, failures=failures)
            compaction.register(conn, planned, policy_version, roles)
            base = planned.base
            purged = None if base is None else ledger.boundary(conn, conversation_id)
            if planned.extended and base is not None:
                self._cache.stage_extension(
                    planned.plan.plan_id, planned.plan.compacted_ids, base.envelope.source_ids
                )
        self._log_plan(planned.plan)
        return CompactionWork(
            "ready",
            planned.plan,
            None if base is None else base.envelope,
            b"" if planned.base_digests is None else planned.base_digests,
            planned.new_turns,
            failures,
            extends_parent=planned.extended,
            sealed_lost=planned.sealed_lost,
            purged_through=None if purged is None else purged.through_sequence,
        )

    def _log_plan(self, plan: CompactionPlan) -> None:
        _log.info(
            "plan started: conversation=%s plan=%s revision=%d compacted=%d through_sequence=%d",
            plan.conversation_id,
            plan.plan_id,
            plan.source_revision,
            len(plan.compacted_ids),
            plan.through_sequence,
        )

    def consecutive_failures(self, conversation_id: str) -> int:
        """`failed` records since the conversation's newest accepted summary (the
        compactor's back-off counts them)."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=False, operation="consecutive_failures") as conn:
            return compaction.failure_streak(conn, conversation_id)

    def prune_versions(
        self,
        conversation_id: str | None = None,
        keep: int = 4,
        older_than: float | None = None,
        *,
        keep_checkpoints: int = 8,
    ) -> int:
        """Delete summary records (any status) other than the current one beyond the newest
        `keep` of each conversation (or of `conversation_id`), with their text and source
        index; the `failed` records since the newest accepted summary are kept too (the
        back-off counts them), and so are up to `keep_checkpoints` ancestors of the current
        summary spaced so their coverage ends lie about 1/2, 1/4, 1/8 … of its covered turns
        back, and the sealed base after a purge (SPEC §17.5; when an erasure took the current
        summary, the newest `keep_checkpoints` versions left); with `older_than` (seconds),
        only records older than that. Returns how many records were deleted;
        `pruned_count` keeps the tally."""
        if conversation_id is not None:
            conversation_id = _validate.text("conversation_id", conversation_id)
        keep = _validate.integer("keep", keep, minimum=0)
        keep_checkpoints = _validate.integer("keep_checkpoints", keep_checkpoints, minimum=0)
        cutoff: str | None = None
        seconds = _validate.duration("older_than", older_than, unit="seconds")
        if seconds is not None:
            cutoff = time_ago(seconds)
            if cutoff is None:  # before year 1: no record is that old
                return 0
        with self._transaction(
            write=True, operation="prune_versions", scope=conversation_id
        ) as conn:
            ids = (
                [conversation_id]
                if conversation_id is not None
                else [row[0] for row in conn.execute("SELECT id FROM conversations")]
            )
            deleted = sum(summaries.prune(conn, cid, keep, cutoff, keep_checkpoints) for cid in ids)
        if deleted:
            _log.info(
                "versions pruned: conversation=%s records=%d keep=%d",
                conversation_id,
                deleted,
                keep,
            )
        return deleted

    def pruned_count(self, conversation_id: str) -> int:
        """How many summary records of the conversation pruning has deleted."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=False, operation="pruned_count") as conn:
            row = conn.execute(
                "SELECT pruned_count FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        return 0 if row is None else int(row[0])
