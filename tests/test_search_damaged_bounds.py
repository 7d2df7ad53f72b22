"""A turn's stored passage bounds (`search_offsets`, the index's side table for a body of
several passages) damaged by another tool: cut short, overwritten with text (UTF-8 or not),
an empty blob, pairs past the body's end, the row deleted. Each made `search`, `edit`, the erasing
`retract(..., erase=True)` and `check_search_index` fail with a bare `ValueError`,
`TypeError` or `IndexError` (or return the whole body as a passage): one damaged index row
blocked an erasure. The index is derived data (SPEC §16.1): the write paths now delete the
turn's rows with the tokens the index holds, a hit's passage is cut from the body, the check
reports `stale-turns` and a rebuild repairs it."""

from __future__ import annotations

import random
import sqlite3
import string
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import file_has
from ledgerfold import _segment
from ledgerfold.store._search_index import PASSAGE_MAX


def _marker() -> tuple[str, str]:
    """A one-word marker the segmenter keeps whole, and its tail to grep the file for (FTS5
    may store a term's first bytes once for several terms)."""
    while True:
        tail = "".join(random.choices(string.ascii_lowercase, k=14))
        if _segment.query_terms(f"qjx{tail}") == [f"qjx{tail}"]:
            return f"qjx{tail}", tail


def _long_body(word: str) -> str:
    """A body of several passages, `word` in its last."""
    return "The quick brown fox jumps over the lazy dog. " * 40 + f"The vault word is {word}."


DAMAGE = {
    "cut-short": "UPDATE search_offsets SET bounds = substr(bounds, 1, length(bounds) - 3)",
    "odd-pairs": "UPDATE search_offsets SET bounds = substr(bounds, 1, length(bounds) - 8)",
    "text": "UPDATE search_offsets SET bounds = 'abc'",
    "empty": "UPDATE search_offsets SET bounds = X''",
    "text-not-utf8": "UPDATE search_offsets SET bounds = CAST(X'ff' AS TEXT)",
    "past-the-end": "UPDATE search_offsets SET bounds"
    " = CAST(substr(bounds, 1, length(bounds) - 8) || X'00000000000000f0' AS BLOB)",
    "first-pair-only": "UPDATE search_offsets SET bounds = substr(bounds, 1, 16)",
    "row-deleted": "DELETE FROM search_offsets",
}

#: Damage the check can tell: the stored row is not a body's bounds (a deleted row leaves a
#: layout the body makes again: nothing stale).
STALE = set(DAMAGE) - {"row-deleted"}


def _damaged(path: Path, damage: str, word: str) -> None:
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "a short turn about foxes", id="short")
        store.append("c", "user", _long_body(word), id="long")
        store.append("c", "user", "another turn about nothing", id="other")
    conn = sqlite3.connect(path)
    with conn:
        assert conn.execute("SELECT COUNT(*) FROM search_offsets").fetchone()[0] == 1
        conn.execute(DAMAGE[damage])
    conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_hit_with_damaged_bounds_gives_its_passage(tmp_path: Path, damage: str) -> None:
    word, _ = _marker()
    path = tmp_path / "a.db"
    _damaged(path, damage, word)
    with lf.SQLiteStore(path, read_only=True) as store:
        hits = store.search("c", word, scope="all")
        assert [hit.turn_id for hit in hits] == ["long"]
        assert word in hits[0].text and len(hits[0].text) <= PASSAGE_MAX
        assert [hit.turn_id for hit in store.search("c", "fox", scope="all")] == ["long", "short"]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_bounds_never_block_an_erasure(tmp_path: Path, damage: str) -> None:
    word, tail = _marker()
    path = tmp_path / "a.db"
    _damaged(path, damage, word)
    assert file_has(path, tail)
    with lf.SQLiteStore(path) as store:
        store.retract("c", "long", erase=True)
        assert store.search("c", word, scope="all") == []
        assert store.check_search_index() == []
    assert not file_has(path, tail)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_an_edit_of_a_turn_with_damaged_bounds_reindexes_it(tmp_path: Path, damage: str) -> None:
    word, _ = _marker()
    path = tmp_path / "a.db"
    _damaged(path, damage, word)
    with lf.SQLiteStore(path) as store:
        store.edit("c", "long", body="now about a wombat")
        assert store.search("c", word, scope="all") == []
        assert [hit.turn_id for hit in store.search("c", "wombat", scope="all")] == ["long"]
        assert store.check_search_index() == []


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_check_reports_damaged_bounds_and_a_rebuild_repairs_them(
    tmp_path: Path, damage: str
) -> None:
    word, _ = _marker()
    path = tmp_path / "a.db"
    _damaged(path, damage, word)
    with lf.SQLiteStore(path) as store:
        assert store.check_search_index() == (["stale-turns"] if damage in STALE else [])
        assert store.rebuild_search_index() == 3
        assert store.check_search_index() == []
        hits = store.search("c", word, scope="all")
        assert [hit.turn_id for hit in hits] == ["long"] and word in hits[0].text
