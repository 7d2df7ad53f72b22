"""`ledgerfold report` on a live database is one snapshot. Its totals (`stats()`) and its
rows were read in one read transaction, but whether a conversation's turns can be read back
(a row changed outside ledgerfold) was read after, through the store's own connection, one
snapshot per conversation: a writer that committed in between (here: erasing the damaged
turn, which the store allows) made the report count the damaged turn as live in its totals
and yet list no damaged conversation. The report now reads that in its own snapshot too. A
real second writer (a thread with a `SQLiteStore` of its own) commits between the reads."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import SQLiteStore
from ledgerfold._cli import html_data

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "openhands.jsonl"


def _damaged_db(tmp_path: Path) -> tuple[Path, str, str]:
    """Real transcripts, compacted, one tail turn's meta changed by another tool."""
    db = tmp_path / "agent.db"
    assert run("import", str(db), str(DATA)).exit_code == 0
    assert run("compact", str(db), "--keep-tail", "4").exit_code == 0
    with sqlite3.connect(db) as conn:
        cid, pk, turn_id = conn.execute(
            "SELECT conversation_id, pk, id FROM turns ORDER BY conversation_id, sequence DESC"
            " LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE turns SET meta = 'not json' WHERE pk = ?", (pk,))
    conn.close()
    return db, cid, turn_id


def _report(db: Path) -> dict[str, Any]:
    result = run("report", str(db), "--json")
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    del found["database"]
    return found


def test_a_commit_between_the_reads_shows_in_all_of_the_report_or_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, cid, turn_id = _damaged_db(tmp_path)
    before = tmp_path / "before.db"
    shutil.copyfile(db, before)
    expected = _report(before)  # the database as the report's snapshot has it
    assert [row["conversation"] for row in expected["attention"]] == [cid]
    real = html_data.read_stats
    wrote: list[BaseException | None] = []

    def erase() -> None:
        try:
            with SQLiteStore(db) as store:
                store.retract(cid, turn_id, erase=True)
            wrote.append(None)
        except BaseException as error:  # reported below
            wrote.append(error)

    def then_a_writer_commits(*args: Any, **kwargs: Any) -> Any:
        stats = real(*args, **kwargs)  # the totals are read: a writer commits now
        writer = threading.Thread(target=erase)
        writer.start()
        writer.join(timeout=60)
        return stats

    monkeypatch.setattr(html_data, "read_stats", then_a_writer_commits)
    found = _report(db)
    assert wrote == [None]  # the writer did commit while the report read
    assert found == expected
    monkeypatch.undo()
    after = _report(db)  # the next report sees the erasure everywhere
    assert after["attention"] == []
    assert after["stats"]["turns"] == expected["stats"]["turns"] - 1
