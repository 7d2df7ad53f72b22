"""A database the user may read but not write (another user's file, a read-only directory):
the commands that write say so in one line, exit 2, and do not call it "not an SQLite
database"; the commands that only read work."""

from __future__ import annotations

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
