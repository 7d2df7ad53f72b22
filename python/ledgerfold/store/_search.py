"""Search (SPEC §16.1, §16.5): `SQLiteStore.search` over the index `search_index` keeps.
BM25 over passages, one hit per turn with its best passage; a query is only ever a list of
quoted tokens, never FTS5 syntax; terms too common to tell passages apart are dropped."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._model import ROLES
from ledgerfold._search_hit import SearchHit
from ledgerfold._segment import index_passages, query_terms
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._batch_reads import lenient_text, text_read_as
from ledgerfold.store._schema import CURRENT, TURN_LIVE
from ledgerfold.store._search_index import LAST_SLOT, PASSAGE_MAX, SLOT_BITS
from ledgerfold.store._search_terms import rarest
from ledgerfold.store._sqlite_errors import quotes_stored_data

__all__ = ["DF_DROP", "INDEX_DROP", "SCOPES", "check_args", "kept_terms", "search"]

_log = logging.getLogger("ledgerfold.store")

#: SPEC §16.5 "a term whose document frequency passes a documented threshold may be dropped
#: while another term remains": a query term found in more than `DF_DROP` passages of the
#: conversation searched (or `INDEX_DROP` of the index) is dropped while a term found in
#: fewer remains; when every term passes it, only the rarest is kept. A model's question
#: mixes the key term it asks about (a name, an order number) with words every passage has
#: ("why", "could", "refund", "cancel"); under BM25 a long passage holding only the key term
#: loses to short passages repeating several of those words. Measured on the 2,000-exchange
#: agent session (80 planted facts, one differently-worded question each, top 5): 75
#: reachable at 500, 76 at 200, 78 at 100, 79 at 50 and at 25; p50 2.6 ms at 500, 0.6 ms at
#: 50. It also bounds a search's scoring in a conversation to about `DF_DROP` passages a
#: kept term (FTS5's bm25() costs a few microseconds each).
DF_DROP = 50

#: A term more than this many passages of the whole index hold is common too, whatever
#: the conversation: scoring a kept term reads every passage of the index holding it
#: (FTS5's bm25() counts them for the term's IDF), so in a database of many conversations
#: a word of every message ("the", "what") would cost milliseconds per thousand
#: conversations in each search. Below it, what another conversation says never decides
#: which of this one's terms count.
INDEX_DROP = 5000

#: `search(scope=...)` values (SPEC §16.5 "Scope").
SCOPES = ("covered", "all")


def check_args(query: object, limit: object, scope: object) -> tuple[str, int, str]:
    if not isinstance(query, str):
        raise InvalidInput(
            f"query: must be str, got {type(query).__name__}", field="query", problem="wrong-type"
        )
    limit = _validate.integer("limit", limit, minimum=1, maximum=100)
    return query, limit, _validate.choice("scope", scope, SCOPES)


def _span(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, int]:
    """The rowids of the conversation's index rows lie in this range: from its first turn's
    to its last turn's, by sequence (every write inserts turns at sequences above every one
    written before, and a new row's pk is above every pk in the table). Only `_frequency`'s
    count reads it: a turn outside it would be left out of a count, never out of a
    search."""
    first, last = conn.execute(
        "SELECT (SELECT pk FROM turns WHERE conversation_id = ?1 ORDER BY sequence LIMIT 1),"
        " (SELECT pk FROM turns WHERE conversation_id = ?1 ORDER BY sequence DESC LIMIT 1)",
        (conversation_id,),
    ).fetchone()
    low, high = sorted((int(first or 0), int(last or 0)))
    return low << SLOT_BITS, (high << SLOT_BITS) + LAST_SLOT


#: The passages of the conversation holding a term (`?1`), counted up to `?5`, among the
#: first `?4` of its span (`?2`..`?3`) holding it. CROSS JOIN: the postings drive the loop
#: (a co-routine, read only as far as needed), where a plain JOIN would first read them all.
_HERE = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM (SELECT rowid FROM search_fts"
    " WHERE search_fts MATCH ?1 AND rowid BETWEEN ?2 AND ?3 LIMIT ?4) AS f"
    f" CROSS JOIN turns AS t ON t.pk = f.rowid >> {SLOT_BITS} WHERE t.conversation_id = ?6"
    " LIMIT ?5)"
)


def _frequency(
    conn: sqlite3.Connection, conversation_id: str, span: tuple[int, int], term: str
) -> tuple[int, int]:
    """How common `term` is: the passages of the conversation holding it, counted up to
    `DF_DROP + 1`, then (unless that is reached) the passages of the whole index holding
    it, counted up to `INDEX_DROP + 1` (one statement: the second count only when needed)."""
    here, everywhere = conn.execute(
        f"SELECT h.n, CASE WHEN h.n > {DF_DROP} THEN {INDEX_DROP + 1} ELSE (SELECT COUNT(*)"
        " FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ?1 LIMIT ?4)) END"
        f" FROM ({_HERE.replace('SELECT COUNT(*)', 'SELECT COUNT(*) AS n', 1)}) AS h",
        (f'"{term}"', *span, INDEX_DROP + 1, DF_DROP + 1, conversation_id),
    ).fetchone()
    return int(here), int(everywhere)


def _common(count: tuple[int, int]) -> bool:
    return count[0] > DF_DROP or count[1] > INDEX_DROP


def kept_terms(
    conn: sqlite3.Connection, conversation_id: str, terms: list[str], span: tuple[int, int]
) -> list[str]:
    """`terms` without the common ones (SPEC §16.5), keeping at least the rarest: a term is
    common when more than `DF_DROP` passages of the conversation hold it (a word another
    conversation repeats, another user's, may be the one this question is about), or more
    than `INDEX_DROP` passages of the whole index do. A term no passage of the
    conversation holds matches nothing, so it never stands in for one that does."""
    if len(terms) == 1:
        return terms
    counts = {term: _frequency(conn, conversation_id, span, term) for term in terms}
    present = [term for term in terms if counts[term][0] > 0]
    if len(present) <= 1:
        return present or terms
    kept = [term for term in present if not _common(counts[term])]
    if kept:
        return kept
    return [rarest(conn, present, span)]  # the first of equals


def _current(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT s.pk, s.id FROM conversations AS c JOIN summaries AS s"
        f" ON s.pk = c.current_summary WHERE c.id = ? AND s.status = '{CURRENT}'",
        (conversation_id,),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def search(
    conn: sqlite3.Connection, conversation_id: str, query: str, limit: int, scope: str
) -> list[SearchHit]:
    """SPEC §16.5: BM25 over passages, one hit per turn (its best passage, ties the earlier
    one), score descending then sequence descending. The query is only ever a list of
    quoted tokens (`"t1" OR "t2"`): the token alphabet has no `"`, so no query text is FTS5
    syntax."""
    search_index.ready(conn)
    terms = query_terms(query)
    if (
        not terms
        or conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        is None
    ):
        return []
    span = _span(conn, conversation_id)
    kept = kept_terms(conn, conversation_id, terms, span)
    current = _current(conn, conversation_id)
    covered_only = scope == "covered" and current is not None
    source_test = (
        "EXISTS (SELECT 1 FROM summary_sources AS ss WHERE ss.summary_pk = ? AND ss.turn_id = t.id)"
    )
    sql = (
        f"SELECT t.pk, t.id, t.sequence, t.role, search_fts.rowid & {LAST_SLOT},"
        " bm25(search_fts) AS r, typeof(t.body) = 'text'"
        f"{', ' + source_test if current is not None and not covered_only else ''}"
        f" FROM search_fts JOIN turns AS t ON t.pk = search_fts.rowid >> {SLOT_BITS}"
        " WHERE search_fts MATCH ? AND t.conversation_id = ? AND t.state = ?"
        f"{' AND ' + source_test if covered_only else ''}"
        " ORDER BY r, t.sequence DESC, search_fts.rowid"
    )

    # Hit rows found damaged, by table key: passed over and warned about once per search,
    # whatever attempt meets them again (the dropped terms' retry, the lenient read).
    damaged: set[int] = set()

    def best_hits(chosen: list[str], lenient: bool) -> list[SearchHit]:
        params: list[Any] = []
        if current is not None and not covered_only:
            params.append(current[0])
        params += [" OR ".join(f'"{term}"' for term in chosen), conversation_id, TURN_LIVE]
        if covered_only:
            params.append(current[0])  # type: ignore[index]
        hits: list[SearchHit] = []
        seen: set[int] = set()
        try:
            for row in conn.execute(sql, params):
                turn_pk, turn_id, sequence, role, slot, rank = row[:6]
                if turn_pk in seen or turn_pk in damaged:
                    continue
                if not _readable(conn, row, lenient):
                    damaged.add(turn_pk)
                    _log.warning(
                        "search: a hit's turn row is damaged (pk=%d), passed over", turn_pk
                    )
                    continue
                seen.add(turn_pk)
                covered = covered_only or (current is not None and bool(row[7]))
                hits.append(
                    SearchHit(
                        turn_id=turn_id,
                        sequence=int(sequence),
                        role=role,
                        text=_passage(conn, conversation_id, int(turn_pk), int(slot), chosen),
                        score=-float(rank),
                        summary_id=current[1] if covered and current is not None else None,
                    )
                )
                if len(hits) == limit:
                    break
        except sqlite3.OperationalError as err:
            if "no such module" in str(err):
                raise StoreError(search_index.NO_FTS5) from None
            raise
        return hits

    def found(lenient: bool) -> list[SearchHit]:
        hits = best_hits(kept, lenient)
        if not hits and len(kept) < len(terms):
            # The kept terms are rare over the whole index, not in this conversation (or
            # scope): the dropped ones still match here (SPEC §16.5 drops a common term
            # only while another term remains).
            hits = best_hits(terms, lenient)
        return hits

    try:
        return found(False)
    except sqlite3.OperationalError as err:
        if not quotes_stored_data(err):
            raise
    # A hit's row holds text that is not UTF-8 (written by another tool): it is passed over,
    # not the whole search failed (`revalidate` names the row).
    with text_read_as(conn, lenient_text):
        return found(True)


def _readable(conn: sqlite3.Connection, row: tuple[Any, ...], lenient: bool) -> bool:
    """Whether a hit's row makes a hit: its ID text, its role one (`ROLES`), its sequence a
    number and its body text (`row[6]`; not a blob) that, read `lenient`ly (some text of the
    hits is not UTF-8), is UTF-8."""
    fine = (
        isinstance(row[1], str)
        and isinstance(row[3], str)
        and row[3] in ROLES
        and type(row[2]) is int
        and bool(row[6])
    )
    if fine and lenient:
        body = conn.execute("SELECT body FROM turns WHERE pk = ?", (row[0],)).fetchone()[0]
        fine = isinstance(body, str)
    return fine


def _passage(
    conn: sqlite3.Connection, conversation_id: str, turn_pk: int, slot: int, terms: list[str]
) -> str:
    """The text of a hit's passage: the whole body, or the slice its stored bounds give. A
    row of several passages (a body of more than 1,024): the passage among them holding the
    rarest of the query's `terms` (then the next rarest, …; then the most occurrences; ties:
    the earlier passage), cut by the segmenter. Bounds that are damaged, gone (a body longer
    than a passage without them) or past the body's end: that passage chosen among all the
    body's, never the whole body nor an exception."""
    try:
        bounds = search_index.stored_bounds(conn, turn_pk)
    except StoreError:
        bounds = []
    if bounds and slot < len(bounds):
        start, end = bounds[slot]
        if end - start <= PASSAGE_MAX:
            text = _slice(conn, turn_pk, start, end)
            if text is not None:
                return text
    body: str = conn.execute("SELECT body FROM turns WHERE pk = ?", (turn_pk,)).fetchone()[0]
    if bounds is None and len(body) <= PASSAGE_MAX:
        return body  # one passage, the whole body
    if not bounds or slot >= len(bounds) or bounds[slot][1] > len(body):
        _log.warning("search: a hit's passage bounds are damaged (pk=%d); cut again", turn_pk)
        start, end = 0, len(body)
    passages = [p for p in index_passages(body) if start <= p[0] and p[1] <= end]
    if not passages:
        return body[start : start + PASSAGE_MAX]
    span = _span(conn, conversation_id)
    counts = {term: _frequency(conn, conversation_id, span, term) for term in terms}
    rarest = sorted(terms, key=lambda term: counts[term])  # stable: query order for ties
    best: tuple[tuple[bool, ...], int] | None = None
    chosen = passages[0]
    for passage in passages:
        tokens = passage[2].split()
        present = set(tokens)
        key = (tuple(term in present for term in rarest), sum(t in counts for t in tokens))
        if best is None or key > best:
            best, chosen = key, passage
    return body[chosen[0] : chosen[1]]


def _slice(conn: sqlite3.Connection, turn_pk: int, start: int, end: int) -> str | None:
    """`body[start:end]`; None when the body ends before `end` (damaged bounds)."""
    # SQLite's substr counts characters as Python counts code points, but stops at a NUL:
    # then the body is read and cut here.
    text: str = conn.execute(
        "SELECT substr(body, ?, ?) FROM turns WHERE pk = ?", (start + 1, end - start, turn_pk)
    ).fetchone()[0]
    if len(text) != end - start:
        body: str = conn.execute("SELECT body FROM turns WHERE pk = ?", (turn_pk,)).fetchone()[0]
        return body[start:end] if end <= len(body) else None
    return text
