"""The work of `SQLiteStore`'s retention and erasure methods (SPEC §15.5): retraction
(with erasure), purge with a sealed summary, its preview, the retention policy's purge and
deleting a conversation. `SQLiteStore` holds one `Retention` and its public methods of
these names delegate to it; the work inside each transaction is in `retention`."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable
from typing import Any

from ledgerfold import _validate
from ledgerfold._context import HistoryBoundary
from ledgerfold._errors import InvalidInput
from ledgerfold._events import Event, EventHook, emit, stale_event
from ledgerfold._plan import preserve_roles_arg
from ledgerfold._toolcalls import tool_call_ids
from ledgerfold.store import _erasure as erasure
from ledgerfold.store import _retention as retention
from ledgerfold.store import _summaries as summaries
from ledgerfold.store import _turn_changes as turn_changes
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._call_index import nearest_call
from ledgerfold.store._context_cache import ContextCache
from ledgerfold.store._database import Database, Transaction, time_ago
from ledgerfold.store._schema import ACCEPTED, TURN_LIVE, TURN_PURGED, TURN_RETRACTED

__all__ = ["Retention"]

_log = logging.getLogger("ledgerfold.store")


class Retention:
    """Retention's methods over the store's transaction, database, version cache and event
    hook (the store's docstrings describe them)."""

    def __init__(
        self,
        transaction: Transaction,
        db: Database,
        cache: summaries.VersionCache,
        on_event: EventHook | None,
        contexts: ContextCache,
    ) -> None:
        self._transaction = transaction
        self._db = db
        self._cache = cache
        self._on_event = on_event
        self._contexts = contexts

    def retract(self, conversation_id: str, turn_id: str, *, erase: bool = False) -> None:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        turn_id = _validate.identifier("turn_id", turn_id)
        _validate.flag("erase", erase)
        # Without erasure only this conversation's rows change: the other conversations'
        # cached contexts stay (`_context_cache`). An erasure empties the cache: no erased
        # text stays in memory.
        scope = None if erase else conversation_id
        with self._transaction(write=True, operation="retract", scope=scope) as conn:
            earlier = erasure.retracted(conn, conversation_id, turn_id) if erase else None
            answers: list[str] = []
            along: list[str] = []
            if earlier is None:
                sequence, revision, stale, answers = turn_changes.retract_turn(
                    conn, conversation_id, turn_id
                )
                if not stale and not erase:
                    self._contexts.retracted(conversation_id, frozenset((turn_id, *answers)))
            else:  # retracted or purged before: what is left of it goes, the view stays
                (sequence, revision), stale = earlier, []
            # Erasing a call erases the results retracted with it (SPEC §17.2's unit), now or
            # before, and those retracted on their own: a result quotes what the call fetched.
            if erase:
                along = [
                    i
                    for i in _retracted_answers(conn, conversation_id, turn_id)
                    if i not in answers
                ]
            erased_ids = [turn_id, *answers, *along]
            lost = _sealed_loss(conn, conversation_id, erased_ids) if erase else None
            erased = erasure.erase_body(conn, conversation_id, erased_ids) if erase else 0
        if erase:
            self._db.checkpoint()
        _log.info(
            "retracted: conversation=%s turn=%s sequence=%s revision=%d summaries_stale=%d"
            " answers_retracted=%d erased=%s versions_erased=%d",
            conversation_id,
            turn_id,
            sequence,
            revision,
            len(stale),
            len(answers),
            erase,
            erased,
        )
        if stale:
            emit(self._on_event, stale_event(conversation_id, "source-missing", stale, turn_id))
        if erase:
            emit(
                self._on_event,
                Event(
                    "retention.erased",
                    conversation_id,
                    turn_ids=tuple(erased_ids),
                    turns=len(erased_ids),
                    sequence=sequence,
                    extra=(("versions_erased", erased),),
                ),
            )

        if lost is not None:
            # SPEC §17.5: the erasure took the summary of purged turns and no checkpoint of
            # them is left; the next summary is a rebase of the live turns (as after an edit).
            _log.warning(
                "purged turns' summary erased conversation=%s summary_id=%s", conversation_id, lost
            )
            emit(
                self._on_event,
                Event(
                    "summary.sealed-lost",
                    conversation_id,
                    reason="erased",
                    summary_ids=(lost,),
                    turn_ids=tuple(erased_ids),
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
        conversation_id, sequence, force = self._purge_args(conversation_id, sequence, force)
        reason = _validate.text("reason", reason)
        roles = preserve_roles_arg(keep_roles, "keep_roles")
        with self._transaction(write=True, operation="purge_through") as conn:
            boundary, purged, revision, erased = retention.purge(
                conn, self._cache, conversation_id, sequence, reason, force, roles
            )
        self._db.checkpoint()
        # The boundary recorded: below `sequence` when the purge stopped before a unit it
        # would split, or at the last sequence written when `sequence` lies beyond it.
        through = boundary.through_sequence
        _log.info(
            "purged: conversation=%s through_sequence=%d turns=%d force=%s revision=%d"
            " versions_erased=%d",
            conversation_id,
            through,
            purged,
            force,
            revision,
            erased,
        )
        self._emit_purged(conversation_id, reason, purged, through, erased)
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
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        if retain_turns is not None:
            retain_turns = _validate.integer("retain_turns", retain_turns, minimum=0)
        days = _validate.duration("retain_days", retain_days, unit="days")
        # A retention reaching before year 1 has no cutoff: no turn is that old.
        cutoff = None if days is None else time_ago(days * 86400)
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
        """The `retention.purged` event of a purge on demand or by the retention policy; none
        for a purge that purged no turn (nothing happened, as for a deletion of nothing)."""
        if not turns:
            return
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
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        sequence = _validate.integer("sequence", sequence, minimum=0)
        _validate.flag("force", force)
        return conversation_id, sequence, force

    def delete_conversation(self, conversation_id: str) -> None:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        with self._transaction(write=True, operation="delete_conversation") as conn:
            turns = erasure.delete_conversation(conn, conversation_id)
        self._db.checkpoint()
        _log.info("conversation deleted: conversation=%s turns=%d", conversation_id, turns)
        if turns:  # a conversation has a turn row from its first append until this: it was one
            emit(self._on_event, Event("conversation.deleted", conversation_id, turns=turns))


def _retracted_answers(conn: sqlite3.Connection, conversation_id: str, turn_id: str) -> list[str]:
    """The retracted tool turns answering a call that a retracted assistant turn made (those
    `retract` took along, SPEC §17.2, or retracted on their own): a result quotes what its
    call fetched, so erasing the call erases them."""
    found = lenient_rows(
        conn,
        "SELECT sequence, meta FROM turns WHERE conversation_id = ? AND id = ? AND state = ?"
        " AND role = 'assistant'",
        (conversation_id, turn_id, TURN_RETRACTED),
    )
    if not found or not isinstance(found[0][1], str) or type(found[0][0]) is not int:
        return []
    try:
        call_ids = set(tool_call_ids(json.loads(found[0][1]).get("tool_calls") or "[]"))
    except (InvalidInput, ValueError, AttributeError, TypeError, RecursionError):
        return []  # damaged in storage: it names no call
    # By the answers index, as `call_pairs.results_of` pairs live ones: a result with a call
    # of its ID (in any state) between it and this call answers that one, as do later ones.
    answers: list[str] = []
    states = (TURN_LIVE, TURN_RETRACTED, TURN_PURGED)
    for call_id in sorted(call_ids):
        checked = int(found[0][0])
        for result_id, at in conn.execute(
            "SELECT id, sequence FROM turns WHERE conversation_id = ? AND role = 'tool'"
            " AND json_valid(meta) AND json_extract(meta, '$.tool_call_id') = ?"
            " AND sequence > ? AND state = ? ORDER BY sequence",
            (conversation_id, call_id, checked, TURN_RETRACTED),
        ):
            if nearest_call(
                conn, conversation_id, call_id, int(at), before=True, states=states, above=checked
            ):
                break
            answers.append(str(result_id))
            checked = int(at)
    return answers


def _sealed_loss(conn: sqlite3.Connection, conversation_id: str, turn_ids: list[str]) -> str | None:
    """The ID of the conversation's summary when erasing `turn_ids` takes it while it holds
    purged turns (sealed, SPEC §15.5) and no other version citing a purged turn stays to be
    rebuilt from (SPEC §17.5): what the purged turns said then leaves for good. Else None."""
    pk = summaries.pointed_pk(conn, conversation_id)
    if pk is None:
        return None
    erased = json.dumps(turn_ids, ensure_ascii=False)
    cites_erased = (
        "EXISTS (SELECT 1 FROM summary_sources e WHERE e.summary_pk = s.pk"
        " AND e.turn_id IN (SELECT value FROM json_each(?)))"
    )
    cites_purged = (
        "EXISTS (SELECT 1 FROM summary_sources p JOIN turns t ON t.conversation_id = ?"
        f" AND t.id = p.turn_id WHERE p.summary_pk = s.pk AND t.state = {TURN_PURGED})"
    )
    row = conn.execute(
        f"SELECT s.id FROM summaries s WHERE s.pk = ? AND {cites_erased} AND {cites_purged}",
        (pk, erased, conversation_id),
    ).fetchone()
    if row is None:
        return None
    kept = conn.execute(
        f"SELECT 1 FROM summaries s WHERE s.conversation_id = ? AND s.status IN {ACCEPTED}"
        f" AND s.pk != ? AND NOT {cites_erased} AND {cites_purged} LIMIT 1",
        (conversation_id, pk, erased, conversation_id),
    ).fetchone()
    return None if kept is not None else str(row[0])
