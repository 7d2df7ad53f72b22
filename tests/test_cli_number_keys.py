"""The commands over a database where another tool stored a conversation's key as a number
(its `conversations` table made again without text affinity: `UPDATE ... SET id = 42` then
stores the integer 42) or as a blob. `list` showed such a key as text that is not UTF-8
("bad bytes replaced"), with nothing to find the row by, and `inspect`, `purge` and `delete`
of any unknown name crashed with a traceback (`AttributeError`, `TypeError`) while looking
for a name to suggest. Such a conversation is now listed (and reported) as damaged with its
storage named and `key_sql`, the SQL literal that selects that row and no other (the text
key "42" is another conversation), and an unknown name is the usual one-line error."""

from __future__ import annotations

import json
import re
import sqlite3
from html import escape
from pathlib import Path

import pytest

from cli_support import run, run_json
from ledgerfold import SQLiteStore

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "tau_bench.jsonl"
#: The table as another tool may make it again: the same columns, none of them typed.
_UNTYPED = """
PRAGMA foreign_keys = OFF;
CREATE TABLE conversations_copy (
    id PRIMARY KEY, revision, last_sequence, current_summary, pruned_count DEFAULT 0
);
INSERT INTO conversations_copy
    SELECT id, revision, last_sequence, current_summary, pruned_count FROM conversations;
DROP TABLE conversations;
ALTER TABLE conversations_copy RENAME TO conversations;
"""
#: Each stored key, its storage class, what `list` names it by and its `key_sql`.
KEYS = {
    "integer": (42, "42", "42"),
    "real": (4.5, "4.5", "4.5"),
    "blob": (b"42", "42", "X'3432'"),
}


@pytest.fixture(params=sorted(KEYS))
def db(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, list[str]]:
    """Real transcripts; one conversation's key replaced by a number or a blob, and a
    sound conversation whose key is text of the same characters."""
    path = tmp_path / "agent.db"
    assert run("import", str(path), str(DATA)).exit_code == 0
    assert run("compact", str(path), "--keep-tail", "4").exit_code == 0
    kind = request.param
    stored, shown, _ = KEYS[kind]
    with SQLiteStore(path) as store:  # a sound key of the same characters
        store.append(shown, "user", "a conversation named by the same text")
    conn = sqlite3.connect(path)
    try:
        keys = [row[0] for row in conn.execute("SELECT id FROM conversations ORDER BY id")]
        damaged = keys[2]
        if not isinstance(stored, bytes):
            conn.executescript(_UNTYPED)
        # A number in the typed `turns` is text again: there, only the blob is kept apart.
        tables = [("conversations", "id")] + [("turns", "conversation_id")] * (kind == "blob")
        for table, column in tables:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (stored, damaged))
        conn.commit()
        assert conn.execute(
            "SELECT typeof(id) FROM conversations WHERE id = ?", (stored,)
        ).fetchone() == (kind,)
    finally:
        conn.close()
    return path, kind, [key for key in keys if key != damaged]


def test_list_flags_the_key_and_gives_the_sql_that_selects_it(
    db: tuple[Path, str, list[str]],
) -> None:
    path, kind, others = db
    _, shown, literal = KEYS[kind]
    rows = run_json("list", str(path), "--json")
    # A number in `conversations` alone leaves the turns of the old key behind: listed too.
    orphans = [row for row in rows if "no row in table conversations" in (row["reason"] or "")]
    assert len(orphans) == (kind != "blob")
    rows = [row for row in rows if row not in orphans]
    assert len(rows) == len(others) + 1
    named = [row for row in rows if row["conversation"] == shown]
    assert sorted(row["status"] for row in named) == ["damaged", "none"]
    damaged = next(row for row in named if row["status"] == "damaged")
    assert f"stored as {'a blob' if kind == 'blob' else f'an SQLite {kind}'}" in damaged["reason"]
    assert "not UTF-8" not in damaged["reason"]
    assert damaged["key_sql"] == literal
    assert all(row["key_sql"] is None for row in rows if row is not damaged)
    with sqlite3.connect(path) as conn:  # the literal selects that row and no other
        found = conn.execute(
            f"SELECT typeof(id) FROM conversations WHERE id = {damaged['key_sql']}"
        ).fetchall()
    conn.close()
    assert found == [(kind,)]
    text = run("list", str(path))
    assert text.exit_code == 0, text.output
    assert f"in SQL: id = {literal}" in text.stdout.replace("\n", "")


def test_report_names_the_storage(db: tuple[Path, str, list[str]]) -> None:
    path, kind, _ = db
    report = json.loads(run("report", str(path), "--json").stdout)
    why = [row["why"] for row in report["attention"] if row["conversation"] == KEYS[kind][1]]
    assert len(why) == 1 and "stored as" in why[0][0] and "not UTF-8" not in why[0][0]


@pytest.mark.parametrize(
    "command",
    [
        ("inspect",),
        ("purge", "--through", "3", "--reason", "retention"),
        ("delete",),
    ],
)
def test_an_unknown_name_is_the_usual_error(
    db: tuple[Path, str, list[str]], command: tuple[str, ...]
) -> None:
    path, _, others = db
    result = run(command[0], str(path), "no-such-conversation", *command[1:])
    assert result.exit_code == 2, result.output
    assert "unknown conversation 'no-such-conversation'" in result.stderr
    typo = run(command[0], str(path), others[0][:-1] + "9", *command[1:])
    assert typo.exit_code == 2 and "unknown conversation" in typo.stderr


def test_the_report_page_links_only_the_text_key(
    db: tuple[Path, str, list[str]], tmp_path: Path
) -> None:
    """The damaged row linked to the page of the text key of the same characters (its shown
    name): another conversation's page. It has none now, and its why gives `key_sql`."""
    path, kind, others = db
    _, shown, literal = KEYS[kind]
    out = tmp_path / "report.html"
    done = run("report", str(path), "--html", str(out))
    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    cell = rf"<td class=mono>(<a href=\"[^\"]*\">)?{re.escape(shown)}(</a>)?</td>"
    cells = re.findall(cell, page)
    assert sorted(bool(link) for link, _ in cells) == [False, True]
    assert escape(f"(in SQL: id = {literal})") in page
    assert len(list((tmp_path / "report.pages").iterdir())) == len(others)
