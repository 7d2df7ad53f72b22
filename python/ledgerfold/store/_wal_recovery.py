"""A write-ahead log left by a process that died, checkpointed at the next writing open.

An erasing call commits, then checkpoints (TRUNCATE) so that the erased text survives in
neither the database file nor its WAL (SPEC §16.5 "Erasure"). A process killed between the
two leaves the committed, zeroed pages in the WAL and the old ones, holding the erased text,
in the database file; SQLite's recovery at the next open replays the WAL but copies nothing
back, so the text stayed in the file for as long as the next store stayed open. The writing
open checkpoints a WAL that holds frames, without waiting: a connection of another process
using the file keeps it busy, and its own checkpoints (at its erasures, at its close) do it.
"""

from __future__ import annotations

import logging
import os
import sqlite3

from ledgerfold.store._database import Database

__all__ = ["checkpoint_leftover"]

_log = logging.getLogger("ledgerfold.store")


def checkpoint_leftover(db: Database) -> None:
    """At a writing open: checkpoint the WAL when it holds frames (see the module). Never
    fails the open: a busy or failed checkpoint is logged at debug level."""
    if db.read_only or db.path == ":memory:":
        return
    try:
        if os.path.getsize(db.path + "-wal") == 0:
            return
    except OSError:  # no WAL file
        return
    conn = db.connection()
    with db.lock:
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                busy, frames, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                conn.execute("PRAGMA busy_timeout = 30000")
        except sqlite3.Error as err:
            _log.debug("checkpoint at open failed: path=%s (%s)", db.path, err)
            return
    if busy or frames != done:
        _log.debug("checkpoint at open left for the file's other users: path=%s", db.path)
