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
  conversation it changes (appends, the compaction loop's planning) drops that
  conversation's contexts instead, so twenty sessions sharing a store do not invalidate
  one another on every append.

Any other write empties the cache (so an erased turn's text does not stay in memory). The
cache is small, in memory only, and is read and filled under the store's lock.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict

from ledgerfold._context import AssembledContext

__all__ = ["ContextCache"]

Stamp = tuple[int, int]


class ContextCache:
    """Contexts by conversation and policy version, each with its stamp; at most `size`."""

    __slots__ = ("_entries", "_scoped_changes", "_size")

    def __init__(self, size: int = 64) -> None:
        self._entries: OrderedDict[tuple[str, str], tuple[Stamp, AssembledContext]] = OrderedDict()
        self._scoped_changes = 0
        self._size = size

    def stamp(self, conn: sqlite3.Connection) -> Stamp:
        """The database's state as far as the contexts are concerned (see the module)."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        return int(version), conn.total_changes - self._scoped_changes

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
        self._entries[key] = (stamp, context)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def scoped_write(self, conversation_id: str, changes: int) -> None:
        """A write transaction changed `changes` rows, all of `conversation_id`'s (none: a
        compaction check that found nothing due, and its contexts stay)."""
        if not changes:
            return
        self._scoped_changes += changes
        for key in [key for key in self._entries if key[0] == conversation_id]:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
