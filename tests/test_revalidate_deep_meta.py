"""Revalidation reports damage and never raises on what it reads (docs/revalidation.md). A
live turn outside a current summary whose meta another tool replaced with JSON nested deeper
than Python's parser follows made its unit check (is a source's call or result left out?)
raise RecursionError: `revalidate_database` and `ledgerfold revalidate` failed with a
traceback. Such meta links nothing, as meta that is not JSON does; the run completes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.revalidate import revalidate_database

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000


def test_revalidation_completes_past_deeply_nested_meta(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    with SQLiteStore(path) as store:
        store.append_many(
            "c", [{"id": f"t{n}", "role": "user", "body": f"turn {n}"} for n in range(8)]
        )
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert Compactor(store, policy).compact("c").accepted
    with sqlite3.connect(path) as conn:  # another tool's write, on a turn no summary cites
        conn.execute("UPDATE turns SET meta = ? WHERE id = 't7'", (DEEP,))
    conn.close()
    report = revalidate_database(path, workers=1, mark_stale=False)
    assert report.summaries_checked == 1
    result = run("revalidate", str(path))
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output


def test_a_sealed_summary_citing_a_turn_with_deeply_nested_meta_is_stale(tmp_path: Path) -> None:
    """A summary whose covered turns were partly purged (sealed) is checked by reading its
    live sources back as turns (`_sealed.recheck`): a cited turn whose meta is JSON nested
    deeper than the parser follows raised RecursionError out of the run; it is a damaged
    turn, and the summary citing it stale, as meta that is not JSON makes them."""
    path = tmp_path / "d.db"
    with SQLiteStore(path) as store:
        store.append_many(
            "c", [{"id": f"t{n}", "role": "user", "body": f"turn {n}"} for n in range(8)]
        )
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert Compactor(store, policy).compact("c").accepted
        store.purge_through("c", 3, "retention")
    with sqlite3.connect(path) as conn:  # another tool's write, on a turn the summary cites
        conn.execute("UPDATE turns SET meta = ? WHERE id = 't5'", (DEEP,))
    conn.close()
    for workers in (1, 2):
        report = revalidate_database(path, workers=workers, mark_stale=False)
        assert report.damaged_turns == (("c", "t5"),)
        assert [(s.reason, s.turn_id) for s in report.stale_summaries] == [
            ("source-modified", "t5")
        ]
