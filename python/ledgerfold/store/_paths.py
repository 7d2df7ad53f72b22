"""Where a ledgerfold database is, and the SQLite URIs that open it read-only without creating
or changing any file (SPEC §15.7): used by the store, batch revalidation and the CLI."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any, TypeVar

from ledgerfold._errors import InvalidInput, StoreError

__all__ = [
    "connect_reading",
    "connect_reading_uri",
    "database_path",
    "reading_uri",
    "readonly_uri",
    "refuse_unwritable",
]


def database_path(value: object, field: str = "path") -> str:
    """A database path as text: `str` or `os.PathLike`, non-empty, without NUL."""
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise InvalidInput(
            f"{field}: must be str or os.PathLike, got {type(value).__name__}",
            field=field,
            problem="wrong-type",
        )
    path = os.fspath(value)
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"{field}: must be a non-empty text path", field=field, problem="empty")
    if "\0" in path:
        raise InvalidInput(
            f"{field}: must not contain a NUL character", field=field, problem="not-allowed"
        )
    return path


def refuse_unwritable(path: str) -> None:
    """Before a writing open: a file this process may not write is a `StoreError`. SQLite
    would open it read-only without saying so, and in a directory it may write (a shared
    folder) leave a `-wal` and a `-shm` of this user's beside it, which it cannot delete and
    the file's owner cannot write: every writing open of the owner's would then fail."""
    if path != ":memory:" and os.path.exists(path) and not os.access(path, os.W_OK):
        raise StoreError(
            f"{path}: cannot open the database for writing (a readonly database: this process"
            " may not write the file); open it with read_only=True to read it"
        )


def readonly_uri(path: str) -> str:
    """The SQLite URI that opens `path` read-only, never creating or changing a file (not
    even a journal). Unless a WAL and its `-shm` are both beside the file (`reading_uri`
    then reads them), `mode=ro` would create the missing one, owned by this user and, beside
    a file this user may not write, as unwritable for the file's owner as the file is for
    this user: every writing open of the owner's then fails until it is removed (a
    read-only connection cannot delete it at its close). So:

    - no WAL holding frames (none, or only its header; no writer is live then, as a live
      writer has both files): `immutable`, the database file alone, which is all there is;
    - a WAL holding frames without its `-shm` (left by a writer that died, or copied
      without it): SQLite reads those commits only through a `-shm`, so where this user may
      not create one that the owner can write (a directory it cannot write, or a file it
      cannot write) that is a `StoreError`, never a read that silently misses them; beside
      a file it may write, `mode=ro` creates the `-shm`."""
    resolved = os.path.abspath(path)
    uri = Path(resolved).as_uri() + "?mode=ro"  # percent-encoded
    directory = os.path.dirname(resolved) or "."
    wal, shm = os.path.exists(resolved + "-wal"), os.path.exists(resolved + "-shm")
    if wal and shm:
        return uri
    if not _holds_frames(resolved + "-wal"):
        return uri + "&immutable=1"
    if not os.access(directory, os.W_OK) or not os.access(resolved, os.W_OK):
        raise StoreError(
            f"{path}: cannot read the database here: its write-ahead log (-wal) may hold"
            " commits, which SQLite reads only through a -shm file, missing and not to be"
            " created by this user; open it once as its owner, where its directory is"
            " writable"
        )
    return uri


def _holds_frames(wal: str) -> bool:
    """Whether a WAL file exists and is longer than its header (32 bytes): it may hold
    frames (a WAL that holds none reads as the database file alone)."""
    try:
        return os.path.getsize(wal) > 32
    except OSError:
        return False


def reading_uri(path: str) -> str:
    """The URI of a read-only open that creates and changes no file (SPEC §15.7):

    - a WAL with its `-shm` beside the file (a live writer's, or a hot one left by a writer
      that died): `mode=ro` with the shared-memory index opened read-only
      (`readonly_shm=1`), so the WAL is read, but nothing is checkpointed into the database
      file on close, and neither the `-shm` (recovery, read marks) nor the WAL is written;
    - no WAL, where the file and its directory are writable: `mode=rw` (the store issues no
      write; the empty WAL and `-shm` SQLite makes for the read go away again when the
      connection closes, which a `mode=ro` connection cannot do);
    - otherwise `readonly_uri`."""
    resolved = os.path.abspath(path)
    directory = os.path.dirname(resolved) or "."
    if os.path.exists(resolved + "-wal") and os.path.exists(resolved + "-shm"):
        return Path(resolved).as_uri() + "?mode=ro&readonly_shm=1"
    if (
        not os.path.exists(resolved + "-wal")
        and os.path.isfile(resolved)
        and os.access(resolved, os.W_OK)
        and os.access(directory, os.W_OK)
    ):
        return Path(resolved).as_uri() + "?mode=rw"
    return readonly_uri(path)


#: Opens `connect_reading` tries before it lets SQLite's failure through.
_ATTEMPTS = 8

#: Primary result codes of a first read whose URI the files no longer fit: CANTOPEN (a
#: `readonly_shm` open whose `-shm` a closing writer deleted), READONLY (`-shm` not
#: initialised yet, or to be recovered, which a read-only open cannot do).
_RACED = frozenset({8, 14})


def _identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


_Connection = TypeVar("_Connection", bound=sqlite3.Connection)


def connect_reading(path: str, *, factory: type[_Connection], **connect: Any) -> _Connection:
    """`connect_reading_uri`'s connection."""
    return connect_reading_uri(path, factory=factory, **connect)[0]


def connect_reading_uri(
    path: str, *, factory: type[_Connection], **connect: Any
) -> tuple[_Connection, str]:
    """A connection of `reading_uri` that has read the database once: from then on it holds
    the database's shared lock, and no writer's close deletes the WAL or `-shm` under it.

    `reading_uri` looks at those files, and the last writer's close may delete them between
    that look and SQLite's first read, which then fails ("unable to open database file",
    "attempt to write a readonly database"), or, when the `-shm` was opened just before its
    writer deleted it, succeeds on a file no writer will use again (its next reads would
    fail). Both are retried with the URI the files fit now. Any other failure of the first
    read is left for the caller's own first query, which meets it again. `factory`: the
    connection's class (`sqlite3.Connection`, or the store's). Also the URI it opened with,
    for connections opened beside it while it stays open (`batch_reads.open_readonly`)."""
    resolved = os.path.abspath(path)
    for attempt in range(1, _ATTEMPTS + 1):
        shm = _identity(resolved + "-shm")
        uri = reading_uri(path)
        conn = sqlite3.connect(uri, uri=True, factory=factory, **connect)
        try:
            conn.execute("PRAGMA schema_version").fetchone()
            raced = "readonly_shm" in uri and _identity(resolved + "-shm") != shm
        except sqlite3.OperationalError as err:
            code = getattr(err, "sqlite_errorcode", None)
            raced = code is not None and code & 0xFF in _RACED
        except sqlite3.DatabaseError:
            raced = False
        if not raced or attempt == _ATTEMPTS:
            return conn, uri
        conn.close()
        time.sleep(0.001 * attempt)
    raise AssertionError("unreachable")  # pragma: no cover
