"""The contexts the store has assembled lately, kept while nothing they depend on changed.

An agent reads its context on every model call, and more often than it writes: a session's
`add_items` checks whether compaction is due (one context read) and its `get_items` reads
the same context again. `SQLiteStore.context` keeps the last contexts it assembled, each
with the database *stamp* it was read at, and serves one again only while the stamp is
unchanged. The stamp is conservative, so that a context is never served after a change
that could alter it (SPEC §8: a summary that no longer matches is never used):

- `PRAGMA data_version` changes when any other connection (another store object, another
  process, a tool) commits to the file;
- `total_changes` of the store's own connection counts every row any statement of it has
  inserted, updated or deleted (also a write through `SQLiteStore._connection()` or one
  rolled back), minus the rows of *scoped* writes: a write transaction that names the one
  conversation it changes (appends, a retraction that erases nothing, the compaction
  loop's planning, a summary's commit, pruning one conversation's versions) drops that
  conversation's contexts instead, so twenty sessions sharing a store do not invalidate
  one another on every append, `pop_item` or compaction.

Two scoped writes change a context in a way known without reading it again: an append
adds raw turns at its end, and the retraction of its newest raw turns (a session's
`pop_item`) takes them off its end; such contexts are kept, changed accordingly.

Any other write empties the cache (so an erased turn's text does not stay in memory). The
cache is small, in memory only, and is read and filled under the store's lock.

A context's entry also keeps what `begin_compaction` found when asked only for what is due
at once (SPEC §15.8) and nothing was (`not_due_at_once`), with the failure streak it read,
so that the check each `add_items` makes below the trigger is not a transaction of queries
each time. That answer reads the current summary, its plan and sources, the failure streak
and how many live turns follow the summary's slot; an append that marks nothing stale
changes none of these but the last, which only grows (a summary the tail no longer reaches
into stays so). So the answer is kept exactly when the context is extended by an append,
and goes with it otherwise (a retraction shortens the tail: it is asked again).
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict

from ledgerfold._context import AssembledContext, ContextItem, SummaryItem, TurnItem
from ledgerfold.store._call_pairs import calls_in

__all__ = ["ContextCache"]

Stamp = tuple[int, int]
#: What a `not_due_at_once` answer was asked with: `keep_tail` and the preserved roles.
DueAsk = tuple[int, tuple[str, ...]]


class ContextCache:
    """Contexts by conversation and policy version, each with its stamp; at most `size`."""

    __slots__ = ("_appended", "_entries", "_retracted", "_scoped_changes", "_size")

    def __init__(self, size: int = 64) -> None:
        # Each context with its stamp and the failure streaks of the `not_due_at_once`
        # answers given at that stamp (kept while appends extend the context).
        self._entries: OrderedDict[
            tuple[str, str], tuple[Stamp, AssembledContext, dict[DueAsk, int]]
        ] = OrderedDict()
        self._scoped_changes = 0
        self._size = size
        # Turns a scoped write appended (and marked nothing stale), by conversation: its
        # contexts are extended with them once it has committed, not read again.
        self._appended: dict[str, tuple[TurnItem, ...]] = {}
        # Turns a scoped write retracted (marking nothing stale), by conversation: contexts
        # ending with exactly these turns lose them once it has committed.
        self._retracted: dict[str, frozenset[str]] = {}

    def stamp(self, conn: sqlite3.Connection, control_changes: int) -> Stamp:
        """The database's state as far as the contexts are concerned (see the module).
        `control_changes`: the rows the transaction statements themselves wrote (FTS5's
        index, flushed at a commit), which change no context."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        return int(version), conn.total_changes - control_changes - self._scoped_changes

    def get(
        self, stamp: Stamp, conversation_id: str, policy_version: str
    ) -> AssembledContext | None:
        key = (conversation_id, policy_version)
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] != stamp:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(
        self, stamp: Stamp, conversation_id: str, policy_version: str, context: AssembledContext
    ) -> None:
        key = (conversation_id, policy_version)
        self._entries[key] = (stamp, context, {})
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def not_due_at_once(
        self, stamp: Stamp, conversation_id: str, policy_version: str, asked: DueAsk
    ) -> int | None:
        """The failure streak read when nothing was due at once for this context at this
        stamp (see the module), or None (not known: ask the database)."""
        entry = self._entries.get((conversation_id, policy_version))
        if entry is None or entry[0] != stamp:
            return None
        return entry[2].get(asked)

    def note_not_due_at_once(
        self, stamp: Stamp, conversation_id: str, policy_version: str, asked: DueAsk, failures: int
    ) -> None:
        """Nothing is due at once for this context at `stamp` (read inside the transaction
        that found it, before it wrote anything): kept with its entry, if it has one read at
        that same stamp."""
        entry = self._entries.get((conversation_id, policy_version))
        if entry is not None and entry[0] == stamp:
            entry[2][asked] = failures

    def appended(self, conversation_id: str, items: tuple[TurnItem, ...]) -> None:
        """Inside a scoped write: it appends these turns, the newest of the conversation,
        and marks no summary stale. Appending changes a context in one way only then: the
        turns join its end, raw (SPEC §8: they are newer than any summary's sources). A
        write that marks a summary stale (a tool result joining a summarised call's unit)
        must not say so: its contexts are read again (as are those whose summary a new turn
        names by ID, a `duplicate-id` fallback: `_extends`)."""
        self._appended[conversation_id] = self._appended.get(conversation_id, ()) + items

    def retracted(self, conversation_id: str, turn_ids: frozenset[str]) -> None:
        """Inside a scoped write: it retracts these turns (a turn and the results of its
        calls) and marks no summary stale. A context whose last items are exactly these
        turns, raw, after any summary, changes in one way only: they leave its end (SPEC
        §8: the summary's check does not read turns that are not its sources, and a turn
        after its slot is not one it kept raw below it, `preserved-missing`). Any other
        context of the conversation is read again."""
        before = self._retracted.get(conversation_id, frozenset())
        self._retracted[conversation_id] = before | turn_ids

    def scoped_write(
        self, stamp: Stamp, conversation_id: str, changes: int, *, committed: bool
    ) -> None:
        """A write transaction changed `changes` rows, all of `conversation_id`'s (none: a
        compaction check that found nothing due, and its contexts stay). `stamp`: the
        database's stamp now, after it. A committed append extends the conversation's
        contexts read at this same stamp (nothing else changed since); others are dropped."""
        appended = self._appended.pop(conversation_id, None)
        retracted = self._retracted.pop(conversation_id, None)
        if not changes:
            return
        self._scoped_changes += changes
        stamp = (stamp[0], stamp[1] - changes)  # the scoped rows are not the stamp's
        for key in [key for key in self._entries if key[0] == conversation_id]:
            entry_stamp, context, quiet = self._entries[key]
            items: tuple[ContextItem, ...] | None = None
            if committed and entry_stamp == stamp:
                if appended and not retracted and _extends(context, appended):
                    items = context.items + appended
                elif retracted and not appended:
                    items = _without_newest(context, retracted)
                    quiet = {}  # fewer turns after the summary's slot: asked again
            if items is None:
                del self._entries[key]
                continue
            self._entries[key] = (
                stamp,
                AssembledContext(
                    items, context.fallback, context.history_boundary, context.fallback_id
                ),
                quiet,
            )

    def clear(self) -> None:
        self._entries.clear()
        self._appended.clear()
        self._retracted.clear()

    def __len__(self) -> int:
        return len(self._entries)


def _extends(context: AssembledContext, appended: tuple[TurnItem, ...]) -> bool:
    """Whether `appended` can only join the end of `context`, raw. The append marked no
    summary stale, but its marks reach only so far (a result's call is looked for among
    the newest assistant turns; an appended call's older results are not looked up), and
    whether a context falls back is decided at its read. So these are read again: a
    context that fell back, but for want of any summary (`no-summary`: nothing a new turn
    could split); and one holding a summary when a new turn links to a turn it may cover:
    a call (a result recorded before it could be a source), or a result whose call is not
    raw in the context (SPEC §17.2: a summary splitting a unit is not used)."""
    if context.fallback == "no-summary":
        return True
    if context.fallback is not None:
        return False
    summary_ids = {item.id for item in context.items if isinstance(item, SummaryItem)}
    if not summary_ids:
        return True
    if any(item.id in summary_ids for item in appended):  # the summary's ID: `duplicate-id`
        return False
    for item in appended:
        meta = item.meta
        if not meta:
            continue
        if item.role == "assistant" and meta.get("tool_calls") is not None:
            return False
        answered = meta.get("tool_call_id")
        if item.role == "tool" and isinstance(answered, str) and not _raw_call(context, answered):
            return False
    return True


def _without_newest(
    context: AssembledContext, retracted: frozenset[str]
) -> tuple[ContextItem, ...] | None:
    """`context`'s items less `retracted`, when those are exactly its last items, raw turns
    after any summary (see `ContextCache.retracted`), in a context that uses its summary or
    has none (`no-summary`); else None (read it again)."""
    if context.fallback not in (None, "no-summary"):
        return None
    items = context.items
    kept = len(items) - len(retracted)
    if kept < 0:
        return None
    for item in items[kept:]:
        if not isinstance(item, TurnItem) or item.id not in retracted:
            return None
    return items[:kept]


def _raw_call(context: AssembledContext, call_id: str) -> bool:
    """Whether a raw assistant turn of `context` makes the call `call_id` (newest first: a
    result follows its call closely). A raw call is no summary's source, and if one of its
    results were, the context would have fallen back: the new result splits nothing."""
    for item in reversed(context.items):
        if (
            isinstance(item, TurnItem)
            and item.role == "assistant"
            and item.meta
            and call_id in calls_in(item.meta.get("tool_calls"))
        ):
            return True
    return False
