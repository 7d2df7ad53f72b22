"""Helpers the command-line and erasure tests share: run a subcommand in-process, read its
JSON, copy a database consistently, look for bytes in a database file and its WAL."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from ledgerfold._cli import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run_json(*args: str) -> Any:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


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
