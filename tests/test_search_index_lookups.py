"""`check_search_index` (and `ledgerfold reindex --check`) said an index was sound when a
search could not find what it holds: FTS5's integrity-check of a contentless table checks
neither its term lookup b-tree (`search_fts_idx`: rows of it deleted, every other lookup
lands on the wrong leaf and finds nothing) nor that its structure record reaches the
segments (a record read as empty: every search finds nothing and every write of the store
fails). Both are now `corrupt`, and a rebuild repairs them. Real transcript bodies."""

from __future__ import annotations

import sqlite3
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf

WORDS = ("flight", "reservation", "cancel", "baggage", "payment", "error", "file", "test")

DAMAGE = {
    # Every other page's entry of the lookup b-tree gone (a table edited by another tool).
    "lookups-halved": "DELETE FROM search_fts_idx WHERE pgno % 2 = 0",
    "lookups-gone": "DELETE FROM search_fts_idx",
    # A structure record FTS5 reads as an index of no segment.
    "structure-empty": "UPDATE search_fts_data SET block = X'00' WHERE id = 10",
}


def _write(path: Path, transcripts: list[dict[str, Any]]) -> list[str]:
    with lf.SQLiteStore(path) as store:
        for conversation in islice(transcripts, 40):
            store.append_many(
                conversation["conversation_id"],
                [{"role": turn["role"], "body": turn["body"]} for turn in conversation["turns"]],
            )
        return store.conversation_ids()


def _found(store: lf.SQLiteStore, conversations: list[str]) -> dict[tuple[str, str], Any]:
    return {
        (cid, word): [hit.turn_id for hit in store.search(cid, word, scope="all", limit=100)]
        for cid in conversations
        for word in WORDS
    }


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_an_index_whose_search_misses_its_terms_is_corrupt(
    tmp_path: Path, damage: str, raw_transcripts: list[dict[str, Any]]
) -> None:
    path = tmp_path / "ledger.db"
    conversations = _write(path, raw_transcripts)
    with lf.SQLiteStore(path) as store:
        assert store.check_search_index() == []
        expected = _found(store, conversations)
    assert sum(map(len, expected.values())) > 100
    with sqlite3.connect(path) as conn:
        conn.execute(DAMAGE[damage])
    conn.close()
    with lf.SQLiteStore(path) as store:
        assert _found(store, conversations) != expected  # the damage is real: searches miss
        assert store.check_search_index() == ["corrupt"]
        store.rebuild_search_index()
        assert store.check_search_index() == []
        assert _found(store, conversations) == expected
        store.append(conversations[0], "user", "one more turn about baggage")


def test_a_sound_index_after_edits_retractions_and_erasures_is_not_corrupt(
    tmp_path: Path, raw_transcripts: list[dict[str, Any]]
) -> None:
    """The lookups the check makes agree with an index holding FTS5 delete markers (edits
    and plain retractions leave them unmerged) and one an erasure's merge rewrote."""
    path = tmp_path / "ledger.db"
    conversations = _write(path, raw_transcripts)
    with lf.SQLiteStore(path) as store:
        for cid in conversations[:10]:
            turns = store.load(cid).turns
            store.edit(cid, turns[1].id, body=turns[2].body + " edited")
            store.retract(cid, turns[3].id)
        assert store.check_search_index() == []
        store.retract(conversations[0], store.load(conversations[0]).turns[4].id, erase=True)
        store.purge_through(conversations[1], 5, "retention")
        store.delete_conversation(conversations[2])
        assert store.check_search_index() == []
