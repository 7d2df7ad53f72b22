"""A read-only open of a file whose WAL holds commits, in a directory the process cannot
write, with no `-shm` beside it (copied without it, or left so by a writer that died and a
cleanup): SQLite can read such a WAL only by creating its `-shm`, so the open is a
`StoreError` saying why, never a read of the database file alone that silently misses the
commits (an empty ledger, an older summary).

As root, whom permissions do not stop, the readers run as `nobody` (`setpriv`).
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

import ledgerfold as lf

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if ROOT else []

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions"),
    pytest.mark.skipif(ROOT and shutil.which("setpriv") is None, reason="root without setpriv"),
]

_READ = """
import sys, ledgerfold as lf
try:
    with lf.SQLiteStore(sys.argv[1], read_only=True) as store:
        print("turns", len(store.load("c").turns))
except lf.StoreError as err:
    print("StoreError", err)
"""


def _unwritable_copy(with_wal: bool) -> Iterator[Path]:
    """A store of 5 turns copied, while its writer is open (the turns still in its WAL),
    without the `-shm` (with its WAL when `with_wal`) into a directory only root may write."""
    base = Path(tempfile.mkdtemp(prefix="ledgerfold-ro-wal-"))
    source, folder = base / "source", base / "ro"
    source.mkdir()
    folder.mkdir()
    store = lf.SQLiteStore(source / "ledger.db")
    try:
        store._connection().execute("PRAGMA wal_autocheckpoint = 0")
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(5)])
        assert os.path.getsize(source / "ledger.db-wal") > 32
        shutil.copy(source / "ledger.db", folder / "ledger.db")
        if with_wal:
            shutil.copy(source / "ledger.db-wal", folder / "ledger.db-wal")
    finally:
        store.close()
    for name in os.listdir(folder):
        (folder / name).chmod(0o444)
    folder.chmod(0o555)
    base.chmod(0o755)
    try:
        yield folder / "ledger.db"
    finally:
        folder.chmod(0o755)
        shutil.rmtree(base)


@pytest.fixture
def wal_without_shm() -> Iterator[Path]:
    yield from _unwritable_copy(with_wal=True)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_NOBODY, sys.executable, *args], capture_output=True, text=True, cwd="/", timeout=120
    )


def test_a_wal_without_its_shm_in_an_unwritable_directory_is_a_store_error(
    wal_without_shm: Path,
) -> None:
    before = sorted(os.listdir(wal_without_shm.parent))
    done = _run("-c", _READ, str(wal_without_shm))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("StoreError"), done.stdout
    assert str(wal_without_shm) in done.stdout and "-shm" in done.stdout
    listed = _run("-m", "ledgerfold", "list", str(wal_without_shm))
    assert listed.returncode == 2 and listed.stdout == ""
    assert listed.stderr.count("\n") == 1 and "-shm" in listed.stderr
    assert sorted(os.listdir(wal_without_shm.parent)) == before  # nothing created


def test_the_same_file_opened_where_it_can_be_written_holds_every_turn(
    wal_without_shm: Path,
) -> None:
    copy = Path(tempfile.mkdtemp(prefix="ledgerfold-rw-wal-"))
    try:
        for name in ("ledger.db", "ledger.db-wal"):
            shutil.copy(wal_without_shm.parent / name, copy / name)
        with lf.SQLiteStore(copy / "ledger.db", read_only=True) as store:
            assert len(store.load("c").turns) == 5
    finally:
        shutil.rmtree(copy)


def test_without_a_wal_the_unwritable_file_still_reads() -> None:
    for path in _unwritable_copy(with_wal=False):
        done = _run("-c", _READ, str(path))
        assert done.returncode == 0, done.stderr
        # The database file alone: the copy's turns were all in the WAL it was made without.
        assert done.stdout == "turns 0\n"
