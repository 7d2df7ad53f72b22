"""The passage bounds of `search_offsets` (SPEC §16.5 "Hits"): each row of a body that is not
one passage from its start to its end stores its `(start, end)` pairs, in code points, as
native int64 values, so a hit's passage is cut without segmenting the body again and the
turn's index rows are made again exactly for their deletion.

The table is derived data another tool can damage (a blob cut short, text written over it,
pairs out of order). A row that is not a whole number of ordered pairs is `StoreError`
(`DAMAGED`), never a `ValueError` or `TypeError` from the decoding: the write paths then
delete the turn's index rows with the tokens the index holds (`_search_vocab.as_indexed`),
so an edit or an erasure is never blocked by it; a search cuts the passage from the body
(`_search._passage`); `check_search_index` reports `stale-turns`, which a rebuild repairs.
"""

from __future__ import annotations

from array import array

from ledgerfold._errors import StoreError

__all__ = ["DAMAGED", "packed", "unpacked"]

DAMAGED = "search index: a turn's passages do not match its body (a damaged database?)"

_PAIR = 2 * array("q").itemsize


def packed(bounds: list[tuple[int, int]]) -> bytes:
    """The stored form of a row's bounds."""
    return array("q", [offset for pair in bounds for offset in pair]).tobytes()


def unpacked(stored: object) -> list[tuple[int, int]]:
    """The `(start, end)` pairs of a stored `bounds` value; `StoreError` (`DAMAGED`) unless
    it is a blob of at least one pair whose passages are non-empty, in order and do not
    overlap."""
    if not isinstance(stored, bytes) or not stored or len(stored) % _PAIR:
        raise StoreError(DAMAGED)
    offsets = array("q")
    offsets.frombytes(stored)
    bounds = list(zip(offsets[0::2], offsets[1::2], strict=True))
    previous_end = 0
    for start, end in bounds:
        if not previous_end <= start < end:
            raise StoreError(DAMAGED)
        previous_end = end
    return bounds
