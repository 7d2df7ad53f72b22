"""`ledgerfold report` (and `report --html`, `report --json`) said "no conversation needs
attention" of a database where a turn row was changed outside ledgerfold, which `list` and
`compact` name as damaged: the conversation is now listed as needing attention, its reason
the one `list` gives (the row, never its content). A body that is not UTF-8 made `list` fail
as a whole, and the store's error named no row; it is now a `damaged` row of its own, named
as any other damaged row is, the others listed. Real transcripts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cli_support import run

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "openhands.jsonl"
SECRET = "secret-body-text"

#: The damage another tool's write leaves, and what `list` says of it.
DAMAGE = {
    "meta": (
        "UPDATE turns SET meta = 'not json' WHERE pk = ?",
        "damaged row in table turns, column meta: turn ",
    ),
    "body-not-utf8": (
        f"UPDATE turns SET body = CAST(x'{SECRET.encode().hex()}ff' AS TEXT) WHERE pk = ?",
        "damaged row in table turns, column body: turn ",
    ),
}


def _db(tmp_path: Path, damage: str) -> tuple[Path, str, str]:
    db = tmp_path / "agent.db"
    result = run("import", str(db), str(DATA))
    assert result.exit_code == 0, result.output
    result = run("compact", str(db), "--keep-tail", "4")
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:  # another tool's write
        cid, pk, turn_id = conn.execute(
            "SELECT conversation_id, pk, id FROM turns ORDER BY conversation_id, sequence LIMIT 1"
        ).fetchone()
        conn.execute(DAMAGE[damage][0], (pk,))
    conn.close()
    return db, cid, turn_id


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_report_lists_a_damaged_conversation_with_why(tmp_path: Path, damage: str) -> None:
    db, cid, turn_id = _db(tmp_path, damage)
    said = f"{DAMAGE[damage][1]}{turn_id!r} (sequence 1)"
    listed = run("list", str(db), "--json")
    assert listed.exit_code == 0, listed.output
    rows = {row["conversation"]: row for row in json.loads(listed.stdout)}
    assert len(rows) > 1 and rows[cid]["status"] == "damaged" and said in rows[cid]["reason"]
    assert all(row["status"] == "current" for key, row in rows.items() if key != cid)

    result = run("report", str(db), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["attention_total"] == 1
    [row] = report["attention"]
    assert row["conversation"] == cid
    assert row["why"][0].startswith("a row was changed outside ledgerfold: ")
    assert said in row["why"][0] and rows[cid]["reason"] in row["why"][0]

    text = run("report", str(db))
    assert text.exit_code == 0, text.output
    assert "no conversation needs attention" not in text.stdout
    assert "1 of 5 conversations needs attention" in text.stdout
    assert said in text.stdout

    out = tmp_path / "report.html"
    html = run("report", str(db), "--html", str(out))
    assert html.exit_code == 0, html.output
    page = out.read_text(encoding="utf-8")
    attention = page.split('<table id="attention">')[1].split("</table>")[0]
    assert cid.replace("/", "/<wbr>") in attention and "changed outside ledgerfold" in attention
    assert "Needs attention (1)" in page
    compacted = run("compact", str(db), "--json")  # the others go on, as `list` lists them
    assert compacted.exit_code == 0, compacted.output
    outcomes = {row["conversation"]: row for row in json.loads(compacted.stdout)}
    assert outcomes[cid]["reason"] == "damaged-row" and len(outcomes) == len(rows)
    assert said in compacted.stderr
    for output in (listed.output, result.output, text.output, html.output, page):
        assert SECRET not in output
