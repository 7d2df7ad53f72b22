"""`SQLiteStore`'s retention and erasure methods (SPEC §15.5): retraction (with erasure),
purge with a sealed summary, its preview, the retention policy's purge and deleting a
conversation. Kept beside `sqlite.py`, which holds the other public methods; the work inside
each transaction is in `retention`."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager, suppress
from datetime import datetime, timedelta, timezone
from typing import Any

from ledgerfold import _validate
from ledgerfold._context import HistoryBoundary
from ledgerfold._errors import InvalidInput
from ledgerfold._events import Event, EventHook, emit
from ledgerfold._plan import preserve_roles_arg
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _retention as retention
from ledgerfold.store import _summaries as summaries
from ledgerfold.store._database import Database

__all__ = ["RetentionMethods"]

_log = logging.getLogger("ledgerfold.store")


def _days(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (0 <= value < float("inf"))
    ):
        raise InvalidInput(
            "retain_days: must be None or a number of days >= 0",
            field="retain_days",
            problem="out-of-range",
        )
    return float(value)


class RetentionMethods:
    """Mixed into `SQLiteStore`, which provides the database, cache and transactions."""

    _db: Database
    _cache: summaries.VersionCache
    _on_event: EventHook | None

    def _transaction(
        self, *, write: bool, operation: str
    ) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def retract(self, conversation_id: str, turn_id: str, *, erase: bool = False) -> None:
        """Remove a live turn from the ledger view (the row stays); new revision; citing
        summaries become stale (`source-missing`). A turn that made tool calls takes the
        live tool turns answering them along, in the same revision (SPEC §17.2; only the
        named turn is erased). With `erase=True` its body, meta and
        earlier versions are erased too, overwritten in the file (ID, sequence and digest
        stay), with every summary version citing it (its text may quote the turn); a turn
        retracted earlier can be erased this way later."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        turn_id = _validate.text("turn_id", turn_id)
        if not isinstance(erase, bool):
            raise InvalidInput("erase: must be bool", field="erase", problem="wrong-type")
        with self._transaction(write=True, operation="retract") as conn:
            earlier = retention.retracted(conn, conversation_id, turn_id) if erase else None
            answers = 0
            if earlier is None:
                sequence, revision, stale, answers = ledger.retract_turn(
                    conn, conversation_id, turn_id
                )
            else:  # retracted before: only its body goes, the ledger view is unchanged
                (sequence, revision), stale = earlier, 0
            erased = retention.erase_body(conn, conversation_id, turn_id) if erase else 0
        if erase:
            self._db.checkpoint()
        _log.info(
            "retracted: conversation=%s turn=%s sequence=%d revision=%d summaries_stale=%d"
            " answers_retracted=%d erased=%s versions_erased=%d",
            conversation_id,
            turn_id,
            sequence,
            revision,
            stale,
            answers,
            erase,
            erased,
        )
        if stale:
            emit(
                self._on_event,
                Event(
                    "summary.stale",
                    conversation_id,
                    reason="source-missing",
                    turn_ids=(turn_id,),
                    extra=(("summaries", stale),),
                ),
            )
        if erase:
            emit(
                self._on_event,
                Event(
                    "retention.erased",
                    conversation_id,
                    turn_ids=(turn_id,),
                    turns=1,
                    sequence=sequence,
                    extra=(("versions_erased", erased),),
                ),
            )

    def purge_through(
        self,
        conversation_id: str,
        sequence: int,
        reason: str,
        *,
        force: bool = False,
        keep_roles: Iterable[str] = ("system",),
    ) -> HistoryBoundary:
        """Retention: delete bodies (and earlier versions) of raw turns with sequence <=
        `sequence`, protected ones and those of `keep_roles` (the policy's `preserve_roles`;
        default: the system prompt) only when `force` is True; record the boundary; new
        revision. The current summary, checked current first, is sealed: it stays in the
        context, its purged sources checked by their stored digests (SPEC §15.5). Every other
        summary version citing a purged turn is erased (counted by `pruned_count`). Erased
        bytes are overwritten in the file and the WAL is checkpointed. The boundary records
        at most the last sequence written and, without `force`, stops before a compaction
        unit the purge would split and before an unanswered tool call (SPEC §17.2: so no
        tool result is ever left raw without its call), and before a `keep_roles` turn the
        sealed summary covers: its `through_sequence` says where the purge went."""
        conversation_id, sequence, force = self._purge_args(conversation_id, sequence, force)
        reason = _validate.text("reason", reason)
        roles = preserve_roles_arg(keep_roles, "keep_roles")
        with self._transaction(write=True, operation="purge_through") as conn:
            boundary, purged, revision, erased = retention.purge(
                conn, self._cache, conversation_id, sequence, reason, force, roles
            )
        self._db.checkpoint()
        _log.info(
            "purged: conversation=%s through_sequence=%d turns=%d force=%s revision=%d"
            " versions_erased=%d",
            conversation_id,
            sequence,
            purged,
            force,
            revision,
            erased,
        )
        self._emit_purged(conversation_id, reason, purged, sequence, erased)
        return boundary

    def apply_retention(
        self,
        conversation_id: str,
        *,
        retain_turns: int | None = None,
        retain_days: float | None = None,
        reason: str = "retention",
        keep_roles: Iterable[str] = (),
    ) -> HistoryBoundary | None:
        """Purge (sealing first) the raw turns beyond the newest `retain_turns` or written
        more than `retain_days` ago, but only those the current summary covers: without a
        current summary nothing is purged, and a turn it keeps raw (preserved, protected,
        an open tool call) stays. Turns of `keep_roles` are kept (the Compactor passes its
        policy's `preserve_roles`, so the system prompt stays raw in the context). Returns
        the boundary,
        or None when nothing was due. (The Compactor calls this after an accepted summary
        when its policy states a retention.)"""
        conversation_id = _validate.text("conversation_id", conversation_id)
        if retain_turns is not None:
            retain_turns = _validate.integer("retain_turns", retain_turns, minimum=0)
        cutoff = None
        if retain_days is not None:
            days = _days(retain_days)
            # A retention reaching before year 1 has no cutoff: no turn is that old.
            with suppress(OverflowError):
                cutoff = (datetime.now(timezone.utc) - timedelta(days=days)).isoformat(
                    timespec="microseconds"
                )
        reason = _validate.text("reason", reason)
        roles = preserve_roles_arg(keep_roles, "keep_roles")
        with self._transaction(write=True, operation="apply_retention") as conn:
            through = retention.retention_cutoff(conn, conversation_id, retain_turns, cutoff, roles)
            if through is None:
                return None
            done = retention.retain(conn, self._cache, conversation_id, through, reason, roles)
            if done is None:
                return None
            boundary, purged, revision, erased = done
            through = boundary.through_sequence
        self._db.checkpoint()
        _log.info(
            "retention purge: conversation=%s through_sequence=%d turns=%d revision=%d"
            " versions_erased=%d",
            conversation_id,
            through,
            purged,
            revision,
            erased,
        )
        self._emit_purged(conversation_id, reason, purged, through, erased)
        return boundary

    def _emit_purged(
        self, conversation_id: str, reason: str, turns: int, through: int, erased: int
    ) -> None:
        """The `retention.purged` event of a purge on demand or by the retention policy."""
        emit(
            self._on_event,
            Event(
                "retention.purged",
                conversation_id,
                reason=reason,
                turns=turns,
                sequence=through,
                extra=(("versions_erased", erased),),
            ),
        )

    def preview_purge(
        self,
        conversation_id: str,
        sequence: int,
        *,
        force: bool = False,
        keep_roles: Iterable[str] = ("system",),
    ) -> dict[str, Any]:
        """What `purge_through` would do, nothing written: `turns` (how many would go, with
        `first_sequence`/`last_purged_sequence`), `protected_kept`, `roles_kept` (turns of
        `keep_roles` that stay), `sealed_summary` (the ID
        of the summary that would be sealed, or None), `versions_erased`, `last_sequence`,
        and `unsummarised`: live turns that would go without being a source of the sealed
        summary, so what they said would leave the context for good."""
        conversation_id, sequence, force = self._purge_args(conversation_id, sequence, force)
        roles = preserve_roles_arg(keep_roles, "keep_roles")
        # A read transaction: a preview writes nothing, not even a stale mark, so it works
        # on a store opened read-only.
        with self._transaction(write=False, operation="preview_purge") as conn:
            return dict(
                retention.preview(conn, self._cache, conversation_id, sequence, force, roles)
            )

    def _purge_args(
        self, conversation_id: str, sequence: int, force: bool
    ) -> tuple[str, int, bool]:
        conversation_id = _validate.text("conversation_id", conversation_id)
        sequence = _validate.integer("sequence", sequence, minimum=0)
        if not isinstance(force, bool):
            raise InvalidInput("force: must be bool", field="force", problem="wrong-type")
        return conversation_id, sequence, force

    def delete_conversation(self, conversation_id: str) -> None:
        """Erase the conversation: its turns, turn history, summaries, plans, index rows and
        purge boundaries, overwritten in the file (the WAL is checkpointed). An unknown ID
        is not an error."""
        conversation_id = _validate.text("conversation_id", conversation_id)
        with self._transaction(write=True, operation="delete_conversation") as conn:
            turns = retention.delete_conversation(conn, conversation_id)
        self._db.checkpoint()
        _log.info("conversation deleted: conversation=%s turns=%d", conversation_id, turns)
        emit(self._on_event, Event("conversation.deleted", conversation_id, turns=turns))
