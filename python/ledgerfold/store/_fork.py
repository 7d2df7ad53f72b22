"""A process forked while another of its threads was inside a store call (docs/threading.md).

Only the forking thread exists in the child. A `Database` whose lock another thread held at
the fork (the store's worker thread in the middle of a job, say) would block the child at
its first call, or at `close()`: in the child its lock is replaced and its connection,
caught inside a transaction of the parent's, is given up — never used nor closed there
(SQLite's advice: a connection must not cross a fork), so that closing it cannot touch the
parent's transaction. Its calls then raise `StoreError` saying to open the store again; a
store opened in the child works as anywhere. A store idle at the fork is left as it was.
The workers' registry is reset the same way by `ledgerfold._worker`.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

__all__ = ["FORKED", "track"]

#: Why a store inherited in the middle of a call cannot be used in the child.
FORKED = (
    "the store was in use by another thread when this process forked; open it again in this process"
)

# Every open `Database` of this process (what a fork may catch in use).
_open: weakref.WeakSet[Any] = weakref.WeakSet()
# Connections a child gave up: kept referenced, so that they are never closed there.
_given_up: list[object] = []


def track(database: Any) -> None:
    """Note an open `Database` (one with `lock`, `_conn` and `closed_why`)."""
    _open.add(database)


def _after_in_child() -> None:
    for database in list(_open):
        lock = database.lock
        if lock.acquire(blocking=False):  # free, or held by this (the forking) thread
            lock.release()
            continue
        database.lock = threading.RLock()
        connection, database._conn = database._conn, None
        if connection is not None:
            _given_up.append(connection)
        database.closed_why = FORKED


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_in_child)
