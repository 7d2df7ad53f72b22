"""The read commands over a database where another tool stored a conversation's key as text
that is not UTF-8 (in every table that holds it). `report` (text, `--json`, `--html`)
crashed with SQLite's own error, a traceback whose message quotes the stored bytes; `list`
and `inspect` of any other conversation failed as a whole. The conversation is now listed as
damaged, named with its bad bytes replaced (as `ledgerfold revalidate` names it), with no
inspector page (no command can name it), and every other conversation as before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cli_support import run

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "tau_bench.jsonl"
#: The stored key: its first bytes are text, then a byte that is not UTF-8.
SECRET = "secret-key"
_TABLES = (
    ("turns", "conversation_id"),
    ("conversations", "id"),
    ("source_runs", "conversation_id"),
    ("summaries", "conversation_id"),
)


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str, list[str]]:
    """Real transcripts, compacted; one conversation's key replaced by one that is not UTF-8
    text. Returns the database, that conversation's old key and the other keys."""
    path = tmp_path / "agent.db"
    assert run("import", str(path), str(DATA)).exit_code == 0
    assert run("compact", str(path), "--keep-tail", "4").exit_code == 0
    conn = sqlite3.connect(path)
    try:
        keys = [row[0] for row in conn.execute("SELECT id FROM conversations ORDER BY id")]
        assert len(keys) > 2
        damaged = keys[1]
        conn.execute("PRAGMA foreign_keys = OFF")
        for table, column in _TABLES:
            conn.execute(
                f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE {column} = ?",
                (SECRET.encode() + b"\xff", damaged),
            )
        conn.commit()
    finally:
        conn.close()
    return path, damaged, [key for key in keys if key != damaged]


def test_report_lists_the_conversation_whose_key_is_not_text(
    db: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    path, _, others = db
    shown = SECRET + "\ufffd"
    result = run("report", str(path), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["stats"]["conversations"] == len(others) + 1
    why = {row["conversation"]: row["why"] for row in report["attention"]}
    assert "its conversation key is not UTF-8 text" in why[shown][0]
    text = run("report", str(path))
    assert text.exit_code == 0, text.output
    assert "Traceback" not in text.output and "its conversation key is not UTF-8" in text.output
    out = tmp_path / "report.html"
    html = run("report", str(path), "--html", str(out))
    assert html.exit_code == 0, html.output
    page = out.read_text(encoding="utf-8")
    assert shown in page
    pages = sorted(p.name for p in (tmp_path / "report.pages").iterdir())
    assert len(pages) == len(others)  # every other conversation's page, none for that one


def test_list_and_inspect_go_on_past_it(db: tuple[Path, str, list[str]], tmp_path: Path) -> None:
    path, _, others = db
    result = run("list", str(path), "--json")
    assert result.exit_code == 0, result.output
    rows = {row["conversation"]: row for row in json.loads(result.stdout)}
    assert sorted(rows) == sorted([*others, SECRET + "\ufffd"])
    damaged = rows[SECRET + "\ufffd"]
    assert damaged["status"] == "damaged" and "key is not UTF-8 text" in damaged["reason"]
    assert all(rows[key]["status"] != "damaged" for key in others)
    inspected = run("inspect", str(path), others[0], "--json")
    assert inspected.exit_code == 0, inspected.output
    out = tmp_path / "page.html"
    assert run("inspect", str(path), others[0], "--html", str(out)).exit_code == 0
    unknown = run("inspect", str(path), "no-such-conversation")
    assert unknown.exit_code == 2
    assert "unknown conversation 'no-such-conversation'" in unknown.stderr
