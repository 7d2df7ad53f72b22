"""An empty path (an unset shell variable: `ledgerfold export DB --parquet "$OUT"`) is named
as empty, as the database path and a transcript path are: `Path('')` is the current
directory, so the export's error spoke of a directory `'.'` the user never typed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(4)])
    return path


def test_export_to_an_empty_directory_path_says_it_is_empty(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # an empty current directory: nothing else refuses it
    result = run("export", str(db), "--parquet", "")
    assert result.exit_code == 2
    assert result.stderr == "ledgerfold: error: --parquet: the directory path is empty\n"
    assert os.listdir(work) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list", ""], "the database path is empty"),
        (["import", "{db}", ""], "the transcript path is empty"),
    ],
)
def test_the_other_empty_paths_are_named_alike(db: Path, args: list[str], message: str) -> None:
    result = run(*(arg.format(db=db) for arg in args))
    assert result.exit_code == 2
    assert result.stderr == f"ledgerfold: error: {message}\n"
