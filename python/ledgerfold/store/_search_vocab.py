"""What the search index holds for a turn, read from the index itself rather than made again
from the turn's body (SPEC §16.1, §16.5).

The index is contentless: FTS5 deletes a row only given the tokens it was written with, which
the write paths make again from the body being removed. A body changed outside the library
(raw SQL) is no longer what its rows were written from: deleting with its tokens would leave
the earlier text's terms in the file (and write deletions of terms that were never there,
which FTS5 may later read as a corrupt index). `token_counts` tells such a turn apart
cheaply (FTS5's `docsize` keeps each row's token count), and `indexed_tokens` reads the rows'
own tokens back (`fts5vocab`'s instances, one scan of the index: only for such a turn, or
one whose body is not UTF-8 text any more); `as_indexed` chooses.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from ledgerfold._segment import query_terms

__all__ = [
    "as_indexed",
    "indexed_tokens",
    "token_counts",
    "uncounted_bodies",
    "uncounted_rows",
    "unfindable",
]

_VOCAB = "ledgerfold_search_vocab"


def token_counts(conn: sqlite3.Connection, first: int, last: int) -> dict[int, int]:
    """The token count of each index row with a rowid in `first..last` (FTS5's `docsize`:
    a varint a column, the index has one)."""
    return {
        int(rowid): _varint(size)
        for rowid, size in conn.execute(
            "SELECT id, sz FROM search_fts_docsize WHERE id BETWEEN ? AND ?", (first, last)
        )
    }


def _varint(size: bytes | None) -> int:
    """The first varint of a `docsize` row (the row's token count)."""
    value = 0
    for byte in bytes(size or b"")[:9]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def unfindable(conn: sqlite3.Connection) -> bool:
    """Whether a search misses what the index holds: a term a MATCH of it finds in fewer
    (or more) rows than hold it (FTS5's `_idx` b-tree damaged: a lookup lands on the wrong
    leaf page), or the index's terms fewer than its rows' token counts (its structure
    record damaged: segments no read reaches). FTS5's integrity-check of a contentless
    table checks neither, and both leave every search empty or partial (the first also
    fails every write). One scan of the index and one lookup a distinct term; a damaged
    page is `sqlite3.DatabaseError`."""
    conn.execute(f"CREATE VIRTUAL TABLE temp.{_VOCAB} USING fts5vocab(main, search_fts, row)")
    try:
        held = 0
        for term, rows, count in conn.execute(f"SELECT term, doc, cnt FROM temp.{_VOCAB}"):
            held += int(count)
            found = conn.execute(
                "SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?", (f'"{term}"',)
            ).fetchone()[0]
            if found != rows:
                return True
    finally:
        conn.execute(f"DROP TABLE temp.{_VOCAB}")
    sizes = conn.execute("SELECT sz FROM search_fts_docsize")
    return held != sum(_varint(size) for (size,) in sizes)


def indexed_tokens(
    conn: sqlite3.Connection, turn_pks: Sequence[int], slot_bits: int
) -> dict[int, str]:
    """The token string each index row of these turns was written with, by rowid: its
    terms in position order, joined by single spaces (as the index's rows are made)."""
    conn.execute(f"CREATE VIRTUAL TABLE temp.{_VOCAB} USING fts5vocab(main, search_fts, instance)")
    try:
        terms: dict[int, list[tuple[int, str]]] = {}
        for doc, term, offset in conn.execute(
            f"SELECT doc, term, offset FROM temp.{_VOCAB}"
            f" WHERE doc >> {slot_bits} IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(set(turn_pks))),),
        ):
            terms.setdefault(int(doc), []).append((int(offset), str(term)))
    finally:
        conn.execute(f"DROP TABLE temp.{_VOCAB}")
    return {doc: " ".join(term for _, term in sorted(found)) for doc, found in terms.items()}


def as_indexed(
    conn: sqlite3.Connection, turn_pk: int, slot_bits: int, rows: list[tuple[int, str]]
) -> list[tuple[int, str]]:
    """The `(rowid, tokens)` to delete the turn's index rows with: `rows` (made from its
    body) when their rowids and token counts are the index's, else the tokens the rows
    hold, read back from the index; [] when the turn has no row."""
    base = turn_pk << slot_bits
    counts = token_counts(conn, base, base + (1 << slot_bits) - 1)
    if not counts:  # no row, unless another tool deleted its `docsize` rows
        return uncounted_rows(conn, [(turn_pk, rows[0][1].split()[0])], slot_bits) if rows else []
    if {rowid: tokens.count(" ") + 1 for rowid, tokens in rows} == counts:
        return rows
    return sorted(indexed_tokens(conn, [turn_pk], slot_bits).items())


def uncounted_rows(
    conn: sqlite3.Connection, turns: Sequence[tuple[int, str]], slot_bits: int
) -> list[tuple[int, str]]:
    """The `(rowid, tokens)` the index holds for turns without a `docsize` row, read back
    from the index: `turns` are `(pk, a token of the body)` pairs. Another tool may have
    deleted a turn's `docsize` rows, leaving its terms in the index though every write path
    finds a turn's rows by `docsize`. The token is looked up among the turn's rowids (one
    indexed lookup a turn; a sound index holds nothing there); only a turn found there
    costs the scan of the index that reads its rows back."""
    held = [
        turn_pk
        for turn_pk, token in turns
        if conn.execute(
            "SELECT 1 FROM search_fts WHERE search_fts MATCH ? AND rowid BETWEEN ? AND ? LIMIT 1",
            (f'"{token}"', turn_pk << slot_bits, ((turn_pk + 1) << slot_bits) - 1),
        ).fetchone()
    ]
    return sorted(indexed_tokens(conn, held, slot_bits).items()) if held else []


def uncounted_bodies(
    conn: sqlite3.Connection, turns: Sequence[tuple[int, str | None]], slot_bits: int
) -> list[tuple[int, str]]:
    """`uncounted_rows` of `(pk, body)` pairs, each looked up by its body's first term (a
    body without a term, or None for one that is not UTF-8, has no row to look up)."""
    firsts = [(pk, words[0]) for pk, body in turns if body and (words := query_terms(body))]
    return uncounted_rows(conn, firsts, slot_bits)
