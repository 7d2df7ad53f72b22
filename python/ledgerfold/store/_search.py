"""Search (SPEC §16.1, §16.5): `SQLiteStore.search` over the index `search_index` keeps.
BM25 over passages, one hit per turn with its best passage; a query is only ever a list of
quoted tokens, never FTS5 syntax; terms too common to tell passages apart are dropped."""

from __future__ import annotations

import logging
import sqlite3
from array import array
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._search_hit import SearchHit
from ledgerfold._segment import index_passages, query_terms
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._schema import CURRENT, TURN_LIVE
from ledgerfold.store._search_index import LAST_SLOT, PASSAGE_MAX, SLOT_BITS

__all__ = ["DF_DROP", "SCOPES", "check_args", "kept_terms", "search"]

_log = logging.getLogger("ledgerfold.store")

#: SPEC §16.5 "a term whose document frequency passes a documented threshold may be dropped
#: while another term remains": a query term found in more than `DF_DROP` passages of the
#: index is dropped while a term found in at most `DF_DROP` remains; when every term passes
#: it, only the rarest is kept. A model's question mixes the key term it asks about (a name,
#: an order number) with words every passage has ("why", "could", "refund", "cancel"); under
#: BM25 a long passage holding only the key term loses to short passages repeating several
#: of those words. Measured on the 2,000-exchange agent session (80 planted facts, one
#: differently-worded question each, top 5): 75 reachable at 500, 76 at 200, 78 at 100,
#: 79 at 50 and at 25; p50 2.6 ms at 500, 0.6 ms at 50. It also bounds a search's scoring
#: to about `DF_DROP` passages a kept term (FTS5's bm25() costs a few microseconds each).
DF_DROP = 50

#: `search(scope=...)` values (SPEC §16.5 "Scope").
SCOPES = ("covered", "all")


def check_args(query: object, limit: object, scope: object) -> tuple[str, int, str]:
    if not isinstance(query, str):
        raise InvalidInput(
            f"query: must be str, got {type(query).__name__}", field="query", problem="wrong-type"
        )
    limit = _validate.integer("limit", limit, minimum=1, maximum=100)
    return query, limit, _validate.choice("scope", scope, SCOPES)


def _document_frequency(conn: sqlite3.Connection, term: str, cap: int) -> int:
    """Passages holding `term`, counted up to `cap` (cheap: no scoring)."""
    count: int = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)",
        (f'"{term}"', cap),
    ).fetchone()[0]
    return count


def kept_terms(conn: sqlite3.Connection, terms: list[str]) -> list[str]:
    """`terms` without those past `DF_DROP` (SPEC §16.5), keeping at least the rarest. A term
    no passage holds matches nothing, so it never stands in for one that does."""
    if len(terms) == 1:
        return terms
    counts = {term: _document_frequency(conn, term, DF_DROP + 1) for term in terms}
    present = [term for term in terms if counts[term] > 0]
    if len(present) <= 1:
        return present or terms
    kept = [term for term in present if counts[term] <= DF_DROP]
    if kept:
        return kept
    exact = {term: _document_frequency(conn, term, 2**62) for term in present}
    return [min(present, key=lambda term: exact[term])]  # min keeps the first of equals


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
    kept = kept_terms(conn, terms)
    current = _current(conn, conversation_id)
    covered_only = scope == "covered" and current is not None
    source_test = (
        "EXISTS (SELECT 1 FROM summary_sources AS ss WHERE ss.summary_pk = ? AND ss.turn_id = t.id)"
    )
    sql = (
        f"SELECT t.pk, t.id, t.sequence, t.role, search_fts.rowid & {LAST_SLOT},"
        " bm25(search_fts) AS r"
        f"{', ' + source_test if current is not None and not covered_only else ''}"
        f" FROM search_fts JOIN turns AS t ON t.pk = search_fts.rowid >> {SLOT_BITS}"
        " WHERE search_fts MATCH ? AND t.conversation_id = ? AND t.state = ?"
        f"{' AND ' + source_test if covered_only else ''}"
        " ORDER BY r, t.sequence DESC, search_fts.rowid"
    )

    def best_rows(chosen: list[str]) -> list[tuple[Any, ...]]:
        params: list[Any] = []
        if current is not None and not covered_only:
            params.append(current[0])
        params += [" OR ".join(f'"{term}"' for term in chosen), conversation_id, TURN_LIVE]
        if covered_only:
            params.append(current[0])  # type: ignore[index]
        best: list[tuple[Any, ...]] = []
        seen: set[int] = set()
        try:
            for row in conn.execute(sql, params):
                if row[0] in seen:
                    continue
                seen.add(row[0])
                best.append(tuple(row))
                if len(best) == limit:
                    break
        except sqlite3.OperationalError as err:
            if "no such module" in str(err):
                raise StoreError(search_index.NO_FTS5) from None
            raise
        return best

    best = best_rows(kept)
    if not best and len(kept) < len(terms):
        # The kept terms are rare over the whole index, not in this conversation (or
        # scope): the dropped ones still match here (SPEC §16.5 drops a common term only
        # while another term remains).
        best = best_rows(terms)
    hits: list[SearchHit] = []
    for row in best:
        turn_pk, turn_id, sequence, role, slot, rank = row[:6]
        covered = covered_only or (current is not None and bool(row[6]))
        hits.append(
            SearchHit(
                turn_id=turn_id,
                sequence=int(sequence),
                role=role,
                text=_passage(conn, int(turn_pk), int(slot), terms),
                score=-float(rank),
                summary_id=current[1] if covered and current is not None else None,
            )
        )
    return hits


def _passage(conn: sqlite3.Connection, turn_pk: int, slot: int, terms: list[str]) -> str:
    """The text of a hit's passage: the whole body, or the slice its stored bounds give. In
    the last slot of a very long body (several passages share it), the first of them that
    holds a query term, cut by the segmenter."""
    row = conn.execute("SELECT bounds FROM search_offsets WHERE turn_pk = ?", (turn_pk,)).fetchone()
    if row is None:
        text: str = conn.execute("SELECT body FROM turns WHERE pk = ?", (turn_pk,)).fetchone()[0]
        return text
    offsets = array("q")
    offsets.frombytes(bytes(row[0]))
    start, end = offsets[2 * slot], offsets[2 * slot + 1]
    if slot < LAST_SLOT or end - start <= PASSAGE_MAX:
        return _slice(conn, turn_pk, start, end)
    body: str = conn.execute("SELECT body FROM turns WHERE pk = ?", (turn_pk,)).fetchone()[0]
    passages = index_passages(body)[LAST_SLOT:]
    wanted = set(terms)
    for first, last, tokens in passages:
        if wanted.intersection(tokens.split()):
            return body[first:last]
    return body[passages[0][0] : passages[0][1]]


def _slice(conn: sqlite3.Connection, turn_pk: int, start: int, end: int) -> str:
    # SQLite's substr counts characters as Python counts code points, but stops at a NUL:
    # then the body is read and cut here.
    text: str = conn.execute(
        "SELECT substr(body, ?, ?) FROM turns WHERE pk = ?", (start + 1, end - start, turn_pk)
    ).fetchone()[0]
    if len(text) != end - start:
        body: str = conn.execute("SELECT body FROM turns WHERE pk = ?", (turn_pk,)).fetchone()[0]
        return body[start:end]
    return text
