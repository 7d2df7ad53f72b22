"""Where a ledgerfold database is, and the SQLite URIs that open it read-only without creating
or changing any file (SPEC §15.7): used by the store, batch revalidation and the CLI."""

from __future__ import annotations

import os
from pathlib import Path

from ledgerfold._errors import InvalidInput, StoreError

__all__ = ["database_path", "reading_uri", "readonly_uri", "refuse_unwritable"]


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
    even a journal). A file this process cannot write, or in a directory it cannot write,
    without a `-shm` companion is opened `immutable` when it has no WAL holding frames: in
    such a directory nothing can be writing it through this directory; and beside a file it
    cannot write, `mode=ro` would create a `-wal` and a `-shm` that it cannot delete at its
    close (only a checkpoint, a write, does), owned by this user, which the file's owner
    then cannot write: every writing open of theirs fails until they are removed.
    `immutable` reads the database file alone, so the commits a WAL holds (left by a writer
    that died, or copied without its `-shm`) would be silently missing, and SQLite cannot
    read them without creating the `-shm`: in a directory this process cannot write, that
    is a `StoreError` instead."""
    resolved = os.path.abspath(path)
    uri = Path(resolved).as_uri() + "?mode=ro"  # percent-encoded
    directory = os.path.dirname(resolved) or "."
    if os.path.exists(resolved + "-shm"):
        return uri
    if not os.access(resolved, os.W_OK) and os.access(directory, os.W_OK):
        if not _holds_frames(resolved + "-wal"):
            uri += "&immutable=1"
        return uri
    if not os.access(directory, os.W_OK):
        if _holds_frames(resolved + "-wal"):
            raise StoreError(
                f"{path}: cannot read the database here: its write-ahead log (-wal) may hold"
                " commits, which SQLite reads only through a -shm file, missing and not"
                " creatable in this directory; open it where its directory is writable"
            )
        uri += "&immutable=1"
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
