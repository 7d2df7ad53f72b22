"""`--html -` writes the page to stdout, as `-` means for a command's output by
convention, instead of a file named `-`: `inspect --html -` the inspector page,
`report --html -` the report page alone (no inspector pages, so no folder beside it). With
`--json`, whose output is stdout too, it is one error line. A file named `-` is `./-`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # where a file named `-` would be written
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n} ü"} for n in range(4)])
    return path


def _files(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


@pytest.mark.parametrize("command", [["report"], ["inspect", "c"]], ids=["report", "inspect"])
def test_html_dash_writes_the_page_to_stdout(db: Path, command: list[str]) -> None:
    before = _files(db.parent)
    result = run(command[0], str(db), *command[1:], "--html", "-")
    assert result.exit_code == 0, result.output
    page = result.stdout_bytes.decode("utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "wrote" not in page
    assert result.stderr == ""
    assert _files(db.parent) == before  # no `-`, no `-.pages`


def test_report_page_on_stdout_links_no_inspector_pages(db: Path) -> None:
    result = run("report", str(db), "--html", "-")
    assert result.exit_code == 0, result.output
    page = result.stdout
    assert page.startswith("<!DOCTYPE html>") and ">c<" in page  # the conversation, listed
    assert ".pages/" not in page  # but not linked: no page was written to link to


@pytest.mark.parametrize("command", [["report"], ["inspect", "c"]], ids=["report", "inspect"])
def test_html_dash_with_json_is_one_error_line(db: Path, command: list[str]) -> None:
    before = _files(db.parent)
    result = run(command[0], str(db), *command[1:], "--html", "-", "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("ledgerfold: error: --html -: ")
    assert len(result.stderr.splitlines()) == 1
    assert _files(db.parent) == before


def test_a_file_named_dash_is_dot_slash_dash(db: Path) -> None:
    result = run("inspect", str(db), "c", "--html", "./-")
    assert result.exit_code == 0, result.output
    assert (db.parent / "-").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
