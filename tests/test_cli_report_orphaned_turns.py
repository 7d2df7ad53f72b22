"""`report` over a database where another tool changed a conversation's key in its
`conversations` row alone (`UPDATE conversations SET id = 42 ...`), leaving its turns and
summaries under the old key. The totals' live turns counted the turns left behind, but no
row of the report (text, `--json`, `--html`) listed them: its totals and its listing
disagreed. The old key is now listed among what needs attention, as damage (a row changed
outside ledgerfold), with the SQL that selects its turns, as `list` shows it; it has no
inspector page (no command can name it)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

OLD = "o'brien/run 1"  # a quote: the literal doubles it
LITERAL = "'o''brien/run 1'"
TURNS = 8


def _renamed(tmp_path: Path) -> Path:
    """Conversations a and b, and OLD compacted, whose key another tool then changed to 42
    in its `conversations` row alone."""
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        for cid in ("a", "b"):
            store.append(cid, "user", f"hello from {cid}")
        for n in range(TURNS):
            store.append(OLD, "user" if n % 2 == 0 else "assistant", f"turn {n}")
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert Compactor(store, policy).compact(OLD, force=True).accepted
    with sqlite3.connect(db) as conn:  # another tool's write
        conn.execute("UPDATE conversations SET id = 42 WHERE id = ?", (OLD,))
    conn.close()
    return db


def test_the_report_lists_the_turns_its_totals_count(tmp_path: Path) -> None:
    db = _renamed(tmp_path)
    report = json.loads(run("report", str(db), "--json").stdout)
    why = {row["conversation"]: row["why"] for row in report["attention"]}
    assert sorted(why) == sorted(["42", OLD])
    assert report["attention_total"] == 2
    (left,) = why[OLD]
    assert "no row in table conversations" in left
    assert f"in SQL: conversation_id = {LITERAL}" in left
    with sqlite3.connect(db) as conn:  # the SQL it gives selects the turns left behind
        (found,) = conn.execute(
            f"SELECT count(*) FROM turns WHERE conversation_id = {LITERAL} AND state = 0"
        ).fetchone()
        (live,) = conn.execute("SELECT count(*) FROM turns WHERE state = 0").fetchone()
    conn.close()
    assert found == TURNS and report["stats"]["turns"] == live == TURNS + 2

    text = run("report", str(db))
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert "4 conversations (of them 1 key whose turns have no row" in flat
    assert "2 of 4 conversations need attention" in flat
    assert "o'brien/run 1" in flat and f"conversation_id = {LITERAL}" in flat

    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    attention = page[page.index('<table id="attention">') : page.index("</table>")]
    assert "o&#x27;brien/<wbr>run 1" in attention or "o&#39;brien/<wbr>run 1" in attention
    assert "Needs attention (2)" in page and "Other conversations (2)" in page
    # The totals' cards add up to the heading's 4: 3 conversation rows and 1 orphaned key,
    # whose card is in trouble.
    assert re.search(r'<div class="stat" data-stat="conversations"><b>3</b>', page)
    assert re.search(
        r'<div class="stat bad" data-stat="orphaned_keys"><b>1</b>orphaned turn key</div>', page
    )
    # Its row counts the turns the totals count, and links to no page.
    row = attention[attention.index("brien") :]
    row = row[: row.index("</tr>")]
    assert f"<td>{TURNS}</td>" in row and "href" not in row
    pages = {p.name for p in (tmp_path / "report.pages").iterdir()}
    assert len(pages) == 3  # a, b and "42"


def test_a_sound_database_lists_no_such_key(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append("a", "user", "hello")
    report = json.loads(run("report", str(db), "--json").stdout)
    assert report["attention_total"] == 0
    text = run("report", str(db)).stdout
    assert "1 conversation\n" in text and "no row in table conversations" not in text
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    assert "orphaned_keys" not in out.read_text(encoding="utf-8")
