"""Group commit for the store's worker thread (SPEC §17.6): one transaction and one fsync
for a batch of jobs.

With `durability="full"` every commit is fsynced (`synchronous=FULL`): a store called from
many sessions at once spends most of its time waiting for the disk, one commit at a time.
Jobs queued together on the store's worker (`ledgerfold._worker.StoreWorker`) form a
batch. Its writes share one transaction (`Database.batch`: each job a savepoint of it, so
a failing job rolls back alone), committed once at the batch's end, at the store's own
`synchronous` level: under `"full"` that one COMMIT syncs the WAL once, and no caller of
the batch hears back before it has. If the commit fails (a full disk, or the sync itself:
SQLite then leaves the transaction's frames unpublished and rolls it back), every caller
of the batch gets the `StoreError` and none of the batch's writes is kept: no other call
sees them, nor does the next open of the file (the frames the failed commit left in the WAL
are overwritten at once: `Database._void_failed_frames`). If a job's checkpoint or close
committed the batch early, that commit's failure concerns the jobs up to it (`BatchEnd`),
and those after it keep their own outcomes (they committed on their own, each synced).

The batch holds the store's lock, so a call from another thread meanwhile waits and then
commits on its own, as always. A read-only store needs no batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ledgerfold.store._database import BatchEnd, Database

__all__ = ["batch"]


@contextmanager
def batch(db: Database) -> Iterator[BatchEnd | None]:
    """Run the enclosed jobs as one group commit (see the module); yields how the batch's
    transaction ended early, if it does (`BatchEnd`), or None when there is no batch."""
    if db.read_only or db.closed:
        yield None
        return
    with db.lock, db.batch() as end:
        yield end
