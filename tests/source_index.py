"""A check of the shared source index (schema v4) for the tests: no run is orphaned or
holds rows no version reads, each run's rows are contiguous, and each version reads exactly
its own sources through the `summary_sources` view."""

from __future__ import annotations

import sqlite3


def check_source_index(conn: sqlite3.Connection) -> None:
    accepted = conn.execute(
        "SELECT pk, conversation_id, source_run, source_count FROM summaries"
        " WHERE status IN ('current', 'superseded', 'stale')"
    ).fetchall()
    for pk, conversation_id, run_pk, count in accepted:
        assert run_pk is not None, pk
        run = conn.execute("SELECT conversation_id FROM source_runs WHERE pk = ?", (run_pk,))
        assert run.fetchone() == (conversation_id,), (pk, run_pk)
        visible = conn.execute(
            "SELECT COUNT(*) FROM summary_sources WHERE summary_pk = ?", (pk,)
        ).fetchone()[0]
        assert visible == count, (pk, visible, count)
    # No other record reads a run (rejected and failed ones have no index rows).
    assert not conn.execute(
        "SELECT 1 FROM summaries WHERE source_run IS NOT NULL"
        " AND status NOT IN ('current', 'superseded', 'stale')"
    ).fetchall()
    runs = conn.execute(
        "SELECT r.pk, (SELECT MAX(source_count) FROM summaries WHERE source_run = r.pk),"
        " (SELECT COUNT(*) FROM run_sources WHERE run_pk = r.pk),"
        " (SELECT MAX(position) FROM run_sources WHERE run_pk = r.pk) FROM source_runs AS r"
    ).fetchall()
    for run_pk, longest, rows, last in runs:
        assert longest is not None, f"run {run_pk} is read by no version"
        assert rows == longest, (run_pk, rows, longest)  # nothing beyond what is read
        assert rows == 0 or last == rows - 1, (run_pk, rows, last)  # positions 0..n-1
    assert not conn.execute(
        "SELECT 1 FROM run_sources WHERE run_pk NOT IN (SELECT pk FROM source_runs)"
    ).fetchall()
