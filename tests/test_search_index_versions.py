"""Two ledgerfold versions with different segmenters on one file (SPEC §16.5: the segmenter
is versioned, `index_version` recorded in the database, a change of version rebuilds the
index). The index is contentless: a row is deleted by giving FTS5 the tokens it was
inserted with, which only the segmenter that wrote it re-creates. So a store whose index
was rebuilt by another version since it opened (a rolling upgrade: an old process still
running while a new one opened the file) must not write that index with its own tokens: its
writes fail with `StoreError` and change nothing, and reopening rebuilds the index for it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold import _segment


def _rebuilt_by_another_version(path: Path) -> None:
    """What a newer ledgerfold's writing open leaves: the index emptied and rebuilt with
    its own segmenter, its version recorded."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM search_offsets")
        conn.execute("UPDATE search_state SET index_version = ?", (_segment.INDEX_VERSION + 1,))
    conn.close()


def test_a_store_does_not_write_an_index_another_version_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "the parcel code is 4471", id="m1")
        _rebuilt_by_another_version(path)
        with pytest.raises(lf.StoreError) as caught:
            store.append("c", "user", "a second message", id="m2")
        assert "index" in str(caught.value) and "second" not in str(caught.value)
        with pytest.raises(lf.StoreError):
            store.retract("c", "m1", erase=True)
        assert [turn.id for turn in store.load("c").turns] == ["m1"]  # nothing written
        assert store.load("c").turns[0].body == "the parcel code is 4471"
    # Reopened: the index is this version's again, and every write path works.
    with lf.SQLiteStore(path) as store:
        assert [hit.turn_id for hit in store.search("c", "4471")] == ["m1"]
        store.append("c", "user", "a second message", id="m2")
        store.retract("c", "m1", erase=True)
        assert store.search("c", "4471") == []
        assert [hit.turn_id for hit in store.search("c", "second")] == ["m2"]
        assert store.check_search_index() == []
