"""A search index damaged in the file (FTS5's `search_fts_data` rows deleted or overwritten,
its config gone) failed every write with SQLite's bare "constraint failed" or "vtable
constructor failed: search_fts", naming neither the index nor a way out. The write still
rolls back whole; its `StoreError` now names the search index as the cause and says to run
`ledgerfold reindex DB` (or `SQLiteStore.rebuild_search_index()`), quoting no body; after
the rebuild the same write works. Real database files throughout."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import run
from ledgerfold._worker import worker_for
from ledgerfold.store._search_damage import write_error

SECRET = "quokka-locker-7731"

DAMAGE = {
    # The structure record (id 10): FTS5 fails at the commit, "constraint failed".
    "structure-record": "UPDATE search_fts_data SET block = X'0001' WHERE id = 10",
    # Every row: "vtable constructor failed: search_fts" at the insert.
    "data-rows-deleted": "DELETE FROM search_fts_data",
    "data-table-dropped": "DROP TABLE search_fts_data",
    # FTS5's "invalid fts5 file format ... - run 'rebuild'" (no rebuild for contentless).
    "config-deleted": "DELETE FROM search_fts_config",
}


def _ledger(path: Path) -> None:
    with lf.SQLiteStore(path) as store:
        store.append_many(
            "c", [{"role": "user", "body": f"alpha beta {SECRET} n{n}"} for n in range(30)]
        )


def _damage(path: Path, how: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(DAMAGE[how])
    conn.close()


def _digest(path: Path) -> str:
    """Every row of every plain table (the index's shadow tables too) and the schema."""
    digest = hashlib.blake2b()
    conn = sqlite3.connect(path)
    try:
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE"
            " 'CREATE VIRTUAL%' ORDER BY name"
        ).fetchall()
        for name, sql in tables:
            digest.update(f"{name}:{sql}".encode())
            for row in conn.execute(f'SELECT * FROM "{name}" ORDER BY 1'):
                digest.update(repr(row).encode())
    finally:
        conn.close()
    return digest.hexdigest()


def _says_index(error: lf.StoreError, path: Path) -> None:
    message = str(error)
    assert "search index is damaged" in message
    assert f"ledgerfold reindex {path}" in message
    assert "rebuild_search_index()" in message
    assert "nothing was written" in message
    assert "run 'rebuild'" not in message  # FTS5's advice, which a contentless table cannot take
    assert SECRET not in message and "gamma" not in message and SECRET not in repr(error)


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_write_names_the_damaged_index_and_changes_nothing(tmp_path: Path, how: str) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    _damage(path, how)
    before = _digest(path)
    with lf.SQLiteStore(path) as store:
        with pytest.raises(lf.StoreError) as raised:
            store.append("c", "user", f"gamma {SECRET}")
        _says_index(raised.value, path)
        with pytest.raises(lf.StoreError) as raised:
            store.append_many("c", [{"role": "user", "body": f"gamma {SECRET}"}])
        _says_index(raised.value, path)
        assert len(store.load("c").turns) == 30
    assert _digest(path) == before


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_check_reports_it_and_reindex_lets_the_write_through(tmp_path: Path, how: str) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    _damage(path, how)
    checked = run("reindex", "--check", str(path))
    assert checked.exit_code == 1
    assert "corrupt" in checked.output or "missing" in checked.output
    rebuilt = run("reindex", str(path))
    assert rebuilt.exit_code == 0, rebuilt.output
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "gamma after the rebuild")
        assert [hit.text for hit in store.search("c", "gamma")] == ["gamma after the rebuild"]
        assert len(store.search("c", "alpha", limit=50)) == 30
        assert store.check_search_index() == []


def test_the_store_method_rebuilds_it_too(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    _damage(path, "structure-record")
    with lf.SQLiteStore(path) as store:
        with pytest.raises(lf.StoreError, match="search index is damaged"):
            store.append("c", "user", "gamma")
        assert store.rebuild_search_index() == 30
        store.append("c", "user", "gamma")
        assert len(store.search("c", "gamma")) == 1


def test_a_group_commit_names_it_and_keeps_nothing(tmp_path: Path) -> None:
    """Jobs queued together on the store's worker: their batch's commit (where FTS5 writes
    the index) fails for all of them, with the same cause."""
    path = tmp_path / "s.db"
    _ledger(path)
    _damage(path, "structure-record")
    before = _digest(path)
    with lf.SQLiteStore(path) as store:
        gate = threading.Event()
        worker = worker_for(store)
        worker.submit(gate.wait, 10)
        futures = [
            worker.submit(lambda n=n: store.append("c", "user", f"gamma {SECRET} {n}"))
            for n in range(3)
        ]
        gate.set()
        for future in futures:
            with pytest.raises(lf.StoreError) as raised:
                future.result(timeout=30)
            _says_index(raised.value, path)
    assert _digest(path) == before


def test_a_sound_index_keeps_sqlites_own_error(tmp_path: Path) -> None:
    """The index is named only when FTS5 fails on it: a failure of a sound store says
    SQLite's message, as before."""
    path = tmp_path / "s.db"
    _ledger(path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        error = write_error(
            conn, sqlite3.IntegrityError("constraint failed"), operation="append", write=True
        )
        assert str(error) == "append: database failure, nothing was written (constraint failed)"
        assert not conn.in_transaction
        assert conn.execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0] == 30
    finally:
        conn.close()
