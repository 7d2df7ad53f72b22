"""A page whose write fails in the write itself (a full disk: `ENOSPC`, which carries no
file name) is named in the error line: it said `file: No space left on device`, leaving
the user to guess which file. `/dev/full` fails every write so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(4)])
    return path


def test_inspect_names_the_page_it_could_not_write(db: Path) -> None:
    result = run("inspect", str(db), "c", "--html", "/dev/full")
    assert result.exit_code == 2
    assert result.stderr == "ledgerfold: error: /dev/full: No space left on device\n"
    assert result.stdout == ""


def test_an_error_naming_its_file_is_kept(db: Path, tmp_path: Path) -> None:
    link = tmp_path / "page.html"
    link.symlink_to(tmp_path / "missing" / "page.html")  # the open fails, naming its path
    result = run("inspect", str(db), "c", "--html", str(link))
    assert result.exit_code == 2
    assert result.stderr == f"ledgerfold: error: {link}: No such file or directory\n"
