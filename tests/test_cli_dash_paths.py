"""`-` means stdin or stdout by convention. Where a command writes a database or a
directory, which cannot go to stdout (`demo --db -`, `import - FILE`, `export --parquet -`),
`-` is one error line naming it, exit 2, instead of a file or directory named `-` made
without a word. A path named `-` is `./-`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # where `-` would be made
    with SQLiteStore(tmp_path / "agent.db") as store:
        store.append("c", "user", "hello")
    line = {
        "conversation_id": "t",
        "source": "s",
        "turns": [{"id": "t:1", "sequence": 1, "role": "user", "body": "hi"}],
    }
    (tmp_path / "t.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["demo", "--db", "-"], "--db -: "),
        (["import", "-", "t.jsonl"], "-: "),
        (["export", "agent.db", "--parquet", "-"], "--parquet -: "),
    ],
    ids=["demo", "import", "export"],
)
def test_dash_where_a_file_is_written_is_one_error_line(
    here: Path, args: list[str], named: str
) -> None:
    before = sorted(path.name for path in here.iterdir())
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"ledgerfold: error: {named}")
    assert "not stdout" in result.stderr and "./-" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert sorted(path.name for path in here.iterdir()) == before


def test_dot_slash_dash_names_a_database_called_dash(here: Path) -> None:
    result = run("import", "./-", "t.jsonl")
    assert result.exit_code == 0, result.output
    with SQLiteStore(here / "-", read_only=True) as store:
        assert store.conversation_ids() == ["t"]
