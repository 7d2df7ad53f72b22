"""A turn's `search_fts_docsize` row deleted by another tool: the index still holds the
turn's terms, but every write path finds a turn's index rows by `docsize`, so an erasure
(`retract(..., erase=True)`, `purge_through`, `delete_conversation`) left the erased text's
terms in the database file, and an edit left the old text findable (SPEC §16.1, §16.5
"Erasure"). A turn without a `docsize` row is now looked up in the index by one of its
terms, and rows found there are read back and deleted with the tokens the index holds."""

from __future__ import annotations

import random
import sqlite3
import string
from collections.abc import Callable
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import file_has
from ledgerfold import _segment
from ledgerfold.store import _search_vocab as search_vocab


def _marker() -> tuple[str, str]:
    """A one-word marker the segmenter keeps whole, and its tail to grep the file for."""
    while True:
        tail = "".join(random.choices(string.ascii_lowercase, k=14))
        if _segment.query_terms(f"qjx{tail}") == [f"qjx{tail}"]:
            return f"qjx{tail}", tail


def _ledger(path: Path, word: str) -> None:
    """`secret` holds `word`; its `docsize` row is then deleted behind the store's back."""
    with lf.SQLiteStore(path) as store:
        for n in range(30):
            store.append("c", "user", f"ordinary words number {n} about apples", id=f"t{n}")
        store.append("c", "user", f"the vault word is {word} remember it", id="secret")
        for n in range(30, 35):
            store.append("c", "user", f"more ordinary words {n}", id=f"t{n}")
    with sqlite3.connect(path) as conn:
        (pk,) = conn.execute("SELECT pk FROM turns WHERE id = 'secret'").fetchone()
        conn.execute("DELETE FROM search_fts_docsize WHERE id >> 10 = ?", (pk,))
    conn.close()


ERASING: dict[str, Callable[[lf.SQLiteStore], object]] = {
    "retract-erase": lambda store: store.retract("c", "secret", erase=True),
    "purge": lambda store: store.purge_through("c", 31, "retention", force=True),
    "delete-conversation": lambda store: store.delete_conversation("c"),
}


@pytest.mark.parametrize("how", sorted(ERASING))
def test_an_erasure_leaves_no_term_of_a_turn_whose_docsize_row_is_gone(
    tmp_path: Path, how: str
) -> None:
    word, tail = _marker()
    path = tmp_path / "a.db"
    _ledger(path, word)
    assert file_has(path, tail)
    with lf.SQLiteStore(path) as store:
        ERASING[how](store)
    assert not file_has(path, tail)
    with lf.SQLiteStore(path) as store:
        assert store.check_search_index() == []


def test_an_edit_of_a_turn_whose_docsize_row_is_gone_leaves_its_old_text_unfound(
    tmp_path: Path,
) -> None:
    word, _ = _marker()
    path = tmp_path / "a.db"
    _ledger(path, word)
    with lf.SQLiteStore(path) as store:
        store.edit("c", "secret", body="now the vault word is wombat")
        assert store.search("c", word, scope="all") == []
        assert [hit.turn_id for hit in store.search("c", "wombat")] == ["secret"]
        assert store.check_search_index() == []


@pytest.mark.parametrize("how", sorted(ERASING))
def test_a_sound_index_is_not_read_back_when_unindexed_turns_are_erased(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading a turn's rows back scans the whole index: on a sound index it never happens,
    also when the erased turns include turns that have no row (an empty body, a body of
    punctuation) beside turns that have, deleted first in the same transaction."""
    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        for n in range(30):
            store.append("c", "user", "" if n % 3 else f"words {n}", id=f"t{n}")
        store.append("c", "user", "[] ...", id="secret")
        for n in range(30, 35):
            store.append("c", "user", f"more words {n}", id=f"t{n}")
        read_back: list[object] = []
        monkeypatch.setattr(
            search_vocab, "indexed_tokens", lambda *args: read_back.append(args) or {}
        )
        ERASING[how](store)
        assert read_back == []
        monkeypatch.undo()
        assert store.check_search_index() == []
