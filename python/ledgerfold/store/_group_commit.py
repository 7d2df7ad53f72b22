"""Group commit for the store's worker thread (SPEC §17.6): one fsync for a batch of jobs.

With `durability="full"` every commit is fsynced (`synchronous=FULL`): a store called from
many sessions at once spends most of its time waiting for the disk, one commit at a time.
Jobs queued together on the store's worker (`ledgerfold._worker.StoreWorker`) form a
batch. Its writes share one transaction (`Database.batch`: each job a savepoint of it, so
a failing job rolls back alone, and FTS5 flushes its index once per batch), committed at
the batch's end with `synchronous=NORMAL` (the WAL frames are written, not yet fsynced);
then the WAL file is fsynced once, which makes every frame written before durable, before
any caller of the batch hears back. If the commit fails, every caller of the batch gets
the `StoreError` and none of the batch's writes is kept. A
WAL checkpoint in between syncs what it copies itself (SQLite does that at `NORMAL`).

The batch holds the store's lock, so a call from another thread meanwhile waits and then
commits with `synchronous=FULL` as always. A `durability="normal"` store, an in-memory or
read-only one, needs no batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ledgerfold._errors import StoreError
from ledgerfold.store._database import Database

__all__ = ["batch"]


@contextmanager
def batch(db: Database) -> Iterator[None]:
    """Run the enclosed jobs as one group commit (see the module)."""
    if db.durability != "full" or db.read_only or db.path == ":memory:" or db.closed:
        yield
        return
    with db.lock:
        conn = db.connection()
        conn.execute("PRAGMA synchronous = NORMAL")
        before = conn.total_changes
        try:
            with db.batch():
                yield
        finally:
            if db.closed:
                # A job closed the store. Its close checkpoints the WAL into the database
                # file, but leaves the WAL, unsynced, while another connection has the
                # file open: sync what is left, since the changes cannot be counted now.
                _fsync(db.path + "-wal")
            else:
                conn.execute("PRAGMA synchronous = FULL")
                if conn.total_changes != before:
                    _fsync(db.path + "-wal")


def _fsync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # no WAL left: every commit is in the database file, synced
        return
    try:
        os.fsync(fd)
    except OSError as err:
        raise StoreError(
            f"commit: cannot sync the write-ahead log ({err.strerror or err})"
        ) from err
    finally:
        os.close(fd)
