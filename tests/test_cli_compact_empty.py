"""`compact` (and `compact --dry-run`) of a database that holds no conversation says so in
one line, as `list` does, instead of printing the title and header of a table with no row
(and, without `--dry-run`, a last line reading `none`); `--json` stays `[]`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    SQLiteStore(path).close()
    return path


@pytest.mark.parametrize("flags", [[], ["--dry-run"]])
def test_no_conversation_is_one_line(empty_db: Path, flags: list[str]) -> None:
    result = run("compact", str(empty_db), *flags)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"no conversation in {empty_db}: nothing to compact\n"


@pytest.mark.parametrize("flags", [[], ["--dry-run"]])
def test_json_is_an_empty_list(empty_db: Path, flags: list[str]) -> None:
    result = run("compact", str(empty_db), "--json", *flags)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_a_database_with_conversations_still_gets_its_table(empty_db: Path) -> None:
    with SQLiteStore(empty_db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    result = run("compact", str(empty_db))
    assert result.exit_code == 0, result.output
    assert "accepted: 1" in result.stdout and "nothing to compact" not in result.stdout
