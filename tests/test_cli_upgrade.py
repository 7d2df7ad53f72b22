"""`ledgerfold upgrade DB` (SPEC §17.9): a v4 database is migrated and its search index built
(then a read-only open can search); a second run says it is current; user errors are one line."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress, TaskID

import ledgerfold as lf
from cli_support import run, run_json
from ledgerfold._cli.commands_upgrade import _PROGRESS, _ProgressHandler
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._schema import SCHEMA_VERSION
from test_search_migration import schema_version, v4_turns, write_v4_database
from test_upgrade import write_v1_database


def test_upgrade_migrates_a_v4_file_and_builds_its_index(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    write_v4_database(path, v4_turns(40))
    with (
        lf.SQLiteStore(path, read_only=True) as store,  # v4 read-only: no search yet
        pytest.raises(lf.StoreError, match=r"for writing|upgrade"),
    ):
        store.search("c", "mango")
    result = run_json("upgrade", str(path), "--json")
    assert result == {
        "database": str(path),
        "schema_before": 4,
        "schema_after": SCHEMA_VERSION,
        "schema_current": True,
        "search_index_complete": True,
    }
    assert schema_version(path) == SCHEMA_VERSION
    with lf.SQLiteStore(path, read_only=True) as store:
        hits = store.search("c", "mango", scope="all", limit=100)
    assert sorted(hit.sequence for hit in hits) == [i for i in range(1, 41) if i % 7 == 3]
    again = run("upgrade", str(path))
    assert again.exit_code == 0 and "already current" in again.stdout
    assert "search index complete" in again.stdout


def test_the_progress_bar_follows_the_builds_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler reads the build's own progress records (no second counting)."""
    path = tmp_path / "v4.db"
    write_v4_database(path, v4_turns(25))
    monkeypatch.setattr(search_index, "BUILD_BATCH", 10)  # three batches
    seen: list[float] = []
    with Progress(console=Console(file=io.StringIO())) as progress:
        handler = _ProgressHandler(progress)
        logger = logging.getLogger("ledgerfold.store")
        level = logger.level
        logger.addHandler(handler)
        # What an earlier INFO record of this logger leaves (below its default WARNING): its
        # cache of enabled levels says INFO is not. Only setLevel empties that cache.
        logger.isEnabledFor(logging.INFO)
        logger.setLevel(logging.INFO)
        real_update = progress.update

        def update(task: TaskID, **fields: float) -> None:
            seen.append(fields["completed"])
            real_update(task, **fields)

        monkeypatch.setattr(progress, "update", update)
        try:
            lf.SQLiteStore(path).close()
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
        assert handler.task is not None
        assert progress.tasks[0].total == 25
    assert seen == [10, 20, 25]
    assert _PROGRESS.startswith("search index progress")


def test_upgrade_user_errors(tmp_path: Path) -> None:
    missing = run("upgrade", str(tmp_path / "missing.db"))
    assert missing.exit_code == 2 and "no such database" in missing.output
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "empty.db").write_bytes(b"")
    empty = run("upgrade", str(tmp_path / "empty.db"))
    assert empty.exit_code == 2 and "Traceback" not in empty.output


def test_upgrade_of_a_file_that_is_not_sqlite_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    text = b"plain text, not a database at all " * 40
    path.write_bytes(text)
    result = run("upgrade", str(path))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"ledgerfold: error: {path}: not an SQLite database (file is not a database)"
    ]
    assert path.read_bytes() == text


def test_a_read_command_on_a_schema_too_old_to_read_names_the_upgrade(tmp_path: Path) -> None:
    """A v1 file cannot be read without migrating it; a command that only reads does not
    migrate, so it says which command does, in one line, and leaves the file as it was."""
    path = tmp_path / "v1.db"
    write_v1_database(path)
    before = path.read_bytes()
    for command in (["list", str(path)], ["report", str(path), "--json"]):
        result = run(*command)
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            f"ledgerfold: error: {path}: schema version 1 is older than a read-only open can"
            f" read; run `ledgerfold upgrade {path}` first"
        ]
    assert path.read_bytes() == before
    assert run("upgrade", str(path)).exit_code == 0
    assert run("list", str(path)).exit_code == 0


# A child process that interrupts itself (a real SIGINT) at the index build's first progress
# record, once a batch has committed: deterministic, no sleeping.
_INTERRUPTED_CHILD = """
import logging, os, signal, sys
from ledgerfold._cli import main
from ledgerfold.store import _search_index

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
_search_index.BUILD_BATCH = 10

class Interrupt(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("search index progress"):
            os.kill(os.getpid(), signal.SIGINT)

logging.getLogger("ledgerfold.store").addHandler(Interrupt())
logging.getLogger("ledgerfold.store").setLevel(logging.INFO)
main(sys.argv[1:])
"""


@pytest.mark.parametrize("command", ["upgrade", "reindex"])
def test_an_interrupted_index_build_says_how_to_go_on(tmp_path: Path, command: str) -> None:
    """Ctrl-C during `upgrade` or `reindex`: one line saying what was kept and to run the
    command again (not click's bare "aborted"), exit 130; the next run finishes the index."""
    path = tmp_path / "v4.db"
    write_v4_database(path, v4_turns(40))
    if command == "reindex":
        run_json("upgrade", str(path), "--json")
    completed = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_CHILD, command, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 130, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith(f"ledgerfold: error: {command} interrupted")
    assert f"run `ledgerfold {command} {path}` again" in lines[0]
    assert run(command, str(path)).exit_code == 0
    with lf.SQLiteStore(path, read_only=True) as store:
        assert store.search("c", "mango", scope="all", limit=100)
