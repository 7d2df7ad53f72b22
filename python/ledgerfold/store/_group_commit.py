"""Group commit for the store's worker thread (SPEC §17.6): one transaction and one fsync
for a batch of jobs.

With `durability="full"` every commit is fsynced (`synchronous=FULL`): a store called from
many sessions at once spends most of its time waiting for the disk, one commit at a time.
Jobs queued together on the store's worker (`ledgerfold._worker.StoreWorker`) form a
batch. Its writes share one transaction (`Database.batch`: each job a savepoint of it, so
a failing job rolls back alone), committed once at the batch's end. With `"full"` that
commit runs at `synchronous=NORMAL` (the WAL frames are written, not yet fsynced), and then
the WAL file is fsynced once, which makes every frame written before durable, before any
caller of the batch hears back; a WAL checkpoint in between syncs what it copies itself
(SQLite does that at `NORMAL`). If the commit fails, every caller of the batch gets the
`StoreError` and none of the batch's writes is kept; if a job's checkpoint or close committed
the batch early, that commit's failure concerns the jobs up to it (`BatchEnd`), and those
after it keep their own outcomes (they committed on their own).

The batch holds the store's lock, so a call from another thread meanwhile waits and then
commits on its own (with `synchronous=FULL` under `"full"`), as always. A read-only store
needs no batch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ledgerfold._errors import StoreError
from ledgerfold.store._database import BatchEnd, Database

__all__ = ["batch"]


@contextmanager
def batch(db: Database) -> Iterator[BatchEnd | None]:
    """Run the enclosed jobs as one group commit (see the module); yields how the batch's
    transaction ended early, if it does (`BatchEnd`), or None when there is no batch."""
    if db.read_only or db.closed:
        yield None
        return
    if db.durability != "full" or db.path == ":memory:":
        with db.lock, db.batch() as end:
            yield end
        return
    with db.lock:
        conn = db.connection()
        conn.execute("PRAGMA synchronous = NORMAL")
        before = conn.total_changes
        try:
            with db.batch() as end:
                yield end
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
