"""`ledgerfold compact DB` (every conversation) with one row changed outside ledgerfold: it
stopped at that conversation with one error line (exit 2), those after it never compacted
and no outcome printed for those before; `--dry-run` the same. The damaged conversation is
now an outcome of its own (`failed`, `damaged-row`; the dry run's status `damaged`), named
with its row on stderr, and every other conversation is compacted (planned)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import damaged_db, run
from ledgerfold import SQLiteStore


def _db(tmp_path: Path) -> Path:
    return damaged_db(tmp_path / "agent.db", ("a", "b-damaged", "c"), 12)


def test_compact_goes_on_past_a_damaged_conversation(tmp_path: Path) -> None:
    db = _db(tmp_path)
    result = run("compact", str(db), "--keep-tail", "4", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["conversation"]: row for row in json.loads(result.stdout)}
    assert rows["a"]["status"] == rows["c"]["status"] == "accepted"
    assert rows["b-damaged"] == {
        "conversation": "b-damaged",
        "status": "failed",
        "reason": "damaged-row",
        "summary": None,
        "sources": 0,
    }
    assert "damaged row in table turns, column meta: turn 't1'" in result.stderr
    with SQLiteStore(db, read_only=True) as store:
        assert store.current_summary("c") is not None


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_the_dry_run_too(tmp_path: Path, as_json: bool) -> None:
    db = _db(tmp_path)
    result = run("compact", str(db), "--dry-run", *(["--json"] if as_json else []))
    assert result.exit_code == 0, result.output
    if as_json:
        plans = {plan["conversation"]: plan for plan in json.loads(result.stdout)}
        assert plans["a"]["status"] == plans["c"]["status"] == "first"
        assert plans["b-damaged"]["status"] == "damaged"
    else:
        assert any(line.startswith("b-damaged\tdamaged") for line in result.stdout.splitlines())
    assert "damaged row in table turns, column meta: turn 't1'" in result.stderr
