"""The rarest of a query's terms when every one is common (SPEC §16.5 "Matching": a common
term may be dropped while another remains; `_search.kept_terms` then keeps only the
rarest, and the search scores every passage holding it).

Which is rarest was found by counting each term's passages of the conversation up to 5,001,
joining every posting to its turn: a query of 44 words every message has ("the", "you",
"could", ...) read 44 x 5,001 postings that way (~170 ms on a 100k-turn conversation), all
reached the cap, and the first term, "the", was kept: the commonest of all, whose 93,600
passages the search then scored (~195 ms). Here the terms' postings within the
conversation's span of rowids are counted from the index alone (no turn read): first each
term's first `FIRST_STEP`, which says how far apart they lie; then, sparsest first, each
term's count up to the fewest found so far (a term cannot be the rarest once it has as
many). The work is about the number of terms times the rarest term's postings, and the
term kept is the truly rarest ("could", 8,467 passages: its search ~29 ms). Ties: the first
in the query.
"""

from __future__ import annotations

import sqlite3

__all__ = ["rarest"]

#: Postings of each term read first, to order the terms by how far apart they lie.
FIRST_STEP = 256

_FIRST = (
    "SELECT COUNT(*), MAX(rowid) FROM (SELECT rowid FROM search_fts WHERE search_fts MATCH ?"
    " AND rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?)"
)

_COUNT = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ?"
    " AND rowid BETWEEN ? AND ? LIMIT ?)"
)


def rarest(conn: sqlite3.Connection, terms: list[str], span: tuple[int, int]) -> str:
    """The term of `terms` (at least one) fewest index rows in `span` (rowids) hold; ties:
    the first in `terms`."""
    order = {term: k for k, term in enumerate(terms)}
    reach: dict[str, int] = {}
    ended: dict[str, int] = {}
    for term in terms:
        count, last = conn.execute(_FIRST, (f'"{term}"', *span, FIRST_STEP)).fetchone()
        if count < FIRST_STEP:
            ended[term] = int(count)
        reach[term] = int(last or 0)
    if ended:  # every other term has FIRST_STEP rows or more
        return min(ended, key=lambda term: (ended[term], order[term]))
    best, fewest = "", -1  # -1: no limit
    for term in sorted(terms, key=lambda term: (-reach[term], order[term])):
        earlier = best == "" or order[term] < order[best]
        limit = fewest + 1 if earlier and fewest >= 0 else fewest
        (count,) = conn.execute(_COUNT, (f'"{term}"', *span, limit)).fetchone()
        if fewest < 0 or count < fewest or (count == fewest and earlier):
            best, fewest = term, int(count)
    return best
