"""`ledgerfold revalidate` counted the turn rows too damaged to hash ("2 damaged rows could
not be hashed") without saying which: an operator had to find them with SQL. They are now
named, conversation and turn ID (`damaged_turns` in `--json`, a line each in the text),
never their bodies. Real transcripts, compacted, then changed by another tool's write."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cli_support import run

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "openhands.jsonl"
SECRET = "secret-body-text"


def _db(tmp_path: Path) -> tuple[Path, list[tuple[str, str]]]:
    """Two damaged rows: a body that is not UTF-8 in one conversation's raw tail (no summary
    cites it), a meta that is not JSON in a turn another conversation's summary cites."""
    db = tmp_path / "agent.db"
    assert run("import", str(db), str(DATA)).exit_code == 0
    result = run("compact", str(db), "--keep-tail", "4")
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:  # another tool's write
        first, second = [row[0] for row in conn.execute("SELECT id FROM conversations LIMIT 2")]
        tail = conn.execute(
            "SELECT pk, id FROM turns WHERE conversation_id = ? ORDER BY sequence DESC LIMIT 1",
            (first,),
        ).fetchone()
        cited = conn.execute(
            "SELECT t.pk, t.id FROM turns t JOIN summary_sources s ON s.turn_id = t.id"
            " JOIN conversations c ON c.current_summary = s.summary_pk AND c.id = ?"
            " WHERE t.conversation_id = ? ORDER BY t.sequence LIMIT 1",
            (second, second),
        ).fetchone()
        conn.execute(
            f"UPDATE turns SET body = CAST(x'{SECRET.encode().hex()}ff' AS TEXT) WHERE pk = ?",
            (tail[0],),
        )
        conn.execute("UPDATE turns SET meta = 'not json' WHERE pk = ?", (cited[0],))
    conn.close()
    return db, sorted([(first, tail[1]), (second, cited[1])])


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_revalidate_names_the_damaged_rows(tmp_path: Path, as_json: bool) -> None:
    db, damaged = _db(tmp_path)
    workers = "2" if as_json else "1"  # shared among workers, or read by one
    result = run("revalidate", str(db), "--workers", workers, *(["--json"] if as_json else []))
    assert result.exit_code == 0, result.output
    assert SECRET not in result.output
    if as_json:
        report = json.loads(result.stdout)
        assert report["turns_damaged"] == 2
        named = [(row["conversation"], row["turn"]) for row in report["damaged_turns"]]
        assert sorted(named) == damaged
        return
    assert "2 damaged rows could not be hashed" in result.stdout
    for conversation_id, turn_id in damaged:
        assert f"  conversation {conversation_id} turn {turn_id} (damaged row)" in result.stdout
