"""The `workers` figure of a revalidation (`revalidate_database`, `ledgerfold revalidate`,
text and `--json`) said what was asked (`--workers 100000000`), not what ran: the current
summaries are split into at most one shard per worker, and one worker thread runs per shard
(the caller's own thread for one shard or none). It now reports the workers that ran."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cli_support import run, run_json
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.revalidate import revalidate_database

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
ASKED = 100_000_000


def _db(tmp_path: Path, conversations: int, *, compact: bool = True) -> Path:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        for c in range(conversations):
            for n in range(6):
                store.append(f"c{c}", "user" if n % 2 == 0 else "assistant", f"turn {n}")
            if compact:
                assert Compactor(store, POLICY).compact(f"c{c}", force=True).accepted
    return db


def test_the_report_names_the_workers_that_ran(tmp_path: Path) -> None:
    db = _db(tmp_path, 3)
    names: set[str] = set()

    def progress(done: int) -> None:
        names.add(threading.current_thread().name)

    report = revalidate_database(db, workers=ASKED, mark_stale=False, progress=progress)
    assert report.summaries_checked == 3
    assert report.workers == len(names) == 3  # one thread per summary: 3 shards at most
    assert run_json("revalidate", str(db), "--workers", str(ASKED), "--json")["workers"] == 3
    text = run("revalidate", str(db), "--workers", str(ASKED))
    assert text.exit_code == 0, text.output
    assert "with 3 workers" in text.stdout and f"{ASKED}" not in text.stdout


@pytest.mark.parametrize("compact", [True, False])
def test_one_shard_or_none_runs_on_the_callers_thread(tmp_path: Path, compact: bool) -> None:
    db = _db(tmp_path, 1, compact=compact)
    report = revalidate_database(db, workers=8, mark_stale=False)
    assert report.summaries_checked == int(compact)
    assert report.workers == 1
    assert run_json("revalidate", str(db), "--workers", "8", "--json")["workers"] == 1


def test_as_many_as_asked_when_there_is_work_for_them(tmp_path: Path) -> None:
    db = _db(tmp_path, 4)
    assert revalidate_database(db, workers=2, mark_stale=False).workers == 2
    assert revalidate_database(db, workers=1, mark_stale=False).workers == 1
