"""`ledgerfold report DB --json` (SPEC §15.7: `--json` on every subcommand that reports):
the store's totals (`stats()`) and the conversations that need attention, each with why, as
strict JSON an operator's monitoring can read — with `--html` too, or alone (then it writes
no file)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
POLICY = CompactionPolicy("report-json-v1", keep_tail=4, min_new_turns=1)


def _build(db: Path) -> set[str]:
    """Real transcripts, two compacted then edited (their summaries go stale)."""
    assert run("import", str(db), str(DATA / "tau_bench.jsonl")).exit_code == 0
    with SQLiteStore(db) as store:
        stale = set(store.conversation_ids()[:2])
        compactor = Compactor(store, POLICY)
        for cid in stale:
            assert compactor.compact(cid, force=True).accepted
            current = store.current_summary(cid)
            assert current is not None
            store.edit(cid, current.source_ids[-1], body="corrected")
    return stale


def _json(*args: str) -> Any:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_alone_prints_totals_and_attention_and_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    stale = _build(db)
    before = sorted(os.listdir(tmp_path))
    report = _json("report", str(db), "--json")
    assert sorted(os.listdir(tmp_path)) == before
    with SQLiteStore(db, read_only=True) as store:
        assert report["stats"] == store.stats().as_dict()
    assert report["attention_total"] == len(stale)
    assert {row["conversation"] for row in report["attention"]} == stale
    for row in report["attention"]:
        assert row["why"] == ["context falls back to raw turns: stale summary (source-modified)"]
    assert report["html"] is None and report["pages"] == 0


def test_json_with_html_says_what_it_wrote(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    _build(db)
    out = tmp_path / "report.html"
    report = _json("report", str(db), "--html", str(out), "--json")
    with SQLiteStore(db, read_only=True) as store:
        total = len(store.conversation_ids())
    assert report["html"] == str(out) and out.is_file()
    assert report["pages"] == total == len(list((tmp_path / "report.pages").iterdir()))
    assert report["pages_dir"] == str(tmp_path / "report.pages")
