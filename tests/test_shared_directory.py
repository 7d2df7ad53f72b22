"""A store in a directory several users may write (a shared folder, `/tmp`), opened by a user
who may not write the file itself: a reader creates no file there (SPEC §15.7, "creates
and changes no file"), a writing open is refused before it creates any, so the owner's next
writing open works.

SQLite's `mode=ro` open of a WAL file beside which there is no `-wal` creates a `-wal` and
a `-shm` in a directory it may write, owned by the reader and as unwritable for the owner
as the file is for the reader; a read-only connection cannot delete them at its close, and
every writing open of the owner's then failed ("attempt to write a readonly database").

As root the users are switched with `setpriv` (uid 1000 owns the file, `nobody` reads it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to switch users"
    ),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv"),
]

OWNER = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
OTHER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _as(user: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*user, sys.executable, *args], capture_output=True, text=True, cwd="/", timeout=120
    )


def _python(user: list[str], code: str, path: Path) -> str:
    done = _as(user, "-c", "import sys, ledgerfold as lf\n" + code, str(path))
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def shared() -> Iterator[Path]:
    """A store of the owner's (mode 0644) in a directory everyone may write."""
    directory = Path(tempfile.mkdtemp(prefix="ledgerfold-shared-"))
    directory.chmod(0o777)
    path = directory / "ledger.db"
    _python(
        OWNER,
        "with lf.SQLiteStore(sys.argv[1]) as s:\n    s.append('c', 'user', 'hello')\n",
        path,
    )
    assert sorted(os.listdir(directory)) == ["ledger.db"]  # closed cleanly
    try:
        yield path
    finally:
        shutil.rmtree(directory)


_OWNER_APPENDS = (
    "with lf.SQLiteStore(sys.argv[1]) as s:\n"
    "    s.append('c', 'user', 'again')\n"
    "    print(len(s.load('c').turns))\n"
)


def test_a_read_only_open_by_another_user_creates_no_file(shared: Path) -> None:
    read = (
        "with lf.SQLiteStore(sys.argv[1], read_only=True) as s:\n"
        "    print(len(s.load('c').turns))\n"
    )
    assert _python(OTHER, read, shared) == "1\n"
    assert sorted(os.listdir(shared.parent)) == ["ledger.db"]
    assert _python(OWNER, _OWNER_APPENDS, shared) == "2\n"


def test_reading_commands_of_another_user_create_no_file(shared: Path) -> None:
    for command in (["list"], ["context", "c"], ["search", "c", "hello"], ["revalidate"]):
        done = _as(OTHER, "-m", "ledgerfold", command[0], str(shared), *command[1:])
        assert done.returncode == 0, (command, done.stderr)
        assert sorted(os.listdir(shared.parent)) == ["ledger.db"], command
    assert _python(OWNER, _OWNER_APPENDS, shared) == "2\n"


def test_a_writing_open_by_another_user_is_refused_and_creates_no_file(shared: Path) -> None:
    code = (
        "try:\n"
        "    lf.SQLiteStore(sys.argv[1]).close()\n"
        "except lf.StoreError as err:\n"
        "    print('StoreError', err)\n"
    )
    out = _python(OTHER, code, shared)
    assert out.startswith("StoreError") and "readonly database" in out and str(shared) in out
    assert sorted(os.listdir(shared.parent)) == ["ledger.db"]
    done = _as(OTHER, "-m", "ledgerfold", "compact", str(shared))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert sorted(os.listdir(shared.parent)) == ["ledger.db"]
    assert _python(OWNER, _OWNER_APPENDS, shared) == "2\n"


def _leave(path: Path, leftover: str) -> None:
    """What a writer of the owner's left beside the file: a `-shm` without a WAL (a close
    that died between the two deletions), or a WAL holding commits without its `-shm` (a
    writer killed, the `-shm` then cleaned up)."""
    if leftover == "shm":
        path.with_name(path.name + "-shm").write_bytes(b"")
    else:
        code = (
            "import os, signal\n"
            "s = lf.SQLiteStore(sys.argv[1])\n"
            "s._connection().execute('PRAGMA wal_autocheckpoint = 0')\n"
            "s.append('c', 'user', 'in the WAL')\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n"
        )
        done = _as(OWNER, "-c", "import sys, ledgerfold as lf\n" + code, str(path))
        assert done.returncode == -9, done.stderr
        path.with_name(path.name + "-shm").unlink()
        assert path.with_name(path.name + "-wal").stat().st_size > 32
    for name in os.listdir(path.parent):
        os.chown(path.parent / name, 1000, 1000)
        (path.parent / name).chmod(0o644)


@pytest.mark.parametrize("leftover", ["shm", "wal"])
def test_a_read_beside_what_a_writer_left_creates_no_file(shared: Path, leftover: str) -> None:
    _leave(shared, leftover)
    before = sorted(os.listdir(shared.parent))
    code = (
        "try:\n"
        "    with lf.SQLiteStore(sys.argv[1], read_only=True) as s:\n"
        "        print(len(s.load('c').turns))\n"
        "except lf.StoreError as err:\n"
        "    print('StoreError', err)\n"
    )
    out = _python(OTHER, code, shared)
    if leftover == "shm":
        assert out == "1\n"
    else:  # the WAL's commit cannot be read without a -shm the owner could not write
        assert out.startswith("StoreError") and "-shm" in out, out
    assert sorted(os.listdir(shared.parent)) == before
    owner = "3\n" if leftover == "wal" else "2\n"
    assert _python(OWNER, _OWNER_APPENDS, shared) == owner
