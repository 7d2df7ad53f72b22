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

__all__ = ["LAYOUT_FALLBACK_SQL", "PURGED_SQL", "StoreStats", "read_stats"]

_STATUSES = SUMMARY_STATUSES

#: SQL: whether conversation `c` has a purged turn. A boundary alone is not one: a purge
#: that kept every turn through it (a system prompt, a unit it would split) purged nothing.
#: Purged turns lie at or below the boundary: a range of the (conversation, sequence) index.
PURGED_SQL = (
    "EXISTS (SELECT 1 FROM turns u WHERE u.conversation_id = c.id"
    " AND u.sequence <= (SELECT max(b.through_sequence) FROM history_boundaries b"
    f" WHERE b.conversation_id = c.id) AND u.state = {TURN_PURGED})"
)

#: SQL for the fallback of the context of conversation `c` (a row of `conversations`) laid
#: out with its current summary, or NULL when the summary is used — the checks `context()`
#: makes on a current summary of its own policy version, in its order: a live turn holding
#: the summary's ID (`duplicate-id`, SPEC §8), then a turn kept raw below the slot because
#: it was protected or of a role the plan preserved, since retracted (`preserved-missing`,
#: §17.3). Indexed lookups of the one pointed summary: no walk of the turns.
LAYOUT_FALLBACK_SQL = (
    "(SELECT CASE"
    " WHEN EXISTS (SELECT 1 FROM turns d WHERE d.conversation_id = c.id AND d.id = p.id"
    f"  AND d.state = {TURN_LIVE}) THEN 'duplicate-id'"
    " WHEN EXISTS (SELECT 1 FROM summary_kept k JOIN turns t ON t.pk = k.turn_pk"
    f"  WHERE k.summary_pk = p.pk AND t.state = {TURN_RETRACTED} AND (t.protected"
    "  OR t.role IN (SELECT value FROM json_each(COALESCE((SELECT l.preserve_roles"
    "  FROM plans l WHERE l.id = p.plan_id), '[]'))))) THEN 'preserved-missing' END"
    " FROM summaries p WHERE p.pk = c.current_summary)"
)


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Counts of a store, or of one conversation.

    - `conversations`: conversations with at least one written turn;
    - `turns` / `turns_retracted` / `turns_purged`: live, retracted and purged turn rows;
    - `summaries`: summary records by status (`current`, `superseded`, `stale`, `failed`,
      `rejected`; pruned records are gone and not counted);
    - `fallbacks`: conversations whose context (for the current summary's own policy
      version) is served from raw turns, by reason: `no-summary` (never compacted),
      `stale-summary:<reason>` (its newest summary went stale), `preserved-missing` (a
      protected or preserved turn below the summary was retracted, SPEC §17.3) or
      `duplicate-id` (a live turn holds the summary's ID, §8). A context read for another
      policy version falls back too (`stale-summary:policy-mismatch`); that depends on
      the caller and is reported by the `context.fallback` event;
    - `purged_without_summary`: conversations with purged turns (a boundary through which
      no turn was purged is not counted) and no current summary
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
        f" {PURGED_SQL},"
        # The current summary cites a purged turn (sealed): read only where turns were purged.
        " CASE WHEN EXISTS (SELECT 1 FROM history_boundaries b WHERE b.conversation_id = c.id)"
        "  THEN EXISTS (SELECT 1 FROM summary_sources ss JOIN turns t"
        "   ON t.conversation_id = c.id AND t.id = ss.turn_id"
        f"   WHERE ss.summary_pk = c.current_summary AND t.state = {TURN_PURGED}) END,"
        f" {LAYOUT_FALLBACK_SQL}"
        f" FROM conversations c {conversation_where}",
        params,
    )
    sealed_lost = 0
    for _, newest, purged, sealed, layout in rows:
        conversations += 1
        status, _, reason = (newest or "").partition("|")
        if status == CURRENT:
            sealed_lost += bool(purged) and not sealed
            if layout is not None:
                fallbacks[str(layout)] += 1
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
