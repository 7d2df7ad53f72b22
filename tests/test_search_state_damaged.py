"""The search index's state row (`search_state`) damaged by another tool: text or a blob
written over `index_version` or `built_through`. The writing open failed with a bare
`ValueError` from `int()` (the store could not be opened for writing at all, nor could
`ledgerfold reindex` repair it), and so did a read-only store's `search`. The row is derived
data (SPEC §16.1): a value that is not an integer is unknown, so the writing open builds
the index again from the ledger, and a read-only search says the index is not built."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf

DAMAGE = {
    "version-text": "UPDATE search_state SET index_version = 'five'",
    "version-blob": "UPDATE search_state SET index_version = X'05'",
    "version-real": "UPDATE search_state SET index_version = index_version + 0.5",
    "through-text": "UPDATE search_state SET built_through = 'far', complete = 0",
    "complete-text": "UPDATE search_state SET complete = 'yes', built_through = 0",
}


def _damaged(path: Path, damage: str) -> None:
    with lf.SQLiteStore(path) as store:
        for n in range(30):
            store.append("c", "user", f"turn {n} about the Lisbon flight", id=f"t{n}")
    with sqlite3.connect(path) as conn:
        conn.execute(DAMAGE[damage])
    conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_read_only_search_says_the_index_is_not_built(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "a.db"
    _damaged(path, damage)
    with (
        lf.SQLiteStore(path, read_only=True) as store,
        pytest.raises(lf.StoreError, match="search index"),
    ):
        store.search("c", "Lisbon")


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_writing_open_builds_the_index_again(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "a.db"
    _damaged(path, damage)
    with lf.SQLiteStore(path) as store:
        assert store.check_search_index() == []
        assert len(store.search("c", "Lisbon", limit=100)) == 30
        store.append("c", "user", "a wombat", id="new")
        store.retract("c", "t3", erase=True)
        assert [hit.turn_id for hit in store.search("c", "wombat")] == ["new"]
        assert len(store.search("c", "Lisbon", limit=100)) == 29
    with lf.SQLiteStore(path, read_only=True) as store:
        assert len(store.search("c", "Lisbon", limit=100)) == 29
