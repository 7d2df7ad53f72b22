"""Several processes opening the same new file at once (SPEC §12: "several processes may
open the same file"): each open either creates the store or finds the one another has just
created; none refuses the file.

The interleavings are made deterministic with a second, real connection to the same file:
one that commits another opener's first migration between the opener's reads of the
header, and one that reads the file (another opener reading the header) while the opener
switches it to WAL.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.store import _migrations as migrations
from ledgerfold.store._schema import APPLICATION_ID

_CONNECT = sqlite3.connect


def _commit_first_migration(path: Path) -> None:
    """What another process's opener commits first in a new file: its first migration's
    tables and the application ID, in one transaction (a lock it cannot get is no commit)."""
    other = _CONNECT(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)")
        other.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        other.execute("COMMIT")
    except sqlite3.OperationalError:
        if other.in_transaction:
            other.execute("ROLLBACK")
    finally:
        other.close()


def test_a_store_created_between_the_header_reads_is_not_another_applications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "new.db"
    done: list[str] = []

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = _CONNECT(*args, **kwargs)

        def trace(statement: str) -> None:
            # The opener reads the header's application ID (0: a new file), then looks for
            # tables: another opener commits its first migration just before that look.
            if "FROM sqlite_master" in statement and not done:
                done.append(statement)
                _commit_first_migration(path)

        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "hello")
    monkeypatch.undo()
    assert done
    with lf.SQLiteStore(path) as store:
        assert [turn.body for turn in store.load("c").turns] == ["hello"]


def test_a_new_file_another_opener_writes_while_it_opens_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "new.db"
    writer = _CONNECT(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another opener, in its first migration
    opened: list[object] = []
    met = threading.Event()  # the opener met the lock (or gave up on it)

    class Clock:
        """`time` for the WAL switch's retries: its first wait says it met the lock."""

        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            met.set()
            time.sleep(seconds)

    monkeypatch.setattr(migrations, "time", Clock)

    def open_store() -> None:
        try:
            with lf.SQLiteStore(path) as store:
                store.append("c", "user", "hello")
            opened.append("ok")
        except lf.LedgerfoldError as err:
            opened.append(err)
        finally:
            met.set()

    opener = threading.Thread(target=open_store)
    opener.start()
    assert met.wait(60)  # the opener meets the lock while switching the new file to WAL
    writer.execute("COMMIT")
    writer.close()
    opener.join(timeout=60)
    assert opened == ["ok"]
    with lf.SQLiteStore(path) as store:
        assert [turn.body for turn in store.load("c").turns] == ["hello"]
        assert store._connection().execute("PRAGMA journal_mode").fetchone() == ("wal",)
