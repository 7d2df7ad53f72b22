"""`-` means stdin or stdout by convention. Where a command writes a database or a
directory, which cannot go to stdout (`demo --db -`, `import - FILE`, `export --parquet -`),
`-` is one error line naming it, exit 2, instead of a file or directory named `-` made
without a word; `import DB -` reads stdin. A path named `-` is `./-`."""

from __future__ import annotations

import json
import subprocess
import sys
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


def _import(db: Path, *files: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The real command, stdin piped in (as `zcat t.jsonl.gz | ledgerfold import DB -`)."""
    return subprocess.run(
        [sys.executable, "-m", "ledgerfold", "import", str(db), *files],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_import_dash_reads_stdin(here: Path) -> None:
    db = here / "piped.db"
    result = _import(db, "-", stdin=(here / "t.jsonl").read_text(encoding="utf-8"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "imported 1 conversation, 1 turn\n"
    with SQLiteStore(db, read_only=True) as store:
        assert store.conversation_ids() == ["t"]
    assert not (here / "-").exists()


def test_import_dash_twice_is_one_error_line(here: Path) -> None:
    result = _import(here / "piped.db", "-", "-", stdin="")
    assert result.returncode == 2
    assert (
        result.stderr == "ledgerfold: error: -: stdin given more than once (it can be read once)\n"
    )
    assert not (here / "piped.db").exists()
