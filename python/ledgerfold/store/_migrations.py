"""Bringing a ledgerfold file to the newest schema: WAL mode, the migrations in
`_schema.MIGRATIONS`, each in a transaction of its own, and the indexes every writing open
creates when missing."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator

from ledgerfold._errors import StoreError
from ledgerfold.store._schema import ADDED_INDEXES, APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

__all__ = ["ensure_indexes", "enter_wal", "migrate", "schema_version"]

#: SQLite's primary result code of a busy database (`sqlite3.SQLITE_BUSY` from Python 3.11).
_SQLITE_BUSY = 5


def enter_wal(conn: sqlite3.Connection, timeout: float = 30.0) -> None:
    """Put the file in WAL mode (a no-op once it is). Switching a new file from its rollback
    journal needs an exclusive lock, and SQLite answers a busy file at once there, without
    its busy handler: when several processes open the same new file together, all but one
    would fail. A busy switch is retried for up to `timeout` seconds (the busy timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as err:
            code = getattr(err, "sqlite_errorcode", None)  # Python 3.11+; the message before
            busy = code & 0xFF == _SQLITE_BUSY if code is not None else "locked" in str(err)
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)


def migrate(conn: sqlite3.Connection, path: str, now: Callable[[], str]) -> None:
    """Apply the migrations the file lacks, oldest first, each in one transaction (`now`:
    the store's clock, for `applied_at`)."""
    for version, name, ddl in MIGRATIONS:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = schema_version(conn, path)
            if current >= version:
                conn.execute("COMMIT")
                continue
            for statement in _statements(ddl):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, now()),
            )
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def ensure_indexes(conn: sqlite3.Connection) -> None:
    """`_schema.ADDED_INDEXES`, each created in a transaction of its own when missing (a file
    written before they were added): building one reads every turn, so the write lock is
    held for one index at a time, as the migrations' batches hold it (SPEC §17.9)."""
    present = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    for name, ddl in ADDED_INDEXES:
        if name in present:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(ddl)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def missing_indexes(conn: sqlite3.Connection) -> list[str]:
    """The names of `_schema.ADDED_INDEXES` the file lacks (written by a ledgerfold before
    them, and not opened for writing since): reads answer the same without them, walking
    rows where they would probe."""
    present = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    return [name for name, _ in ADDED_INDEXES if name not in present]


def schema_version(conn: sqlite3.Connection, path: str) -> int:
    """The file's schema version (0: a new, empty file); `StoreError` for another
    application's file, a store without its migration table, or a newer schema."""
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if application_id != APPLICATION_ID:
        if tables:
            raise StoreError(f"{path}: an SQLite database that is not a ledgerfold store")
        return 0
    if "schema_migrations" not in tables:
        raise StoreError(f"{path}: a ledgerfold store without its migration table")
    version = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
    if version is None:
        return 0
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: schema version {version} is newer than this ledgerfold ({SCHEMA_VERSION})"
        )
    return int(version)


def _statements(script: str) -> Iterator[str]:
    """Split a DDL script into statements (`executescript` would commit the transaction)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
