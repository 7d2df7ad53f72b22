"""A table of the search index dropped by another tool. With `search_fts` gone the writing
open made it again, empty, while its state still said every turn was indexed: every search
found nothing until someone ran `ledgerfold reindex`. With `search_offsets` or
`search_state` gone, search (and the rebuild that should repair it) failed, or the store
could not be opened for writing at all. The index is derived from the ledger (SPEC §16.1):
the writing open now makes a dropped table again and builds the index from the turns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf

TABLES = ["search_fts", "search_offsets", "search_state"]


def _dropped(path: Path, table: str) -> None:
    with lf.SQLiteStore(path) as store:
        for n in range(20):
            store.append("c", "user", f"turn {n} about the Lisbon flight", id=f"t{n}")
        # A body of several passages: it has a `search_offsets` row.
        store.append("c", "user", "Some words here. " * 80 + "The locker is QZ-704.", id="long")
    with sqlite3.connect(path) as conn:
        conn.execute(f"DROP TABLE {table}")
    conn.close()


@pytest.mark.parametrize("table", TABLES)
def test_the_writing_open_makes_a_dropped_table_and_the_index_again(
    tmp_path: Path, table: str
) -> None:
    path = tmp_path / "a.db"
    _dropped(path, table)
    with lf.SQLiteStore(path) as store:
        assert store.check_search_index() == []
        assert len(store.search("c", "Lisbon", limit=100)) == 20
        hits = store.search("c", "QZ-704")
        assert [hit.turn_id for hit in hits] == ["long"] and "QZ-704" in hits[0].text
        store.retract("c", "long", erase=True)
        assert store.search("c", "QZ-704") == []
    with lf.SQLiteStore(path, read_only=True) as store:
        assert len(store.search("c", "Lisbon", limit=100)) == 20
