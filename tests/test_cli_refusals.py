"""A writing command that refuses (an unknown conversation, `--through` beyond the last
sequence without `--force`) writes nothing: it decides on a read-only open, so an older
schema is not migrated, no WAL is left behind, and a missing database is not created."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore
from test_search_migration import v4_turns, write_v4_database

_REFUSED = {
    "purge unknown": (["purge", "{db}", "nope", "--through", "1", "--reason", "r"], "unknown"),
    "purge beyond": (["purge", "{db}", "c", "--through", "999", "--reason", "r"], "beyond"),
    "compact unknown": (["compact", "{db}", "--conversation", "nope"], "unknown"),
    "delete unknown": (["delete", "{db}", "nope", "--yes"], "unknown"),
}


def _state(directory: Path) -> dict[str, str]:
    return {
        name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(directory))
    }


def _checkpointed(path: Path) -> None:
    """A file closed cleanly: its WAL folded in and removed."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    assert os.listdir(path.parent) == [path.name]


@pytest.mark.parametrize("case", sorted(_REFUSED))
@pytest.mark.parametrize("schema", ["v4", "current"])
def test_a_refused_writing_command_writes_nothing(tmp_path: Path, case: str, schema: str) -> None:
    directory = tmp_path / "db"
    directory.mkdir()
    db = directory / "ledger.db"
    if schema == "v4":
        write_v4_database(db, v4_turns(12))  # a refusal must not migrate it
    else:
        with SQLiteStore(db) as store:
            store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    _checkpointed(db)
    before = _state(directory)
    args, expected = _REFUSED[case]
    result = run(*(arg.format(db=db) for arg in args))
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert _state(directory) == before  # same bytes, no -wal, no -shm


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_a_refused_writing_command_creates_no_database(tmp_path: Path, case: str) -> None:
    db = tmp_path / "missing.db"
    args, _ = _REFUSED[case]
    result = run(*(arg.format(db=db) for arg in args))
    assert result.exit_code == 2
    assert result.stderr.startswith("ledgerfold: error: ") and "no such database" in result.stderr
    assert os.listdir(tmp_path) == []
