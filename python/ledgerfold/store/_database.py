"""Opening a ledgerfold SQLite file (its pragmas; the schema steps are `_migrations`), its
transactions and group-commit batches.

Durability: WAL with `synchronous=FULL`, so a returned commit survives power loss (the WAL
is fsynced at every commit). Every write is one `BEGIN IMMEDIATE` transaction, which takes
the database's write lock up front: across processes, writes are serialised and a plan or a
commit always sees the newest committed state. Every read of more than one query runs in one
read transaction, so it sees one snapshot.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Protocol

from ledgerfold import _validate
from ledgerfold._errors import StoreError
from ledgerfold.store import _fork as fork
from ledgerfold.store import _migrations as migrations
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._paths import connect_reading, refuse_unwritable
from ledgerfold.store._schema import APPLICATION_ID, READABLE_VERSION
from ledgerfold.store._search_damage import write_error
from ledgerfold.store._sqlite_errors import quotes_stored_data, store_error

__all__ = [
    "DURABILITIES",
    "INDEX_FREE",
    "BatchEnd",
    "Database",
    "Transaction",
    "durability_arg",
    "now",
    "time_ago",
]

_log = logging.getLogger("ledgerfold.store")

#: SQLite's primary result code of an I/O error (`sqlite3.SQLITE_IOERR` from Python 3.11).
_SQLITE_IOERR = 10


@dataclass(slots=True)
class BatchEnd:
    """What `Database.batch` yields: whether the batch's shared transaction ended before the
    batch did (`early`: a job's checkpoint or close committed it), and the failure of that
    commit (`error`, None when it committed). The jobs after that point ran as transactions
    of their own: the batch raises `error` at its end, but it concerns the jobs before."""

    early: bool = False
    error: BaseException | None = None


#: `SQLiteStore(durability=...)` values.
DURABILITIES = ("full", "normal")

#: Operations that neither read nor delete search-index rows: inside a group-commit batch
#: they run without writing the rows the batch's appends left pending first (`transaction`).
#: Any other operation writes them first; a path that reads the index with rows pending
#: raises (`_search_index._flushed`), so a missing name here is a slowdown, never a wrong
#: answer.
INDEX_FREE = frozenset(
    {"append", "append_chat", "begin_compaction", "commit_summary", "consecutive_failures"}
    | {"context", "current_summary", "get_turns", "known_ids", "load", "record_failure"}
)


class Transaction(Protocol):
    """The store's transaction: one per call, under its lock, named for the operation
    (`SQLiteStore._transaction`); what the objects and functions doing a method's work
    inside it are given. `scope`: the one conversation a write changes, when it changes no
    other's rows (see `_context_cache`); None (any write may) is always correct."""

    def __call__(
        self, *, write: bool, operation: str, scope: str | None = None
    ) -> AbstractContextManager[sqlite3.Connection]: ...


def durability_arg(value: object) -> str:
    return _validate.choice("durability", value, DURABILITIES)


def now() -> str:
    """The current time as ISO-8601 UTC with microseconds (how the store dates records)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def time_ago(seconds: float) -> str | None:
    """The time `seconds` ago as `now()` writes it, or None when that is before year 1 (a
    valid duration, `_validate.duration`, that no record is old enough to match)."""
    try:
        return (datetime.now(timezone.utc) - timedelta(seconds=seconds)).isoformat(
            timespec="microseconds"
        )
    except OverflowError:
        return None


class Database:
    """One connection to a ledgerfold file (or `":memory:"`), migrated to the newest schema.

    Every use goes through `transaction()`, which holds the instance's lock: one instance may
    be shared by threads."""

    def __init__(self, path: str, durability: str = "full", *, read_only: bool = False) -> None:
        _validate.flag("read_only", read_only)
        self.path = path
        self.durability = durability
        self.read_only = read_only
        self.lock = threading.RLock()
        #: What a call after `close()` is told (another reason after a fork: `_fork`).
        self.closed_why = "the store is closed"
        #: An erasing call's checkpoint was blocked by a reader: retried after each write.
        self.checkpoint_pending = False
        #: Rows written by the transaction statements themselves (BEGIN, SAVEPOINT, RELEASE,
        #: COMMIT: FTS5 writes its index then), not by any statement of a caller.
        self.control_changes = 0
        # Inside a group-commit batch (`batch()`): the batch's writes share one transaction.
        self._in_batch = False
        # Why the batch's transaction is lost (SQLite rolled it back), or None.
        self._batch_lost: str | None = None
        # The batch's commit failed (at its end, or earlier for a checkpoint or a close).
        self._batch_error: BaseException | None = None
        # How the current batch's transaction ended early, if it did (`BatchEnd`).
        self._batch_end = BatchEnd()
        # The batch's transaction was begun (by its first write) and not yet ended.
        self._batch_open = False
        # Job savepoints open now (a job's store call may open one inside another's).
        self._savepoints = 0
        self._conn: search_index.IndexConnection | None = None
        try:
            if read_only:
                conn = connect_reading(
                    path,
                    isolation_level=None,
                    check_same_thread=False,
                    factory=search_index.IndexConnection,
                )
            else:
                refuse_unwritable(path)
                conn = sqlite3.connect(
                    path,
                    isolation_level=None,
                    check_same_thread=False,
                    factory=search_index.IndexConnection,
                )
        except sqlite3.Error as err:
            raise StoreError(f"{path}: cannot open the database ({err})") from err
        try:
            if read_only:
                self._check_readable(conn)
            else:
                self._setup(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        fork.track(self)

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        """Close the connection; later transactions raise `StoreError`. Idempotent."""
        with self.lock:
            try:
                if self._conn is not None and self._in_batch:
                    # A job of a batch closes the store: keep what it did.
                    self._commit_batch(early=True)
            finally:
                if self._conn is not None and self.checkpoint_pending:
                    with suppress(StoreError):
                        self.checkpoint(wait_ms=0)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

    def connection(self) -> search_index.IndexConnection:
        """The open connection (raises `StoreError` once closed)."""
        if self._conn is None:
            raise StoreError(self.closed_why)
        return self._conn

    @contextmanager
    def transaction(self, *, write: bool, operation: str = "store") -> Iterator[sqlite3.Connection]:
        """One transaction; any failure rolls it back. sqlite errors become `StoreError`
        naming `operation` (see `write_error`). Inside a batch (`batch()`), a write, and
        any use after one, is a savepoint of the batch's transaction instead: its failure
        rolls back its own changes only, and what it did is committed at the batch's end."""
        with self.lock:
            conn = self.connection()
            if write and self.read_only:
                raise StoreError(f"{operation}: the store was opened read-only")
            nested = self._in_batch and (write or conn.in_transaction)
            self._notice_lost(conn)
            if nested and self._batch_lost is not None:
                raise StoreError(f"{operation}: {self._batch_lost}")
            if nested and not self._savepoints and conn.pending and operation not in INDEX_FREE:
                # This job may read or delete index rows. Only between jobs: inside another
                # job's savepoint its rollback would undo rows of jobs already done (an
                # index read there raises instead: `_search_index._flushed`).
                self._flush_index(conn, operation)
            mark = len(conn.pending) if nested and conn.pending is not None else 0
            try:
                if nested and not conn.in_transaction:
                    self._control(conn, "BEGIN IMMEDIATE")
                    self._batch_open = True
                self._control(
                    conn, "SAVEPOINT lf_job" if nested else "BEGIN IMMEDIATE" if write else "BEGIN"
                )
            except sqlite3.Error as err:
                raise StoreError(f"{operation}: cannot start a transaction ({err})") from err
            self._savepoints += nested
            committing = False
            try:
                yield conn
                committing = write and not nested
                self._control(conn, "RELEASE lf_job" if nested else "COMMIT")
                committing = False
                if write and not nested and self.checkpoint_pending:
                    with suppress(StoreError):
                        self.checkpoint(wait_ms=0)
            except BaseException as exc:
                if nested:
                    self._rollback_job(conn, exc if isinstance(exc, sqlite3.Error) else None)
                    if conn.pending is not None:
                        del conn.pending[mark:]  # the job's index rows go with its changes
                else:
                    _rollback(conn)
                    if committing and isinstance(exc, sqlite3.Error):
                        self._void_failed_frames(conn, exc)
                if not isinstance(exc, sqlite3.Error):
                    raise
                error = write_error(conn, exc, operation=operation, write=write, path=self.path)
                if quotes_stored_data(exc):
                    raise error from None  # SQLite's message quotes the stored bytes
                raise error from exc
            finally:
                self._savepoints -= nested

    @contextmanager
    def batch(self) -> Iterator[BatchEnd]:
        """Jobs run back to back as one write transaction (group commit, `_group_commit`):
        each write is a savepoint of it (`transaction`), and it commits once, at the end,
        so the per-transaction work (FTS5 flushing its index, the commit's WAL frames) is
        done once per batch. The caller holds the lock. If the end cannot commit, or SQLite
        rolled the transaction back on an error (a full disk), it raises `StoreError`:
        none of the batch's writes is kept, and none of its callers may hear otherwise.
        When a job's checkpoint or close committed the batch early, the failure of that
        commit is raised at the end instead, and concerns only the jobs up to that point
        (the `BatchEnd` yielded says so): those after it committed on their own."""
        self._in_batch, self._batch_lost, self._batch_error = True, None, None
        self._batch_end = end = BatchEnd()
        self._savepoints = 0
        conn = self.connection()
        conn.pending = []  # the batch's index rows (`_search_index.flush_pending`)
        try:
            yield end
        except BaseException:
            if self._in_batch and not self.closed:
                _rollback(self.connection())
            self._in_batch, self._batch_open = False, False
            self._batch_lost, self._batch_error = None, None
            conn.pending = None
            raise
        if self._in_batch and not self.closed:
            with suppress(StoreError):
                self._commit_batch()
        conn.pending = None
        self._in_batch = False
        error, self._batch_error = self._batch_error, None
        if error is not None:
            raise error

    def _commit_batch(self, *, early: bool = False) -> None:
        """Commit the batch's transaction and end the batch. `early`: a job's checkpoint or
        close asks for it, and the jobs after this one run as transactions of their own. A
        failure fails the jobs of the batch so far (`batch()` raises it at its end), whoever
        saw it first."""
        conn = self.connection()
        self._notice_lost(conn)
        lost, self._batch_lost, self._in_batch = self._batch_lost, None, False
        self._batch_open = False
        self._batch_end.early = early
        error: StoreError | None = None
        if lost is not None:
            _rollback(conn)
            error = StoreError(f"commit: {lost}")
        elif conn.in_transaction:
            try:
                self._control(conn, search_index.flush_pending)
                self._control(conn, "COMMIT")
            except sqlite3.Error as err:
                _rollback(conn)
                self._void_failed_frames(conn, err)
                error = write_error(conn, err, operation="commit", write=True, path=self.path)
            except BaseException as exc:  # not SQLite's (the index rows' segmenting): keep nothing
                _rollback(conn)
                conn.pending = None
                self._batch_error = self._batch_end.error = exc
                raise
        conn.pending = None  # the jobs after this one index as they append
        if error is not None:
            self._batch_error = self._batch_end.error = error
            raise error
        if self.checkpoint_pending:
            with suppress(StoreError):
                self.checkpoint(wait_ms=0)

    def _void_failed_frames(self, conn: sqlite3.Connection, error: sqlite3.Error) -> None:
        """After a COMMIT that failed with an I/O error (the WAL's sync, SPEC §17.6). Such a
        commit has written its frames, commit mark included, past the WAL's last commit:
        SQLite ignores them (its WAL index ends before them), but its recovery, at the next
        open of the file once no connection holds it (this process closed it while the disk
        still failed, or died, even long after the disk came back), would read them as a
        commit: the writes every caller heard had failed would be back. A transaction of no
        change (the schema version written again) is written over their start, which breaks
        their checksum chain, so recovery stops before them; its own sync may fail too (it
        changes nothing, kept or not). A disk that takes no write at all cannot be helped:
        logged."""
        code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+; the message before
        io_error = code & 0xFF == _SQLITE_IOERR if code is not None else "I/O" in str(error)
        if not io_error or self.path == ":memory:" or conn.in_transaction:
            return
        try:
            conn.execute("PRAGMA busy_timeout = 1000")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    (version,) = conn.execute("PRAGMA user_version").fetchone()
                    conn.execute(f"PRAGMA user_version = {int(version)}")
                    conn.execute("COMMIT")
                finally:
                    _rollback(conn)
            finally:
                conn.execute("PRAGMA busy_timeout = 30000")
        except sqlite3.Error as err:
            _log.warning(
                "failed commit's frames left in the WAL: path=%s (%s); the next commit"
                " overwrites them",
                self.path,
                err,
            )

    def _notice_lost(self, conn: sqlite3.Connection, cause: sqlite3.Error | None = None) -> None:
        """The batch's transaction was begun and is gone (SQLite rolled it back on an error,
        `cause` when known, or a statement ended it): its jobs so far are lost, and the
        batch fails, saying why (SQLite's message, unless it may quote stored text)."""
        if self._batch_open and not conn.in_transaction and self._batch_lost is None:
            why = "" if cause is None or quotes_stored_data(cause) else f" ({cause})"
            self._batch_lost = f"the batch's transaction was rolled back{why}"

    def _rollback_job(self, conn: sqlite3.Connection, cause: sqlite3.Error | None) -> None:
        """A failed job of a batch (`cause`: its SQLite error, if that is what failed it):
        back to its savepoint (unless the whole transaction is gone: `_notice_lost`)."""
        self._notice_lost(conn, cause)
        if not conn.in_transaction:
            return
        try:
            self._control(conn, "ROLLBACK TO lf_job")
            self._control(conn, "RELEASE lf_job")
        except sqlite3.Error as err:
            _rollback(conn)
            self._batch_lost = f"the batch's transaction could not be rolled back ({err})"

    def _control(
        self, conn: sqlite3.Connection, statement: str | Callable[[sqlite3.Connection], None]
    ) -> None:
        """Run a transaction statement (or the index flush), counting the rows it writes as
        no caller's (`control_changes`)."""
        before = conn.total_changes
        try:
            if callable(statement):
                statement(conn)
            else:
                conn.execute(statement)
        finally:
            self.control_changes += conn.total_changes - before

    def _flush_index(self, conn: search_index.IndexConnection, operation: str) -> None:
        """Write the batch's pending index rows before a job that may read or delete them
        starts (outside its savepoint, so its rollback cannot undo them). A failure loses
        the batch: the rows of jobs already done could not be written."""
        try:
            self._control(conn, search_index.flush_pending)
        except sqlite3.Error as err:
            _rollback(conn)
            self._batch_lost = f"the search index could not be written ({err})"
            raise write_error(conn, err, operation=operation, write=True, path=self.path) from None
        except BaseException as exc:
            _rollback(conn)
            self._batch_lost = f"the search index could not be written ({type(exc).__name__})"
            raise

    def vacuum(self) -> None:
        """Rewrite the whole file (SQLite's `VACUUM`), then checkpoint it: no byte of deleted
        content is left anywhere in it. `secure_delete` zeroes a deleted row and a freed
        page, not a page's unused space, where SQLite can leave an older copy of a row as
        it reorganises pages. Atomic: a failure (a full
        disk: it needs about the file's size free) leaves the file as it was."""
        with self.lock:
            if self.read_only:
                raise StoreError("vacuum: the store was opened read-only")
            conn = self.connection()
            if self._in_batch and conn.in_transaction:
                self._commit_batch(early=True)  # VACUUM runs outside any transaction
            try:
                conn.execute("VACUUM")
            except sqlite3.Error as err:
                raise store_error(conn, err, operation="vacuum", write=True) from None
            self.checkpoint()
        _log.info("vacuumed: path=%s", self.path)

    def checkpoint(self, *, wait_ms: int = 1000) -> None:
        """Copy the WAL into the database file and truncate it, so pages that held erased
        content survive in neither (after a purge, an erase or a deletion). A reader that
        holds an old snapshot can keep the WAL from being truncated, and a full disk can
        keep the checkpoint from writing: neither is an error (the caller's transaction has
        committed); it is logged and the checkpoint is retried after the next write and at
        `close()` (SPEC §16.5 "Erasure"), without waiting for readers then."""
        with self.lock:
            if self.path == ":memory:":
                return
            conn = self.connection()
            if self._in_batch and conn.in_transaction:
                # Erased content leaves the WAL now, not at the batch end.
                self._commit_batch(early=True)
            try:
                # Readers are waited for briefly, not for the whole busy timeout.
                conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
                try:
                    busy, frames, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                finally:
                    conn.execute("PRAGMA busy_timeout = 30000")
            except sqlite3.Error as err:
                # The caller's write has committed: a full disk leaves the pages in the WAL.
                if not self.checkpoint_pending:
                    _log.warning(
                        "checkpoint failed: path=%s (%s); retried after the next write",
                        self.path,
                        err,
                    )
                self.checkpoint_pending = True
                return
            blocked = bool(busy) or frames != done
            if blocked and not self.checkpoint_pending:
                _log.warning(
                    "checkpoint blocked by a reader: path=%s; retried after the next write",
                    self.path,
                )
            elif not blocked and self.checkpoint_pending:
                _log.info("checkpoint done after a retry: path=%s", self.path)
            self.checkpoint_pending = blocked

    # ------------------------------------------------------------------ opening

    def _check_readable(self, conn: sqlite3.Connection) -> None:
        """A read-only open: the file must already be a readable ledgerfold store (nothing
        can be created, migrated or indexed)."""
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("BEGIN")
            try:
                version = migrations.schema_version(conn, self.path)
                missing = migrations.missing_indexes(conn) if version else []
            finally:
                conn.execute("COMMIT")
        except sqlite3.OperationalError as err:  # locked, unreadable: SQLite, but not usable
            raise StoreError(f"{self.path}: cannot read the database ({err})") from err
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path}: not an SQLite database ({err})") from err
        if version == 0:
            raise StoreError(f"{self.path}: not a ledgerfold database (empty)")
        # An older schema the store can still read (search raises until it is upgraded).
        if version < READABLE_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} needs an upgrade; open it once for writing"
            )
        if missing:  # reads answer the same, walking rows: said once, at the open
            _log.info(
                "%s: %d indexes of newer versions are missing (%s): some reads walk rows; "
                "open it once for writing (or `ledgerfold upgrade`) to build them",
                *(self.path, len(missing), ", ".join(missing)),
            )

    def _setup(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            # Reading the header first: a file that is not SQLite fails here, not halfway.
            # One read transaction: another process creating the same new file commits its
            # first migration (tables and application ID together) before or after both
            # reads, never between them (it would read as another application's tables).
            conn.execute("BEGIN")
            try:
                application_id = conn.execute("PRAGMA application_id").fetchone()[0]
                foreign_tables = (
                    application_id == 0
                    and conn.execute(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1"
                    ).fetchone()
                )
            finally:
                _rollback(conn)
        except sqlite3.OperationalError as err:  # read-only, locked: SQLite, but not usable
            raise StoreError(f"{self.path}: cannot open the database for writing ({err})") from err
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path}: not an SQLite database ({err})") from err
        # Refuse another application's file before changing anything in it (journal mode).
        if application_id not in (0, APPLICATION_ID):
            raise StoreError(f"{self.path}: an SQLite database of another application")
        if foreign_tables:
            raise StoreError(f"{self.path}: an SQLite database that is not a ledgerfold store")
        try:
            if self.path != ":memory:":
                migrations.enter_wal(conn)
            # "full": every commit is fsynced (survives power loss). "normal": WAL commits are
            # fsynced at checkpoints only: durable across app crashes, never corrupt, but
            # the last commits may be lost on power loss.
            level = "FULL" if self.durability == "full" else "NORMAL"
            conn.execute(f"PRAGMA synchronous = {level}")
            conn.execute("PRAGMA foreign_keys = ON")
            # Erased and purged bodies are overwritten with zeros, not left in free pages
            # (SPEC §15.5).
            conn.execute("PRAGMA secure_delete = ON")
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.path}: cannot prepare the database ({err})") from err
        try:
            migrations.migrate(conn, self.path, now)
            migrations.ensure_indexes(conn)
            # The search index (SPEC §16.5, §17.9): built in batches that commit as they go.
            search_index.build(conn, self.path)
        except sqlite3.Error as err:
            raise StoreError(f"{self.path}: cannot prepare the database ({err})") from err


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        # SQLite may already have rolled back (e.g. after SQLITE_FULL); what is on disk is
        # then the state before the transaction.
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
