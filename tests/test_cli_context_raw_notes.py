"""`context` with no summary in use: every row's "raw because / covers" cell was blank,
so the column the table is read by said nothing. A conversation never compacted says
`no summary yet`; one whose summary went stale says `fallback` (the last line gives the
reason)."""

from __future__ import annotations

from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore


def _rows(stdout: str) -> list[list[str]]:
    """The table's rows (piped output: tab-separated), header and title left out."""
    lines = [line.split("\t") for line in stdout.splitlines()]
    return [cells for cells in lines if len(cells) == 5 and cells[0].isdigit()]


def _db(path: Path, compact: bool) -> Path:
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"Step {n}."} for n in range(10)])
        if compact:
            policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
            assert Compactor(store, policy).compact("c").status == "accepted"
            store.edit("c", store.load("c").turns[0].id, body="Step 0, changed.")
    return path


def test_a_conversation_never_compacted_says_no_summary_yet(tmp_path: Path) -> None:
    result = run("context", str(_db(tmp_path / "agent.db", compact=False)), "c")
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert len(rows) == 10
    assert {cells[3] for cells in rows} == {"no summary yet"}


def test_a_stale_summary_says_fallback(tmp_path: Path) -> None:
    result = run("context", str(_db(tmp_path / "agent.db", compact=True)), "c")
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert len(rows) == 10
    assert {cells[3] for cells in rows} == {"fallback"}
    assert "fallback: stale-summary:source-modified" in result.stdout
