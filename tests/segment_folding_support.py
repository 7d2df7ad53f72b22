"""What the segmenter folding tests share (`test_segment_folding*.py`): both segmenters
(Rust and the pure-Python reference), the tokens a body is indexed as, the IDs of search
hits, and a file database's index made as an older segmenter version left it."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

import ledgerfold as lf
from ledgerfold import _segment as seg

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import segment_reference as ref  # noqa: E402

__all__ = ["IMPLEMENTATIONS", "as_version_wrote_it", "ids", "index_has", "joined_tokens", "ref"]

IMPLEMENTATIONS = [pytest.param(seg, id="rust"), pytest.param(ref, id="reference")]


def joined_tokens(impl: ModuleType, body: str) -> str:
    """The tokens of every passage of `body`, as the index holds them."""
    return " ".join(joined for _, _, joined in impl.index_passages(body))


def ids(hits: list[lf.SearchHit]) -> list[str]:
    return [hit.turn_id for hit in hits]


def as_version_wrote_it(path: Path, rows: Mapping[str, tuple[str, str]], version: int) -> None:
    """Make the file's index what ledgerfold's segmenter of `version` left: each turn's
    tokens as `rows` gives them (turn ID: (body, tokens)), `index_version` `version`."""
    conn = sqlite3.connect(path)
    with conn:
        turns = conn.execute("SELECT pk, id FROM turns ORDER BY pk").fetchall()
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM search_offsets")
        conn.executemany(
            "INSERT INTO search_fts (rowid, tokens) VALUES (?, ?)",
            [(pk << 10, rows[turn_id][1]) for pk, turn_id in turns],
        )
        conn.execute("UPDATE search_state SET index_version = ?, complete = 1", (version,))
    conn.close()


def index_has(path: Path, word: str) -> bool:
    """Whether the file's index holds `word` (a connection of its own, no ledgerfold code)."""
    conn = sqlite3.connect(path)
    try:
        found = conn.execute(
            "SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?", (f'"{word}"',)
        )
        return bool(found.fetchone()[0])
    finally:
        conn.close()
