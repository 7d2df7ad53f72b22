"""The race of `test_read_only_open_race.py` (the last writer closes between `reading_uri`'s
look at the WAL files and SQLite's first read, which then failed with "unable to open
database file"), met by the readers that open the file themselves instead of through a
read-only `SQLiteStore`: the CLI's direct reads (`list`, `report --html`, `upgrade`'s
check, the too-old check), batch revalidation and the Parquet export. Each now opens
through `_paths.connect_reading` (`connect_reading_uri`), which reads once as it opens and
opens again when the files changed under it. Real files, a real writer, closed where the
race would fall. (`inspect` and the export read while a connection of theirs is open,
which keeps the files: they pass either way, as guards.)"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import run
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import _paths


def _writer_closing_after_each_look(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """A writer that opens `path` and writes (its WAL and `-shm` there) just before a
    reader's look at those files (`reading_uri`, wherever it was imported), and closes right
    after it: every other look, so an opener that looks again when the files changed under
    it sees them as they are then. The writer's close deletes the files only when no other
    connection of the file is open, as it would in another process."""
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "hello")
        store.append("d", "user", "hello again")
    real, uris = _paths.reading_uri, []

    def looked(where: str) -> str:
        if len(uris) % 2:  # a look again: the files as they are
            uris.append(real(where))
            return uris[-1]
        writer = lf.SQLiteStore(path)
        writer.append("c", "user", "and again")
        assert os.path.exists(f"{path}-wal") and os.path.exists(f"{path}-shm")
        uris.append(real(where))
        writer.close()  # the race, made to fall here
        return uris[-1]

    for name, module in list(sys.modules.items()):
        if name.startswith("ledgerfold") and getattr(module, "reading_uri", None) is real:
            monkeypatch.setattr(module, "reading_uri", looked)
    return uris


def _list(path: Path, tmp_path: Path) -> None:
    result = run("list", str(path))
    assert result.exit_code == 0, result.output
    assert "2 conversations" in result.stdout


def _report_html(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run("report", str(path), "--html", str(out))
    assert result.exit_code == 0, result.output
    assert "2 conversations" in " ".join(out.read_text(encoding="utf-8").split())


def _upgrade(path: Path, tmp_path: Path) -> None:
    result = run("upgrade", str(path))
    assert result.exit_code == 0, result.output


def _inspect(path: Path, tmp_path: Path) -> None:  # the too-old check, then the store
    result = run("inspect", str(path), "c")
    assert result.exit_code == 0, result.output


def _revalidate(path: Path, tmp_path: Path) -> None:
    report = revalidate_database(path, workers=2)
    assert report.conversations == 2


def _export(path: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from ledgerfold.export import export_parquet

    export_parquet(path, tmp_path / "out")


READERS: dict[str, Callable[[Path, Path], None]] = {
    "list": _list,
    "report --html": _report_html,
    "upgrade": _upgrade,
    "inspect": _inspect,
    "revalidate_database": _revalidate,
    "export_parquet": _export,
}


@pytest.mark.parametrize("reader", READERS)
def test_a_reader_opening_as_the_last_writer_closes(
    reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "agent.db"
    uris = _writer_closing_after_each_look(monkeypatch, path)
    READERS[reader](path, tmp_path)
    assert uris and "readonly_shm=1" in uris[0]  # the first look saw a live writer's files
