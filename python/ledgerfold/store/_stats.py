"""`SQLiteStore.stats()` (SPEC §17.8): the counts an operator asks for, read in one read
transaction — the state now, not rates (those are the events' and OpenTelemetry's job)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ledgerfold.store import _summaries as summaries
from ledgerfold.store._batch_reads import NotUtf8, is_utf8, lenient_rows
from ledgerfold.store._current_summaries import READ_SURELY
from ledgerfold.store._plan_roles import ROLES_DAMAGED_SQL
from ledgerfold.store._rows import DAMAGED, SUMMARY_COLUMNS, DamagedSummary
from ledgerfold.store._schema import (
    CURRENT,
    STALE,
    SUMMARY_STATUSES,
    TURN_LIVE,
    TURN_PURGED,
    TURN_RETRACTED,
)
from ledgerfold.store._summary_slot import SLOT_SOUND_SQL

__all__ = [
    "LAYOUT_FALLBACK_SQL",
    "PURGED_SQL",
    "ConversationState",
    "StoreStats",
    "conversation_states",
    "read_stats",
]

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
#: the summary's ID (`duplicate-id`, SPEC §8), then its plan's roles unreadable
#: (`stale-summary:damaged-record`), then a turn kept raw below the slot because it was
#: protected or of a role the plan preserved, since retracted (`preserved-missing`,
#: §17.3). Indexed lookups of the one pointed summary: no walk of the turns.
LAYOUT_FALLBACK_SQL = (
    "(SELECT CASE"
    " WHEN EXISTS (SELECT 1 FROM turns d WHERE d.conversation_id = c.id AND d.id = p.id"
    f"  AND d.state = {TURN_LIVE}) THEN 'duplicate-id'"
    f" WHEN EXISTS (SELECT 1 FROM plans l WHERE l.id = p.plan_id AND {ROLES_DAMAGED_SQL})"
    f"  THEN 'stale-summary:{DAMAGED}'"
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
      version) is served from raw turns, by the reason `context()` gives: `no-summary`
      (never compacted), `stale-summary:<reason>` (its summary went stale;
      `damaged-record`: its record was damaged outside ledgerfold and cannot be read,
      `conversation-mismatch`: it names another conversation), `preserved-missing` (a
      protected or preserved turn below the summary was retracted, SPEC §17.3) or
      `duplicate-id` (a live turn holds the summary's ID, §8). A context read for another
      policy version falls back too (`stale-summary:policy-mismatch`); that depends on
      the caller and is reported by the `context.fallback` event;
    - `purged_without_summary`: conversations with purged turns (a boundary through which
      no turn was purged is not counted) and no current summary the context can read
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


#: SQL: whether the current summary pointed at by conversation `c` (row `s`), its record
#: aside, cites sources stored as text: one that is not (a blob) is read as its bytes'
#: text, or is damage — `summaries.pointed` decides. A range of the run's primary key.
_SOURCES_TEXT = (
    "NOT EXISTS (SELECT 1 FROM run_sources r WHERE r.run_pk = s.source_run"
    " AND r.position < s.source_count AND typeof(r.turn_id) <> 'text')"
)
_RECORD = ", ".join(f"s.{column.strip()}" for column in SUMMARY_COLUMNS.split(","))
# Per conversation: the record its pointer designates (the one `context()` reads), whether
# the store surely reads it (as revalidation's SQL vouches, its slot included; else
# `summaries.pointed` decides: a slot that is not its sources' is damage there), purges,
# the sealed test and the layout fallback. The record's text columns are decoded by the
# read, as the store's read decodes them (then dropped: nothing is kept).
_CONVERSATIONS = (
    "SELECT c.id, s.status, s.reason, s.conversation_id IS c.id,"
    f" IFNULL({READ_SURELY} AND {_SOURCES_TEXT} AND {SLOT_SOUND_SQL}, 0),"
    f" {PURGED_SQL},"
    # The current summary cites a purged turn (sealed): read only where turns were purged.
    " CASE WHEN EXISTS (SELECT 1 FROM history_boundaries b WHERE b.conversation_id = c.id)"
    "  THEN EXISTS (SELECT 1 FROM summary_sources ss JOIN turns t"
    "   ON t.conversation_id = c.id AND t.id = ss.turn_id"
    f"   WHERE ss.summary_pk = c.current_summary AND t.state = {TURN_PURGED}) END,"
    f" {LAYOUT_FALLBACK_SQL}, {_RECORD}"
    " FROM conversations c LEFT JOIN summaries s ON s.pk = c.current_summary"
)


@dataclass(frozen=True, slots=True)
class ConversationState:
    """What `stats()` counts of one conversation: `fallback` is the reason its context (for
    the current summary's own policy version) is served raw, None when the summary is
    used; `summarised`: it has a current summary the context can read (damaged or another
    conversation's is none); `purged`: it has purged turns; `covers_purged`: its current
    summary cites one of them (sealed)."""

    conversation_id: str
    fallback: str | None
    summarised: bool
    purged: bool
    covers_purged: bool


def conversation_states(
    conn: sqlite3.Connection, conversation_id: str | None
) -> list[ConversationState]:
    """Each conversation's state (one, or all in table order), read in the caller's
    transaction; the fallback is the one `context()` gives, in its order: a pointed record
    the store cannot read (`stale-summary:damaged-record`), no record (`no-summary`), one
    of another conversation (`stale-summary:conversation-mismatch`), a stale one (its
    reason), a current one the context cannot lay out (`duplicate-id`,
    `preserved-missing`)."""
    where, params = ("WHERE c.id = ?", (conversation_id,)) if conversation_id else ("", ())
    rows = lenient_rows(conn, f"{_CONVERSATIONS} {where}", params)
    surely = is_utf8(conn)  # in a UTF-16 file the SQL's test is not the store's
    states = []
    for cid, status, reason, own, sure, purged, sealed, layout, *record in rows:
        # Text that is not UTF-8 anywhere in the record (read as `NotUtf8`) is damage;
        # what the SQL does not vouch for is left to the store's own read.
        damaged = status is not None and (
            any(isinstance(value, NotUtf8) for value in (cid, reason, *record))
            or (not (surely and sure) and _damaged(conn, cid))
        )
        if damaged:
            fallback: str | None = f"stale-summary:{DAMAGED}"
        elif status is None:
            fallback = "no-summary"
        elif not own:
            fallback = "stale-summary:conversation-mismatch"
        elif status == STALE:
            fallback = f"stale-summary:{reason}"
        else:
            fallback = None if layout is None else str(layout)
        usable = status == CURRENT and own and not damaged
        states.append(ConversationState(cid, fallback, bool(usable), bool(purged), bool(sealed)))
    return states


def _damaged(conn: sqlite3.Connection, cid: object) -> bool:
    """Whether the store's read of the pointed record fails (`summaries.pointed`, which
    `context()` calls): a field the envelope refuses, a source ID that is no text. A
    conversation key that is no text is never read by a call."""
    if not isinstance(cid, str):
        return True
    try:
        summaries.pointed(conn, summaries.VersionCache(), cid, strict=True)
    except DamagedSummary:
        return True
    return False


def read_stats(
    conn: sqlite3.Connection,
    conversation_id: str | None,
    conversation_rows: list[ConversationState] | None = None,
) -> StoreStats:
    """`stats()` in the caller's transaction; `conversation_rows`: `conversation_states`
    already read in it (the report reads them once for its rows and its totals)."""
    where, params = (
        ("WHERE conversation_id = ?", (conversation_id,)) if conversation_id else ("", ())
    )
    states = dict.fromkeys((TURN_LIVE, TURN_RETRACTED, TURN_PURGED), 0)
    for state, count in conn.execute(
        f"SELECT state, COUNT(*) FROM turns {where} GROUP BY state", params
    ):
        states[int(state)] = int(count)
    summary_counts = dict.fromkeys(_STATUSES, 0)
    for status, count in conn.execute(
        f"SELECT status, COUNT(*) FROM summaries {where} GROUP BY status", params
    ):
        summary_counts[str(status)] = int(count)
    fallbacks: Counter[str] = Counter()
    conversations = purged_without_summary = sealed_lost = 0
    if conversation_rows is None:
        conversation_rows = conversation_states(conn, conversation_id)
    for state in conversation_rows:
        conversations += 1
        if state.fallback is not None:
            fallbacks[state.fallback] += 1
        if state.summarised:
            sealed_lost += state.purged and not state.covers_purged
        else:
            purged_without_summary += state.purged
    return StoreStats(
        conversations=conversations,
        turns=states[TURN_LIVE],
        turns_retracted=states[TURN_RETRACTED],
        turns_purged=states[TURN_PURGED],
        summaries=summary_counts,
        fallbacks=dict(sorted(fallbacks.items())),
        purged_without_summary=purged_without_summary,
        sealed_lost=sealed_lost,
    )
