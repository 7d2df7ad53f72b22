"""Retention and pruning of `memory_store.MemoryStore` (the second backend in memory):
purging seals the current summary and erases the other versions citing a purged turn;
pruning keeps the current version and the failures the back-off counts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import ledgerfold as lf
from memory_store_rows import Conversation, bad, flag, integer, now, text


class RetentionMethods:
    """Mixed into `MemoryStore`: its lock, conversations and write "transactions"."""

    bugs: frozenset[str]
    _lock: Any
    _conversations: dict[str, Conversation]
    _write: Any
    _read: Any
    _recheck_current: Any

    def purge_through(
        self, conversation_id: str, sequence: int, reason: str, *, force: bool = False
    ) -> lf.HistoryBoundary:
        cid = text("conversation_id", conversation_id)
        integer("sequence", sequence, 0)
        reason = text("reason", reason)
        force = flag("force", force)
        with self._lock:
            if cid not in self._conversations or not self._conversations[cid].turns:
                raise bad("conversation_id", f"unknown conversation {cid!r}", "unknown")
        take_protected = force or "purge-protected" in self.bugs
        with self._write(cid) as conv:
            gone = [
                t
                for t in conv.live()
                if t.sequence <= sequence and (take_protected or not t.protected)
            ]
            return self._purge(cid, conv, gone, sequence, reason)

    def _purge(
        self, cid: str, conv: Conversation, gone: list[lf.Turn], through: int, reason: str
    ) -> lf.HistoryBoundary:
        self._recheck_current(cid, conv)  # seal only a current summary
        if not gone:  # nothing purged: no boundary, no new revision (SPEC §8)
            return conv.boundary or lf.HistoryBoundary(through, reason, now())
        current = conv.current()
        for turn in gone:
            conv.state[turn.id] = "purged"
            conv.turns[turn.id] = turn.replace(body="")
        ids = {t.id for t in gone}
        conv.history = [
            r
            for r in conv.history
            if r is current or r.envelope is None or not ids & set(r.envelope.source_ids)
        ]
        conv.revision += 1
        if conv.boundary is None or through >= conv.boundary.through_sequence:
            conv.boundary = lf.HistoryBoundary(through, reason, now())
        return conv.boundary

    def apply_retention(
        self,
        conversation_id: str,
        *,
        retain_turns: int | None = None,
        retain_days: float | None = None,
        reason: str = "retention",
        keep_roles: Iterable[str] = (),
    ) -> lf.HistoryBoundary | None:
        cid = text("conversation_id", conversation_id)
        roles = set(keep_roles)
        with self._write(cid) as conv:
            current = conv.current()
            if current is None or current.envelope is None:
                return None
            live = conv.live()
            newest = {t.id for t in live[len(live) - retain_turns :]} if retain_turns else set()
            cutoff = (
                None if retain_days is None else datetime.now(UTC) - timedelta(days=retain_days)
            )
            gone = [
                t
                for t in live
                if t.id in set(current.envelope.source_ids)
                and not t.protected
                and t.role not in roles
                and t.id not in newest
                and (cutoff is None or conv.created[t.id] < cutoff)
                and (retain_turns is not None or retain_days is not None)
            ]
            if not gone:
                return None
            return self._purge(cid, conv, gone, max(t.sequence for t in gone), reason)

    def delete_conversation(self, conversation_id: str) -> None:
        cid = text("conversation_id", conversation_id)
        with self._lock:
            self._conversations.pop(cid, None)

    def prune_versions(
        self, conversation_id: str | None = None, keep: int = 4, older_than: float | None = None
    ) -> int:
        keep = integer("keep", keep, 0)
        with self._lock:
            ids = [conversation_id] if conversation_id is not None else list(self._conversations)
            deleted = 0
            for cid in ids:
                conv = self._read(str(cid))
                protected_failures: set[int] = set()
                if "prune-failures" not in self.bugs:
                    for record in reversed(conv.history):
                        if record.envelope is not None and record.status != "rejected":
                            break
                        protected_failures.add(record.pk)
                others = [
                    r
                    for r in conv.history
                    if r.status != "current" and r.pk not in protected_failures
                ]
                doomed = others[: max(len(others) - keep, 0)]
                if older_than is not None:
                    cutoff = datetime.now(UTC) - timedelta(seconds=older_than)
                    doomed = [r for r in doomed if datetime.fromisoformat(r.created_at) < cutoff]
                conv.history = [r for r in conv.history if r not in doomed]
                deleted += len(doomed)
            return deleted
