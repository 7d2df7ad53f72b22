"""The summary versions' side of `SQLiteStore` (SPEC §9, §12): committing a summary (or its
rejection), recording a failed attempt, marking versions found stale by a deep revalidation,
repairing turn digests that no longer match their bytes, and reading versions and the turns
they cite. `SQLiteStore` holds one `SummaryVersions` and its public methods of these names
delegate to it; the work inside each transaction is in `commit`, `summaries`, `digests` and
`summary_reads`."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ledgerfold import _validate
from ledgerfold._events import EventHook, emit, stale_event
from ledgerfold._model import Turn
from ledgerfold._summary import SummaryEnvelope, SummaryWrite
from ledgerfold.store import _commit as commit
from ledgerfold.store import _digests as digests
from ledgerfold.store import _summaries as summaries
from ledgerfold.store import _summary_reads as summary_reads
from ledgerfold.store._database import Transaction
from ledgerfold.store._protocol import SummaryRecord
from ledgerfold.store._schema import CURRENT

__all__ = ["SummaryVersions"]

_log = logging.getLogger("ledgerfold.store")


class SummaryVersions:
    """The summary methods over the store's transaction, version cache and event hook (the
    store's docstrings describe them)."""

    def __init__(
        self,
        transaction: Transaction,
        cache: summaries.VersionCache,
        on_event: EventHook | None,
    ) -> None:
        self._transaction = transaction
        self._cache = cache
        self._on_event = on_event

    def commit_summary(self, envelope: SummaryEnvelope | None) -> SummaryWrite:
        if envelope is None:
            return SummaryWrite(False, None, "invalid-summary", None)
        _validate.instance("envelope", envelope, SummaryEnvelope)
        # Scoped: a commit changes rows of the envelope's conversation only (a plan of
        # another conversation is refused), so the other conversations' contexts stay cached.
        with self._transaction(
            write=True, operation="commit_summary", scope=envelope.conversation_id
        ) as conn:
            write, revision = commit.commit(conn, self._cache, envelope)
        if write.accepted:
            _log.info(
                "summary committed: conversation=%s summary=%s plan=%s sources=%d"
                " fingerprint=%s revision=%d",
                envelope.conversation_id,
                envelope.id,
                envelope.plan_id,
                len(envelope.source_ids),
                envelope.source_fingerprint,
                revision,
            )
        else:
            _log.warning(
                "summary rejected: conversation=%s summary=%s plan=%s reason=%s detail=%s",
                envelope.conversation_id,
                envelope.id,
                envelope.plan_id,
                write.reason,
                write.detail,
            )
        return write

    def mark_stale(self, verdicts: Iterable[tuple[str, str, str]]) -> int:
        return self.apply_revalidation(verdicts, ())[0]

    def repair_digests(self, turns: Iterable[tuple[str, str]]) -> int:
        return self.apply_revalidation((), turns)[1]

    def apply_revalidation(
        self, verdicts: Iterable[tuple[str, str, str]], turns: Iterable[tuple[str, str]]
    ) -> tuple[int, int]:
        """`mark_stale(verdicts)`, then `repair_digests(turns)`, in one transaction (so an
        interrupted or failed revalidation leaves the database as it was); returns how many
        versions were marked and how many turns repaired. The events follow the commit."""
        items = [
            (
                _validate.text("reason", reason),
                _validate.identifier("summary_id", summary_id),
                _validate.text("conversation_id", conversation_id, blank_ok=True, empty_ok=False),
            )
            for conversation_id, summary_id, reason in summaries.verdict_triples(verdicts)
        ]
        pairs = digests.turn_pairs(turns)
        if not items and not pairs:
            return 0, 0
        operation = "repair_digests" if not items else "mark_stale"
        with self._transaction(write=True, operation=operation) as conn:
            changed = summaries.mark_stale(conn, items) if items else []
            # After the verdicts, so that a current summary keeps the check's reason.
            repaired = digests.repair(conn, pairs) if pairs else []
        self._marked(changed)
        self._repaired(repaired)
        return len(changed), len(repaired)

    def _marked(self, changed: list[tuple[str, str, str]]) -> None:
        # The versions that changed, by conversation and reason, in the verdicts' order: one
        # `summary.stale` event each, as an edit's or a retraction's (SPEC §17.8).
        marked: dict[tuple[str, str], list[str]] = {}
        for reason, summary_id, conversation_id in changed:
            _log.info(
                "summary marked stale by revalidation: conversation=%s summary=%s reason=%s",
                conversation_id,
                summary_id,
                reason,
            )
            marked.setdefault((conversation_id, reason), []).append(summary_id)
        for (conversation_id, reason), summary_ids in marked.items():
            emit(self._on_event, stale_event(conversation_id, reason, summary_ids))

    def _repaired(self, repaired: list[tuple[str, str, list[str]]]) -> None:
        for conversation_id, turn_id, stale in repaired:
            _log.warning(
                "turn digest repaired (changed outside ledgerfold): conversation=%s"
                " turn=%s stale=%d",
                conversation_id,
                turn_id,
                len(stale),
            )
            if stale:
                emit(
                    self._on_event, stale_event(conversation_id, "source-modified", stale, turn_id)
                )

    def record_failure(self, plan_id: str, reason: str) -> None:
        plan_id = _validate.identifier("plan_id", plan_id)
        reason = _validate.text("reason", reason)
        with self._transaction(write=True, operation="record_failure") as conn:
            conversation_id = summaries.record_failure(conn, plan_id, reason)
        _log.warning("summary failed: conversation=%s plan=%s", conversation_id, plan_id)

    def current_summary(self, conversation_id: str) -> SummaryEnvelope | None:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        with self._transaction(write=False, operation="current_summary") as conn:
            pointed = summaries.pointed(conn, self._cache, conversation_id)
        if pointed is None or pointed[1] != CURRENT:
            return None
        return pointed[0].envelope

    def summary_history(self, conversation_id: str) -> list[SummaryRecord]:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        with self._transaction(write=False, operation="summary_history") as conn:
            return summary_reads.history(conn, self._cache, conversation_id)

    def sources_of(self, summary_id: str) -> list[Turn]:
        summary_id = _validate.identifier("summary_id", summary_id)
        with self._transaction(write=False, operation="sources_of") as conn:
            return summary_reads.sources_of(conn, self._cache, summary_id)

    def cited_sources(self, summary_id: str) -> list[Turn]:
        summary_id = _validate.identifier("summary_id", summary_id)
        with self._transaction(write=False, operation="cited_sources") as conn:
            return summary_reads.cited_sources(conn, self._cache, summary_id)

    def summaries_citing(self, conversation_id: str, turn_id: str) -> list[str]:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        turn_id = _validate.identifier("turn_id", turn_id)
        with self._transaction(write=False, operation="summaries_citing") as conn:
            return summary_reads.citing(conn, conversation_id, turn_id)
