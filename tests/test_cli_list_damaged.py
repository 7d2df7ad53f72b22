"""`ledgerfold list DB` with one row changed outside ledgerfold (a turn's meta that is not
JSON): the listing failed as a whole, one error line and no conversation listed, while
`report` gave the totals of the same file. The damaged conversation is now listed as
`damaged`, the reason naming the row, and every other one as before; exit 0, as finding
problems is not an error."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import damaged_db, run


def _db(tmp_path: Path) -> Path:
    return damaged_db(tmp_path / "agent.db", ("a-fine", "b-damaged", "c-fine"), 3)


def test_list_names_the_damaged_conversation_and_lists_the_others(tmp_path: Path) -> None:
    db = _db(tmp_path)
    result = run("list", str(db), "--json")
    assert result.exit_code == 0, result.output
    rows = {row["conversation"]: row for row in json.loads(result.stdout)}
    assert sorted(rows) == ["a-fine", "b-damaged", "c-fine"]
    assert rows["a-fine"]["status"] == "none" and rows["a-fine"]["turns"] == 3
    damaged = rows["b-damaged"]
    assert damaged["status"] == "damaged" and damaged["turns"] is None
    assert "damaged row in table turns, column meta: turn 't1'" in damaged["reason"]
    text = run("list", str(db))
    assert text.exit_code == 0, text.output
    line = next(line for line in text.stdout.splitlines() if line.startswith("b-damaged"))
    assert "damaged (damaged row in table turns, column meta" in line


def test_report_html_writes_the_page_of_a_conversation_with_a_damaged_row(
    tmp_path: Path,
) -> None:
    """`report --html` skipped that conversation's inspector page in silence ("wrote ... and
    2 inspector pages"), its row unlinked and listed among those needing no attention; then
    with a warning naming the row. Its page is now written, the damaged turn marked on it
    (`test_inspect_html_damaged_turns.py`)."""
    db = _db(tmp_path)
    result = run("report", str(db), "--html", str(tmp_path / "report.html"))
    assert result.exit_code == 0, result.output
    assert "3 inspector pages" in result.stdout
    assert "warning" not in result.stderr
