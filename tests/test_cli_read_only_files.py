"""Commands that only read never create or change a file (SPEC §15.7): not the database, not
its WAL or `-shm`, not the directory listing. Two cases: a database closed cleanly (no WAL:
a read must not leave one behind) and a hot WAL left by a writer killed with SIGKILL (it must
be read, and never checkpointed into the database file on close)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from cli_support import run  # noqa: E402
from test_search_migration import v4_turns, write_v4_database  # noqa: E402

CONVERSATION = "c"

# Writes a compacted conversation, closes cleanly; with "hot", reopens, appends (the frames
# stay in the WAL: far below the autocheckpoint) and dies by SIGKILL before closing.
_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from ledgerfold import CompactionPolicy, Compactor, ExtractiveSummarizer, SQLiteStore
    path, mode = sys.argv[1], sys.argv[2]
    with SQLiteStore(path) as store:
        for index in range(12):
            store.append("c", "user" if index % 2 else "assistant", f"turn {index}", id=f"t{index}")
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        Compactor(store, policy, ExtractiveSummarizer()).compact("c")
    if mode == "hot":
        store = SQLiteStore(path)
        store.append("c", "user", "written just before the crash", id="late")
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _make(directory: Path, mode: str) -> Path:
    path = directory / "ledger.db"
    result = subprocess.run([sys.executable, "-c", _WRITER, str(path), mode], check=False)
    if mode == "hot":
        assert result.returncode == -signal.SIGKILL
        assert Path(f"{path}-wal").stat().st_size > 0, "the writer left no hot WAL"
    else:
        assert result.returncode == 0
        assert sorted(os.listdir(directory)) == ["ledger.db"]
    return path


def _state(directory: Path) -> dict[str, tuple[str, int, int]]:
    """Every file of the directory: content hash, mtime (ns) and size."""
    state = {}
    for name in sorted(os.listdir(directory)):
        stat = (directory / name).stat()
        digest = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        state[name] = (digest, stat.st_mtime_ns, stat.st_size)
    return state


def _commands(db: Path, out: Path) -> dict[str, list[str]]:
    return {
        "report --html": ["report", str(db), "--html", str(out / "report.html")],
        "report --json": ["report", str(db), "--json"],
        "report": ["report", str(db)],
        "inspect --html": ["inspect", str(db), CONVERSATION, "--html", str(out / "i.html")],
        "purge --dry-run": [
            "purge",
            str(db),
            CONVERSATION,
            "--through",
            "4",
            "--reason",
            "test",
            "--dry-run",
            "--json",
        ],
        "inspect": ["inspect", str(db), CONVERSATION, "--json"],
        "list": ["list", str(db), "--json"],
        "compact --dry-run": ["compact", str(db), "--dry-run", "--json"],
        "context": ["context", str(db), CONVERSATION, "--json"],
        "search": ["search", str(db), CONVERSATION, "turn", "--all", "--json"],
        "export": ["export", str(db), "--parquet", str(out / "pq"), "--json"],
    }


@pytest.mark.parametrize("mode", ["clean", "hot"])
@pytest.mark.parametrize(
    "command",
    [
        "report --html",
        "report --json",
        "report",
        "inspect --html",
        "purge --dry-run",
        "compact --dry-run",
        "inspect",
        "list",
        "context",
        "search",
        "export",
    ],
)
def test_a_read_only_command_changes_no_file(tmp_path: Path, mode: str, command: str) -> None:
    directory = tmp_path / "db"
    directory.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    db = _make(directory, mode)
    before = _state(directory)
    result = run(*_commands(db, out)[command])
    assert result.exit_code == 0, result.output
    assert _state(directory) == before
    if command == "report --html":
        # Its files go beside OUT.html only: the report and a folder of inspector pages.
        assert sorted(os.listdir(out)) == ["report.html", "report.pages"]
        assert len(os.listdir(out / "report.pages")) == 1
    if command == "report --json":
        assert os.listdir(out) == []  # no page: it prints
    if command == "context":
        # The hot WAL is read: the turn written just before the crash is in the context.
        assert ("written just before the crash" in result.stdout) == (mode == "hot")


@pytest.mark.parametrize("mode", ["clean", "hot"])
def test_delete_refused_without_yes_changes_no_file(tmp_path: Path, mode: str) -> None:
    """Without `--yes`, `delete` only reads (is there such a conversation?) and refuses."""
    directory = tmp_path / "db"
    directory.mkdir()
    db = _make(directory, mode)
    before = _state(directory)
    result = run("delete", str(db), CONVERSATION)
    assert result.exit_code == 2 and "--yes" in result.stderr
    assert _state(directory) == before


@pytest.mark.parametrize(
    "command", ["report", "list", "inspect", "context", "compact --dry-run", "search", "export"]
)
def test_a_read_only_command_leaves_an_older_schema_as_it_was(tmp_path: Path, command: str) -> None:
    """A v4 file (readable without migrating): the commands that only read change none of
    its bytes; the ones that need the current schema (`search`, `export`) say to upgrade."""
    directory = tmp_path / "db"
    directory.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    db = directory / "v4.db"
    write_v4_database(db, v4_turns(12))
    before = _state(directory)
    args = _commands(db, out)[command]
    result = run(*args)
    if command in ("search", "export"):
        assert result.exit_code == 2
        assert f"run `ledgerfold upgrade {db}` first" in result.stderr
        assert os.listdir(out) == []
    else:
        assert result.exit_code == 0, result.output
    assert _state(directory) == before
