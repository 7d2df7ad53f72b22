"""A write that fails because the search index is damaged (SPEC §16.1: the index is derived
from the ledger, and can always be made again from it).

FTS5 reads its structure record and configuration at every write of the index, and merges
segments when it flushes its pending terms (at each savepoint and at the commit): a data
table another tool changed then fails every write with a bare "constraint failed", "vtable
constructor failed: search_fts" or FTS5's own "run 'rebuild'" (a rebuild FTS5 cannot do for
a contentless table). The write has rolled back: nothing was written. `write_error` then
names the index as the cause and how to mend it (`ledgerfold reindex DB`,
`SQLiteStore.rebuild_search_index()`), never any text of a body.

Whether the index is the cause is asked of FTS5, after the rollback: a probe row written and
flushed inside a savepoint that is rolled back (`_index_fails`). Only for SQLite's errors
that damage can raise: a busy, locked, full, read-only or I/O failure is SQLite's as is.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import suppress

from ledgerfold._errors import StoreError
from ledgerfold.store._sqlite_errors import quotes_stored_data, store_error

__all__ = ["damaged_index", "write_error"]

#: Primary result codes of failures that are not damage: BUSY, LOCKED, NOMEM, READONLY,
#: INTERRUPT, IOERR, FULL, CANTOPEN, PROTOCOL.
_NOT_DAMAGE = frozenset({5, 6, 7, 8, 9, 10, 13, 14, 15})

#: FTS5's advice, which does not apply to a contentless table.
_FTS5_REBUILD = re.compile(r"\s*-\s*run 'rebuild'\s*$")

#: The probe's rowid: negative, so no turn's (`turn pk << 10 | slot`, pk >= 1).
_PROBE_ROWID = -1


def _may_be_damage(error: sqlite3.Error) -> bool:
    if not isinstance(error, sqlite3.DatabaseError) or quotes_stored_data(error):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    return code is None or code & 0xFF not in _NOT_DAMAGE


def _index_fails(conn: sqlite3.Connection) -> bool:
    """Whether FTS5 fails to take a row into the index and flush it (damage of the index's
    structure, configuration or segments), in a savepoint rolled back whatever happens (in
    the caller's transaction if there is one, else in one of its own)."""
    with suppress(sqlite3.Error):
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search_fts'"
        ).fetchone()
        if not exists:
            return False
    conn.execute("SAVEPOINT lf_index_probe")
    try:
        conn.execute(
            "INSERT INTO search_fts (rowid, tokens) VALUES (?, 'ledgerfold probe')",
            (_PROBE_ROWID,),
        )
        conn.execute("SAVEPOINT lf_index_flush")  # FTS5 writes its pending terms here
        conn.execute("RELEASE lf_index_flush")
    except sqlite3.Error as err:
        return _may_be_damage(err)
    finally:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK TO lf_index_probe")
            conn.execute("RELEASE lf_index_probe")
    return False


def damaged_index(conn: sqlite3.Connection, error: sqlite3.Error) -> bool:
    """Whether the failed write's `error` is the search index's: an error damage can raise,
    and the index fails the probe. Any failure of the probe itself says no."""
    if not _may_be_damage(error):
        return False
    try:
        return _index_fails(conn)
    except sqlite3.Error:
        return False


def write_error(
    conn: sqlite3.Connection | None,
    error: sqlite3.Error,
    *,
    operation: str,
    write: bool,
    path: str = "DB",
) -> StoreError:
    """`store_error`, except that a write the damaged search index failed says so, and how
    to rebuild the index (the write itself has rolled back: nothing was written)."""
    if write and conn is not None and damaged_index(conn, error):
        cause = _FTS5_REBUILD.sub("", str(error))
        return StoreError(
            f"{operation}: the search index is damaged (SQLite: {cause}), so nothing was"
            " written. The ledger is intact: rebuild the index from it with"
            f" `ledgerfold reindex {path}` (or SQLiteStore.rebuild_search_index())"
        )
    return store_error(conn, error, operation=operation, write=write)
