"""`ledgerfold report DB` alone prints the report in the terminal: the totals first, then
the conversations that need attention, each with why (IDs, counts and reasons, never a turn
body); it writes no file. Piped, its table is tab-separated rows."""

from __future__ import annotations

import os
from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore
from test_cli_report_json import _build
from test_cli_terminal import EVIL_CONVERSATION, assert_clean


def test_report_alone_prints_totals_then_what_needs_attention(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    stale = _build(db)  # two conversations whose summary went stale (edited "corrected")
    with SQLiteStore(db, read_only=True) as store:
        stats = store.stats()
    before = sorted(os.listdir(tmp_path))
    result = run("report", str(db))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert sorted(os.listdir(tmp_path)) == before  # it prints, it writes nothing
    lines = result.stdout.splitlines()
    assert f"{stats.conversations} conversations" in lines[0]
    totals = "\n".join(lines[: lines.index(next(x for x in lines if "need attention" in x))])
    assert f"{stats.turns:,} live turns" in totals
    assert f"{stats.summaries['stale']} stale" in totals
    assert f"2 of {stats.conversations} conversations need attention" in result.stdout
    rows = [line.split("\t") for line in lines if line.split("\t")[0] in stale]
    assert sorted(row[0] for row in rows) == sorted(stale)
    for row in rows:
        assert row[1] == "context falls back to raw turns: stale summary (source-modified)"
    assert "corrected" not in result.stdout  # no body


def test_report_alone_on_a_healthy_database_says_so(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    with SQLiteStore(db) as store:
        store.append(EVIL_CONVERSATION, "user", "hello there")
    result = run("report", str(db))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].endswith("1 conversation")
    assert "no conversation needs attention" in result.stdout
    assert "hello there" not in result.stdout
    assert_clean(result, "report")


def test_conversations_never_compacted_are_not_reported_as_bare_fallbacks(tmp_path: Path) -> None:
    """Right after `import`, every context "falls back" with `no-summary`: the report says
    that means not compacted yet (it read as 244 contexts in trouble), in the terminal and
    on the page's card; the stale fallbacks keep their bare reason."""
    db = tmp_path / "agents.db"
    _build(db)
    text = run("report", str(db)).stdout
    (line,) = [x for x in text.splitlines() if "contexts falling back" in x]
    assert "no-summary" in line and ": not compacted yet" in line
    assert "stale-summary:source-modified 2" in line
    page = run("report", str(db), "--html", "-").stdout
    assert "fallback: no-summary (not compacted yet)</div>" in page
    assert "fallback: stale-summary:source-modified</div>" in page
