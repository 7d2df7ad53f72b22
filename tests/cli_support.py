"""Helpers the command-line and erasure tests share: run a subcommand in-process, read its
JSON, make a database with a damaged row, copy a database consistently, look for bytes in a
database file and its WAL, read every table's rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from ledgerfold import SQLiteStore
from ledgerfold._cli import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run_json(*args: str) -> Any:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def damaged_db(db: Path, conversations: tuple[str, ...], turns: int) -> Path:
    """A database of `conversations` of `turns` user turns each, where another tool has
    written `'not json'` into the meta of turn `t1` of the one named `b-damaged`."""
    with SQLiteStore(db) as store:
        for cid in conversations:
            store.append_many(
                cid, [{"id": f"t{n}", "role": "user", "body": f"turn {n}"} for n in range(turns)]
            )
    with sqlite3.connect(db) as conn:  # another tool's write
        conn.execute(
            "UPDATE turns SET meta = 'not json' WHERE conversation_id = 'b-damaged' AND id = 't1'"
        )
    conn.close()
    return db


def copy_db(source: Path, target: Path) -> Path:
    """A consistent copy (WAL included) through SQLite's backup API."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return target


def file_has(path: Path, marker: str) -> bool:
    """Whether `marker`'s bytes are anywhere in the database file or its WAL."""
    data = path.read_bytes()
    wal = Path(f"{path}-wal")
    if wal.exists():
        data += wal.read_bytes()
    return marker.encode() in data


def table_contents(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, text as bytes (damaged text included)."""
    conn = sqlite3.connect(path)
    conn.text_factory = bytes
    try:
        tables = [
            name.decode()
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
        ]
        return {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall() for t in tables}
    finally:
        conn.close()
