"""`ledgerfold revalidate` in the terminal says how many live turns it checked beyond the
summaries' sources: on a ledger never compacted it read "re-hashed 0 turns", as if it had
checked nothing, while it had checked every stored digest."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore


def test_a_ledger_never_compacted_is_checked_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "raw.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(5)])
    result = run("revalidate", str(db), "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "re-hashed 0 turns" in result.stdout
    assert "checked the stored digest of 5 live turns no current summary cites: 0 wrong" in (
        " ".join(result.stdout.split())
    )


def test_the_turns_beside_a_summarys_sources_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(10)])
        Compactor(store, CompactionPolicy("v1", keep_tail=4, min_new_turns=1)).compact("c")
    with sqlite3.connect(db) as conn:  # a raw tail turn changed outside ledgerfold
        conn.execute("UPDATE turns SET body = 'changed' WHERE sequence = 10")
    conn.close()
    text = " ".join(run("revalidate", str(db), "--workers", "1").stdout.split())
    assert "re-hashed 6 turns" in text
    assert "checked the stored digest of 4 live turns no current summary cites: 1 wrong" in text
