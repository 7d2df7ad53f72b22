"""Ctrl-C during `ledgerfold import`: the database is left as it was (the import is one
transaction), and the command says so in one line, exit status 130, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import SQLiteStore
from ledgerfold._cli import commands_write

# Runs the command line in a child process that interrupts itself (a real SIGINT) while
# the third conversation is being written: deterministic, no sleeping.
CHILD = """
import os, signal, sys
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold._cli import main

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even when the
# suite runs in a background job, which starts its children with SIGINT ignored
real = SQLiteStore.append_many
calls = []

def append_many(self, conversation_id, turns):
    calls.append(conversation_id)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGINT)
    return real(self, conversation_id, turns)

SQLiteStore.append_many = append_many
main(sys.argv[1:])
"""


def _transcript(path: Path, conversations: int) -> Path:
    lines = []
    for n in range(conversations):
        turns = [
            {"id": f"c{n}:{s}", "sequence": s, "role": "user", "body": f"body {s}"}
            for s in range(1, 4)
        ]
        lines.append(json.dumps({"conversation_id": f"c{n}", "source": "s", "turns": turns}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _interrupted_import(db: Path, transcript: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, "import", str(db), str(transcript)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_interrupted_import_leaves_no_new_database_behind(tmp_path: Path) -> None:
    """The database file the import created (and its journals) is removed: nothing was
    imported, so no empty ledgerfold file remains to be mistaken for an import."""
    db = tmp_path / "agent.db"
    transcript = _transcript(tmp_path / "t.jsonl", 6)
    result = _interrupted_import(db, transcript)
    assert result.returncode == 130
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "ledgerfold: error: import interrupted: nothing was imported"
    ]
    assert result.stdout == ""
    assert sorted(path.name for path in tmp_path.iterdir()) == [transcript.name]


def test_interrupted_import_keeps_an_empty_file_that_was_there(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    db.touch()
    result = _interrupted_import(db, _transcript(tmp_path / "t.jsonl", 6))
    assert result.returncode == 130
    assert db.is_file()


def test_interrupted_import_leaves_an_existing_database_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append("kept", "user", "before")
    result = _interrupted_import(db, _transcript(tmp_path / "t.jsonl", 6))
    assert result.returncode == 130
    with SQLiteStore(db, read_only=True) as store:
        assert store.conversation_ids() == ["kept"]
        assert len(store.load("kept")) == 1


def test_one_transaction_import_holds_a_bounded_index_backlog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search-index rows of a one-transaction import are written as they pile up
    (in the same transaction), so its memory does not grow with the import; every
    conversation is still found by search afterwards."""
    monkeypatch.setattr(commands_write, "PENDING_INDEX_ROWS", 5, raising=False)
    seen: list[int] = []
    real = SQLiteStore.append_many

    def append_many(self: SQLiteStore, conversation_id: str, turns: Any) -> Any:
        pending = self._db.connection().pending
        seen.append(len(pending) if pending is not None else 0)
        return real(self, conversation_id, turns)

    monkeypatch.setattr(SQLiteStore, "append_many", append_many)
    db = tmp_path / "agent.db"
    result = run("import", str(db), str(_transcript(tmp_path / "t.jsonl", 12)))
    assert result.exit_code == 0, result.output
    assert len(seen) == 12 and max(seen) < 5 + 3  # the bound plus one conversation's turns
    with SQLiteStore(db, read_only=True) as store:
        for n in range(12):
            assert store.search(f"c{n}", "body", scope="all")


# Another writer fills the new database between the import's look and its interrupt.
RACED_CHILD = """
import sys
from ledgerfold import SQLiteStore
from ledgerfold._cli import commands_write, main

def interrupted(db, transcripts):
    with SQLiteStore(db) as other:
        other.append("other", "user", "kept")
    raise KeyboardInterrupt

commands_write._import_all = interrupted
main(sys.argv[1:])
"""


def test_interrupted_import_keeps_a_new_database_another_writer_filled(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    result = subprocess.run(
        [sys.executable, "-c", RACED_CHILD, "import", str(db), str(_transcript(tmp_path / "t", 2))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 130, result.stderr
    with SQLiteStore(db, read_only=True) as store:
        assert store.conversation_ids() == ["other"]


# Ctrl-C while a command that has no interrupt handling of its own reads the ledger.
LOAD_CHILD = """
import os, signal, sys
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold._cli import main

signal.signal(signal.SIGINT, signal.default_int_handler)

def load(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    raise AssertionError("SIGINT did not interrupt")

SQLiteStore.load = load
main(sys.argv[1:])
"""


def test_interrupted_command_prints_one_line_first_on_stderr(tmp_path: Path) -> None:
    """Ctrl-C in a command is one error line, the first on stderr: no blank line before
    it (click's own handler writes one), no traceback, exit status 130."""
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append("c", "user", "hello")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_CHILD, "inspect", str(db), "c"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 130, result.stderr
    assert result.stderr == "ledgerfold: error: interrupted\n"
    assert result.stdout == ""
