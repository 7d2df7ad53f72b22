"""`SQLiteStore.stats()` (SPEC §17.8): the counts an operator asks for, read in one read
transaction — the state now, not rates (those are the events' and OpenTelemetry's job)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ledgerfold.store._schema import (
    CURRENT,
    STALE,
    SUMMARY_STATUSES,
    TURN_LIVE,
    TURN_PURGED,
    TURN_RETRACTED,
)

__all__ = ["StoreStats", "read_stats"]

_STATUSES = SUMMARY_STATUSES


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts of a store, or of one conversation.

    - `conversations`: conversations with at least one written turn;
    - `turns` / `turns_retracted` / `turns_purged`: live, retracted and purged turn rows;
    - `summaries`: summary records by status (`current`, `superseded`, `stale`, `failed`,
      `rejected`; pruned records are gone and not counted);
    - `fallbacks`: conversations whose context is served from raw turns, by reason:
      `no-summary` (never compacted) or `stale-summary:<reason>` (its newest summary went
      stale). A layout fallback that depends on the caller (a policy version) or on a turn
      read at `context()` time (`preserved-missing`, `duplicate-id`) is reported by the
      `context.fallback` event instead;
    - `purged_without_summary`: conversations with purged turns and no current summary
      (what was purged is summarised nowhere the model can see);
    - `sealed_lost`: conversations with purged turns whose current summary covers none of
      them: it was rebuilt from the live turns after an edit, with no sealed checkpoint
      left (SPEC §17.5), or first made after the purge, so what was purged is summarised
      nowhere either.
    """

    conversations: int
    turns: int
    turns_retracted: int
    turns_purged: int
    summaries: dict[str, int] = field(default_factory=dict)
    fallbacks: dict[str, int] = field(default_factory=dict)
    purged_without_summary: int = 0
    sealed_lost: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "turns": self.turns,
            "turns_retracted": self.turns_retracted,
            "turns_purged": self.turns_purged,
            "summaries": dict(self.summaries),
            "fallbacks": dict(self.fallbacks),
            "purged_without_summary": self.purged_without_summary,
            "sealed_lost": self.sealed_lost,
        }


def read_stats(conn: sqlite3.Connection, conversation_id: str | None) -> StoreStats:
    where, params = (
        ("WHERE conversation_id = ?", (conversation_id,))
        if conversation_id
        else (
            "",
            (),
        )
    )
    states = dict.fromkeys((TURN_LIVE, TURN_RETRACTED, TURN_PURGED), 0)
    for state, count in conn.execute(
        f"SELECT state, COUNT(*) FROM turns {where} GROUP BY state", params
    ):
        states[int(state)] = int(count)
    summaries = dict.fromkeys(_STATUSES, 0)
    for status, count in conn.execute(
        f"SELECT status, COUNT(*) FROM summaries {where} GROUP BY status", params
    ):
        summaries[str(status)] = int(count)
    conversation_where = "WHERE c.id = ?" if conversation_id else ""
    fallbacks: Counter[str] = Counter()
    conversations = purged_without_summary = 0
    # The newest accepted record of each conversation says whether its context is served
    # from a summary: current (used), stale (falls back), none (never compacted).
    rows = conn.execute(
        "SELECT c.id,"
        " (SELECT s.status || '|' || COALESCE(s.reason, '') FROM summaries s"
        f"   WHERE s.conversation_id = c.id AND s.status IN ('{CURRENT}', '{STALE}')"
        "   ORDER BY s.pk DESC LIMIT 1),"
        " EXISTS (SELECT 1 FROM history_boundaries b WHERE b.conversation_id = c.id),"
        # The current summary cites a purged turn (sealed): read only where turns were purged.
        " CASE WHEN EXISTS (SELECT 1 FROM history_boundaries b WHERE b.conversation_id = c.id)"
        "  THEN EXISTS (SELECT 1 FROM summary_sources ss JOIN turns t"
        "   ON t.conversation_id = c.id AND t.id = ss.turn_id"
        f"   WHERE ss.summary_pk = c.current_summary AND t.state = {TURN_PURGED}) END"
        f" FROM conversations c {conversation_where}",
        params,
    )
    sealed_lost = 0
    for _, newest, purged, sealed in rows:
        conversations += 1
        status, _, reason = (newest or "").partition("|")
        if status == CURRENT:
            sealed_lost += bool(purged) and not sealed
            continue
        fallbacks["no-summary" if status != STALE else f"stale-summary:{reason}"] += 1
        purged_without_summary += bool(purged)
    return StoreStats(
        conversations=conversations,
        turns=states[TURN_LIVE],
        turns_retracted=states[TURN_RETRACTED],
        turns_purged=states[TURN_PURGED],
        summaries=summaries,
        fallbacks=dict(sorted(fallbacks.items())),
        purged_without_summary=purged_without_summary,
        sealed_lost=sealed_lost,
    )
