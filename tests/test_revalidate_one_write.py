"""A deep revalidation writes what it found in one transaction: the summaries it marks
stale and the digests it repairs commit together, so a run whose write fails (or is
interrupted) leaves the database exactly as it was, and a rerun finishes the job. (The
marks used to commit first: a failed repair left them, half the run's outcome.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import SQLiteStore, StoreError, create_summary_envelope
from ledgerfold.revalidate import revalidate_database

POLICY = "v1"


def _ledger(path: Path) -> tuple[str, str]:
    """A summarised conversation; then a source body changed behind the store's back."""
    with SQLiteStore(path) as store:
        for index in range(8):
            store.append("c", "user" if index % 2 == 0 else "assistant", f"turn {index}")
        plan = store.start_plan("c", 2, POLICY)
        envelope = create_summary_envelope(plan, store.load("c").turns, "s1", POLICY, "summary")
        assert store.commit_summary(envelope).accepted
        source = plan.compacted_ids[1]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE turns SET body = body || ' edited' WHERE id = ?", (source,))
    conn.close()
    return "s1", source


def _state(path: Path) -> list[object]:
    with sqlite3.connect(path) as conn:
        state = [
            conn.execute("SELECT id, status, reason FROM summaries ORDER BY pk").fetchall(),
            conn.execute("SELECT pk, digest FROM turns ORDER BY pk").fetchall(),
            conn.execute("SELECT id, revision FROM conversations ORDER BY id").fetchall(),
        ]
    conn.close()
    return state


def test_a_failed_repair_leaves_the_summaries_unmarked(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    summary_id, source = _ledger(path)
    # Another program's trigger refuses the digest repair: a real SQLite failure mid-write.
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse_repair BEFORE UPDATE OF digest ON turns"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
    conn.close()
    before = _state(path)
    with pytest.raises(StoreError):
        revalidate_database(path, workers=1)
    assert _state(path) == before  # the summary is still current: nothing was written
    with SQLiteStore(path) as store:
        assert store.current_summary("c") is not None

    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER refuse_repair")
    conn.close()
    report = revalidate_database(path, workers=1)
    assert [(item.summary_id, item.reason) for item in report.stale_summaries] == [
        (summary_id, "source-modified")
    ]
    assert report.digests_repaired == 1 and report.wrong_digests == (("c", source),)
    with SQLiteStore(path) as store:
        assert store.current_summary("c") is None
        assert [record.status for record in store.summary_history("c")] == ["stale"]
    again = revalidate_database(path, workers=1)
    assert again.stale == 0 and again.digests_wrong == 0
