"""`list` over a database where another tool changed a conversation's key in its
`conversations` row alone (`UPDATE conversations SET id = 42 ...`: the column's text
affinity stores the text "42"), leaving its turns and summaries under the old key. `list`
showed "42" as a sound conversation never summarised (`none`) while `report` said its
context falls back (its row points at another conversation's summary), and it listed the
old key's turns nowhere (no command names them). "42" is now `stale` with the context's
reason, as `report` has it, and the old key is listed as damaged, with `key_sql`, the SQL
literal that selects its turns."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cli_support import run, run_json
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "tau_bench.jsonl"
OLD = "o'brien/run 1"  # a quote: the literal doubles it


def _renamed(tmp_path: Path) -> tuple[Path, int]:
    db = tmp_path / "agent.db"
    assert run("import", str(db), str(DATA)).exit_code == 0
    with SQLiteStore(db) as store:
        for n in range(8):
            store.append(OLD, "user" if n % 2 == 0 else "assistant", f"turn {n}")
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert Compactor(store, policy).compact(OLD, force=True).accepted
    with sqlite3.connect(db) as conn:  # another tool's write
        conn.execute("UPDATE conversations SET id = 42 WHERE id = ?", (OLD,))
        assert conn.execute("SELECT typeof(id) FROM conversations WHERE id = '42'").fetchone() == (
            "text",
        )
    conn.close()
    return db, 8


def test_list_says_what_report_says_and_lists_the_turns_left_behind(tmp_path: Path) -> None:
    db, turns = _renamed(tmp_path)
    rows = run_json("list", str(db), "--json")
    by_name = {row["conversation"]: row for row in rows}
    renamed = by_name["42"]
    assert renamed["status"] == "stale"
    assert renamed["reason"] == "stale-summary:conversation-mismatch"
    report = json.loads(run("report", str(db), "--json").stdout)
    # The turns left behind need attention too: `report` lists what its totals count.
    assert [row["conversation"] for row in report["attention"]] == ["42", OLD]
    left = by_name[OLD]
    assert left["status"] == "damaged" and "no row in table conversations" in left["reason"]
    assert left["key_sql"] == "'o''brien/run 1'"
    with sqlite3.connect(db) as conn:  # the literal selects the turns left behind
        (found,) = conn.execute(
            f"SELECT count(*) FROM turns WHERE conversation_id = {left['key_sql']}"
        ).fetchone()
    conn.close()
    assert found == turns
    assert sum(row["status"] == "damaged" for row in rows) == 1
    text = run("list", str(db))
    assert text.exit_code == 0, text.output
    flat = text.stdout.replace("\n", "")
    assert "in SQL: conversation_id = 'o''brien/run 1'" in flat


def test_a_sound_database_lists_nothing_more(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    assert run("import", str(db), str(DATA)).exit_code == 0
    rows = run_json("list", str(db), "--json")
    assert all(row["status"] == "none" and row["key_sql"] is None for row in rows)
