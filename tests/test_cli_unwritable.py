"""A database the user may read but not write (another user's file, a read-only directory):
the commands that write say so in one line, exit 2, and do not call it "not an SQLite
database"; the commands that only read work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledgerfold import SQLiteStore

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
# As root, whom permissions do not stop, the commands run as `nobody`.
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if ROOT else []


@pytest.fixture
def unwritable() -> Iterator[Path]:
    """A ledgerfold database in a read-only directory, itself read-only. As root (whom
    permissions do not stop) the commands run as `nobody`, so the place must be reachable by
    everyone: a directory of its own under the system's temporary directory."""
    base = Path(tempfile.mkdtemp(prefix="ledgerfold-unwritable-"))
    folder = base / "ro"
    folder.mkdir()
    db = folder / "ledger.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(4)])
    db.chmod(0o444)
    folder.chmod(0o555)
    base.chmod(0o755)
    try:
        yield db
    finally:
        folder.chmod(0o755)
        shutil.rmtree(base)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_NOBODY, sys.executable, "-m", "ledgerfold", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
@pytest.mark.skipif(ROOT and shutil.which("setpriv") is None, reason="root without setpriv")
def test_writing_an_unwritable_database_is_one_true_error_line(unwritable: Path) -> None:
    db = str(unwritable)
    assert _run("list", db, "--json").returncode == 0  # reading works
    for args in (
        ["compact", db],
        ["delete", db, "c", "--yes"],
        ["purge", db, "c", "--through", "1", "--reason", "r"],
    ):
        result = _run(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("ledgerfold: error: "), lines
        assert "not an SQLite database" not in lines[0]
        assert "readonly database" in lines[0]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
@pytest.mark.skipif(ROOT and shutil.which("setpriv") is None, reason="root without setpriv")
def test_a_refusal_on_an_unwritable_database_names_the_real_mistake(unwritable: Path) -> None:
    """Refused before any write (an unknown conversation, --through beyond the end), the
    command says why, not that the file cannot be written."""
    db = str(unwritable)
    for args, expected in (
        (["compact", db, "--conversation", "nope"], "unknown conversation 'nope'"),
        (["delete", db, "nope", "--yes"], "unknown conversation 'nope'"),
        (["purge", db, "nope", "--through", "1", "--reason", "r"], "unknown conversation 'nope'"),
        (["purge", db, "c", "--through", "99", "--reason", "r"], "beyond the last sequence"),
    ):
        result = _run(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, lines)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
@pytest.mark.skipif(ROOT and shutil.which("setpriv") is None, reason="root without setpriv")
def test_importing_only_present_conversations_into_an_unwritable_database(
    unwritable: Path,
) -> None:
    """Nothing to write: the import skips them all, as on a writable file, instead of
    failing to open the file for writing; one new conversation is the true write error."""
    present = unwritable.parent.parent / "present.jsonl"
    turn = {"id": "t1", "sequence": 1, "role": "user", "body": "turn 0"}
    present.write_text(json.dumps({"conversation_id": "c", "source": "s", "turns": [turn]}))
    present.chmod(0o644)
    result = _run("import", str(unwritable), str(present), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"conversations": 0, "turns": 0, "skipped": 1}
    new = unwritable.parent.parent / "new.jsonl"
    new.write_text(json.dumps({"conversation_id": "n", "source": "s", "turns": [turn]}))
    new.chmod(0o644)
    result = _run("import", str(unwritable), str(new))
    assert result.returncode == 2
    assert "readonly database" in result.stderr
