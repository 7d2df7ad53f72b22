"""Where `inspect --html` and `report --html` may write: never over the database they read
(its file, a link to it, or the WAL, shared-memory or journal file beside it). A typo such
as `ledgerfold report agent.db --html agent.db` is one error line, and the ledger is as it
was."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


def _db(path: Path) -> Path:
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(4)])
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _commands(db: Path, out: Path) -> list[list[str]]:
    return [
        ["report", str(db), "--html", str(out)],
        ["inspect", str(db), "c", "--html", str(out)],
    ]


@pytest.mark.parametrize("command", [0, 1], ids=["report", "inspect"])
@pytest.mark.parametrize("spelling", ["same", "relative", "link"])
def test_the_database_itself_is_never_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: int, spelling: str
) -> None:
    db = _db(tmp_path / "agent.db")
    before = _digest(db)
    out = db
    if spelling == "relative":
        (tmp_path / "sub").mkdir()
        monkeypatch.chdir(tmp_path / "sub")
        out = Path("..") / "agent.db"
    elif spelling == "link":
        out = tmp_path / "report.html"
        os.symlink(db, out)
    result = run(*_commands(db, out)[command])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("ledgerfold: error: ") and "database" in result.stderr
    assert _digest(db) == before
    with SQLiteStore(db, read_only=True) as store:
        assert len(store.load("c").turns) == 4
    assert not (tmp_path / "agent.pages").exists()


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_nor_the_files_sqlite_keeps_beside_it(tmp_path: Path, suffix: str) -> None:
    db = _db(tmp_path / "agent.db")
    for argv in _commands(db, Path(f"{db}{suffix}")):
        result = run(*argv)
        assert result.exit_code == 2, result.output
        # What it is: the file SQLite keeps beside the database, not the database itself.
        assert f": is the {suffix} file of the database {db}, not a page" in result.stderr
    with SQLiteStore(db, read_only=True) as store:
        assert len(store.load("c").turns) == 4


def test_another_file_beside_it_is_written(tmp_path: Path) -> None:
    db = _db(tmp_path / "agent.db")
    for argv in _commands(db, tmp_path / "agent.db.html"):
        assert run(*argv).exit_code == 0
    assert (tmp_path / "agent.db.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_report_run_again_leaves_no_page_of_a_deleted_conversation(tmp_path: Path) -> None:
    """The pages folder holds the pages of this run only: the page of a conversation erased
    since the last run (its bodies and summary text) does not stay beside the report. A
    file of the reader's own there is left alone."""
    db = tmp_path / "agents.db"
    with SQLiteStore(db) as store:
        for cid in ("kept", "erased"):
            store.append_many(
                cid, [{"role": "user", "body": f"{cid} secret {n}"} for n in range(4)]
            )
    out = tmp_path / "r.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    pages = tmp_path / "r.pages"
    (pages / "notes.html").write_text("mine")
    assert len(list(pages.iterdir())) == 3
    with SQLiteStore(db) as store:
        store.delete_conversation("erased")
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    left = sorted(p.name for p in pages.iterdir())
    assert len(left) == 2 and "notes.html" in left
    assert not any("erased secret" in p.read_text(encoding="utf-8") for p in pages.iterdir())


@pytest.mark.parametrize("command", [0, 1], ids=["report", "inspect"])
def test_an_empty_output_path_is_one_error_line_naming_the_option(
    tmp_path: Path, command: int
) -> None:
    """`--html ''` (an unset shell variable) names the option and what to give, not the
    current directory ("`: is a directory`")."""
    db = _db(tmp_path / "agent.db")
    argv = _commands(db, tmp_path / "x.html")[command]
    argv[argv.index("--html") + 1] = ""
    result = run(*argv)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("ledgerfold: error: --html: ")
    assert "file name" in result.stderr and len(result.stderr.splitlines()) == 1
