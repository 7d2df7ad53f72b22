"""`report --html` of a database whose current summary's stored source count another tool
changed to something that is no count (text, not UTF-8 text): the report's row for the
conversation counted it as the turns the summary covers and its bar compared it with the
live turns, so the page failed with a TypeError traceback and nothing was written. A count
that is not one is now counted as no covered turn; the page is written, the others listed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)


@pytest.mark.parametrize("count", ["'many'", "CAST(X'35ff' AS TEXT)", "X'05'"])
def test_report_html_writes_the_page(tmp_path: Path, count: str) -> None:
    path = tmp_path / "r.db"
    with SQLiteStore(path) as store:
        for cid in ("damaged", "fine"):
            store.append_many(
                cid, [{"id": f"{cid}{n}", "role": "user", "body": f"turn {n}"} for n in range(6)]
            )
            assert Compactor(store, POLICY).compact(cid).accepted
    with sqlite3.connect(path) as conn:  # another tool's write
        conn.execute(
            f"UPDATE summaries SET source_count = {count} WHERE conversation_id = 'damaged'"
        )
    conn.close()
    out = tmp_path / "report.html"
    result = run("report", "--html", str(out), str(path))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "damaged" in page and "fine" in page
