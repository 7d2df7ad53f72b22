"""The search index (SPEC §16.1, §16.5): an FTS5 table in the ledger's database, changed in
the same transaction as the ledger by every write path, and `SQLiteStore.search`.

Layout (schema v5, `_schema.py` holds the plain tables):

- `search_fts`: a *contentless* FTS5 table (`content=''`, `tokenize='ascii'`,
  `detail=full`) fed the segmenter's token strings, one row per passage. Contentless: the
  index keeps no copy of the text (the body is in `turns`), so it stays well under the
  0.6x-of-body budget. Deleting a row needs its original token string, which the
  deterministic segmenter re-creates from the body being removed: every write path calls
  `unindex` *before* it blanks or changes a body.
- Rowids: `turn pk << 10 | slot`, slot = the passage's number among the turn's passages
  (the 1,024th and later passages of a body over ~300 KB share the last slot). The rowid
  names the turn and the passage, so a short body (one passage, the common case) writes no
  side row, and FTS5's rowid deltas stay small (index ~0.5x the English body bytes against
  0.64x with `pk << 20`, measured on the real transcripts). Which turns are indexed is read
  from FTS5's own `search_fts_docsize`.
- `search_offsets`: the passage bounds of a body that is not one passage from start to end
  (numbers only), so a hit's passage is cut without segmenting its body again.
- `search_state`: the segmenter's `index_version` the index was built with, and how far the
  build of an existing ledger got (`built_through`, a turn pk; `complete`).

Erasure on SQLite < 3.42 (no FTS5 `secure-delete`): an FTS5 delete writes a tombstone and
leaves the deleted terms in older segments until they are merged. Every erasing call
therefore ends its transaction with `scrub` (FTS5 `optimize`: one merge of every segment,
which drops the deleted entries), `secure_delete` zeroes the freed pages, and the store
then checkpoints the WAL (TRUNCATE). The merge rewrites the whole index: its cost is exempt
from §15.2's bound and reported in docs/performance.md.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import RECALL_TOOL_NAME
from ledgerfold._search_hit import SearchHit
from ledgerfold._segment import INDEX_VERSION, index_passages, query_terms
from ledgerfold.store._schema import CURRENT, TURN_LIVE

__all__ = [
    "DF_DROP",
    "SCOPES",
    "build",
    "fts5_available",
    "index_turns",
    "reindex_turn",
    "scrub",
    "search",
    "unindex",
]

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

#: Turns indexed per transaction while building the index of an existing ledger, so no
#: write lock is held for long (SPEC §17.9).
BUILD_BATCH = 1000

#: IDs per `IN (...)` list: under SQLite's host-parameter limit.
_CHUNK = 500

_FTS_DDL = (
    "CREATE VIRTUAL TABLE search_fts USING fts5(tokens, content='', tokenize='ascii', detail=full)"
)


# ---------------------------------------------------------------------- availability


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has FTS5 (probed with a table in the connection's temp schema)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.ledgerfold_fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.ledgerfold_fts5_probe")
    return True


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        is not None
    )


def _indexed_through(conn: sqlite3.Connection) -> int:
    """Turns with a pk up to this are kept in the index by the write paths (the build covers
    the rest); -1 when the index is not kept (no index yet, or no FTS5 here)."""
    row = conn.execute("SELECT built_through, complete FROM search_state").fetchone()
    if row is None:
        return -1
    return 2**63 - 1 if row[1] else int(row[0])


# ---------------------------------------------------------------------- building


def build(conn: sqlite3.Connection, path: str, *, available: bool | None = None) -> None:
    """At a writing open, after the migrations: create the index, rebuild it when the
    segmenter's version changed, and index the turns not yet indexed in batches that each
    commit (resumable after a crash; progress logged). Without FTS5 the index is emptied
    and marked for a rebuild, so no write path needs FTS5 (and nothing stale lingers)."""
    if available is None:
        available = fts5_available(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not available:
            _disable(conn)
            conn.execute("COMMIT")
            return
        if not _has_table(conn, "search_fts"):
            conn.execute(_FTS_DDL)
        version = conn.execute("SELECT index_version FROM search_state").fetchone()
        if version is None or int(version[0]) != INDEX_VERSION:
            # A new segmenter: the old rows cannot be deleted with the new tokens; start over.
            conn.execute("INSERT INTO search_fts(search_fts) VALUES ('delete-all')")
            conn.execute("DELETE FROM search_offsets")
            conn.execute("DELETE FROM search_state")
            conn.execute(
                "INSERT INTO search_state (id, index_version, built_through, complete)"
                " VALUES (1, ?, 0, 0)",
                (INDEX_VERSION,),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    total: int | None = None
    done = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT built_through, complete FROM search_state").fetchone()
            if row[1]:
                conn.execute("COMMIT")
                break
            through = int(row[0])
            if total is None:
                total = conn.execute(
                    "SELECT COUNT(*) FROM turns WHERE pk > ?", (through,)
                ).fetchone()[0]
                if total:
                    _log.info("building the search index: path=%s turns=%d", path, total)
            rows = conn.execute(
                "SELECT pk, conversation_id, role, body, grp, meta, state FROM turns"
                " WHERE pk > ? ORDER BY pk LIMIT ?",
                (through, BUILD_BATCH),
            ).fetchall()
            if not rows:
                conn.execute("UPDATE search_state SET complete = 1")
                conn.execute("COMMIT")
                if total:
                    _log.info("search index built: path=%s turns=%d", path, done)
                break
            for pk, conversation_id, role, body, group, meta, state in rows:
                if state == TURN_LIVE and not _answers_recall(
                    conn, conversation_id, role, group, _meta(meta), ()
                ):
                    _insert(conn, [(int(pk), body)])
            conn.execute("UPDATE search_state SET built_through = ?", (int(rows[-1][0]),))
            conn.execute("COMMIT")
            done += len(rows)
            _log.info("search index progress: path=%s turns=%d of %d", path, done, total)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _disable(conn: sqlite3.Connection) -> None:
    """No FTS5 in this SQLite: the index cannot be kept, so it is emptied (its shadow tables
    are plain tables) and marked for a rebuild by the next opener that has FTS5."""
    for shadow in ("search_fts_data", "search_fts_idx", "search_fts_docsize"):
        if _has_table(conn, shadow):
            # Rows 1 and 10 of `_data` (totals, segment list) hold no text and let
            # FTS5 open the table again for the rebuild ("delete-all").
            keep = " WHERE id NOT IN (1, 10)" if shadow == "search_fts_data" else ""
            conn.execute(f"DELETE FROM {shadow}{keep}")
    conn.execute("DELETE FROM search_offsets")
    conn.execute("DELETE FROM search_state")
    conn.execute(
        "INSERT INTO search_state (id, index_version, built_through, complete) VALUES (1, 0, -1, 0)"
    )


# ---------------------------------------------------------------------- write paths


def _meta(raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _calls(meta: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = meta.get("tool_calls")
    if not isinstance(raw, str):
        return []
    try:
        calls = json.loads(raw)
    except ValueError:
        return []
    return [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []


def _call_name(call: Mapping[str, Any]) -> object:
    function = call.get("function")
    return function.get("name") if isinstance(function, dict) else call.get("name")


def _answers_recall(
    conn: sqlite3.Connection,
    conversation_id: str,
    role: str,
    group: str | None,
    meta: Mapping[str, Any],
    batch: Sequence[Turn],
) -> bool:
    """Whether a tool turn answers a `recall_history` call (SPEC §17.7), known through its
    unit: the assistant turns of its group (in `batch` or stored), else the stored call its
    `tool_call_id` names. With a `tool_call_id`, that call's name decides; without one, any
    `recall_history` call in the group does (a copy is never indexed by mistake)."""
    if role != "tool":
        return False
    call_id = meta.get("tool_call_id")
    assistants: list[Mapping[str, Any]] = [
        turn.meta or {} for turn in batch if turn.role == "assistant" and turn.meta
    ]
    if group is not None:
        assistants = [
            turn.meta or {} for turn in batch if turn.role == "assistant" and turn.group == group
        ]
        assistants += [
            _meta(row[0])
            for row in conn.execute(
                "SELECT meta FROM turns WHERE conversation_id = ? AND grp = ?"
                " AND role = 'assistant'",
                (conversation_id, group),
            )
        ]
    calls = [call for assistant in assistants for call in _calls(assistant)]
    if isinstance(call_id, str):
        named = [call for call in calls if call.get("id") == call_id]
        if not named and group is None:
            # No group: the call is looked up among the stored assistant turns.
            row = conn.execute(
                "SELECT 1 FROM turns AS t, json_each(json_extract(t.meta, '$.tool_calls')) AS c"
                " WHERE t.conversation_id = ? AND t.role = 'assistant'"
                " AND json_valid(json_extract(t.meta, '$.tool_calls'))"
                " AND json_extract(c.value, '$.id') = ?"
                " AND json_extract(c.value, '$.function.name') = ? LIMIT 1",
                (conversation_id, call_id, RECALL_TOOL_NAME),
            ).fetchone()
            return row is not None
        return any(_call_name(call) == RECALL_TOOL_NAME for call in named)
    return group is not None and any(_call_name(call) == RECALL_TOOL_NAME for call in calls)


#: Bits of a rowid that number the passage within its turn (SPEC §16.5 passages).
SLOT_BITS = 10
_LAST_SLOT = (1 << SLOT_BITS) - 1

#: A passage is at most this many characters (SPEC §16.5 "Hits").
_PASSAGE_MAX = 600


def _rows(turn_pk: int, body: str) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """The index rows of a body, `(rowid, tokens)` one per passage (the passages from the
    last slot on share it), and each row's `(start, end)` in code points."""
    passages = index_passages(body)
    base = turn_pk << SLOT_BITS
    rows = [(base + slot, tokens) for slot, (_, _, tokens) in enumerate(passages[:_LAST_SLOT])]
    bounds = [(start, end) for start, end, _ in passages[:_LAST_SLOT]]
    if len(passages) > _LAST_SLOT:
        rows.append((base + _LAST_SLOT, " ".join(p[2] for p in passages[_LAST_SLOT:])))
        bounds.append((passages[_LAST_SLOT][0], passages[-1][1]))
    return rows, bounds


def _packed(bounds: list[tuple[int, int]]) -> bytes:
    return array("q", [offset for pair in bounds for offset in pair]).tobytes()


def _insert(conn: sqlite3.Connection, turns: Sequence[tuple[int, str]]) -> None:
    """Index `(turn pk, body)` pairs. A body that is not one passage from its start to its
    end gets its passage bounds in `search_offsets` (numbers only), so a hit's passage is
    cut without segmenting its body again."""
    rows: list[tuple[int, str]] = []
    offsets: list[tuple[int, bytes]] = []
    for turn_pk, body in turns:
        made, bounds = _rows(turn_pk, body)
        rows += made
        if bounds and bounds != [(0, len(body))]:
            offsets.append((turn_pk, _packed(bounds)))
    if rows:
        conn.executemany("INSERT INTO search_fts (rowid, tokens) VALUES (?, ?)", rows)
    if offsets:
        conn.executemany("INSERT INTO search_offsets (turn_pk, bounds) VALUES (?, ?)", offsets)


def index_turns(conn: sqlite3.Connection, conversation_id: str, turns: Sequence[Turn]) -> None:
    """Index turns just inserted (append, `append_many`, `append_chat_messages`, imports),
    in the caller's transaction; `turns` are in sequence order."""
    through = _indexed_through(conn)
    if through < 0 or not turns:
        return
    pks = {
        int(row[1]): int(row[0])
        for row in conn.execute(
            "SELECT pk, sequence FROM turns WHERE conversation_id = ? AND sequence >= ?",
            (conversation_id, turns[0].sequence),
        )
    }
    wanted = [
        (pks[turn.sequence], turn.body)
        for turn in turns
        if pks[turn.sequence] <= through
        and not _answers_recall(
            conn, conversation_id, turn.role, turn.group, turn.meta or {}, turns
        )
    ]
    _insert(conn, wanted)


def _indexed(conn: sqlite3.Connection, turn_pk: int) -> int:
    """How many index rows the turn has (FTS5 keeps one `docsize` row a rowid)."""
    base = turn_pk << SLOT_BITS
    count: int = conn.execute(
        "SELECT COUNT(*) FROM search_fts_docsize WHERE id BETWEEN ? AND ?",
        (base, base + _LAST_SLOT),
    ).fetchone()[0]
    return count


def _delete(conn: sqlite3.Connection, turn_pk: int, body: str) -> None:
    """Remove one turn's passages; `body` is the body they were indexed from."""
    present = _indexed(conn, turn_pk)
    if not present:
        return
    rows, _ = _rows(turn_pk, body)
    if len(rows) != present:  # only a damaged body or a changed segmenter gets here
        raise StoreError(
            "search index: a turn's passages do not match its body (a damaged database?)"
        )
    conn.executemany(
        "INSERT INTO search_fts (search_fts, rowid, tokens) VALUES ('delete', ?, ?)", rows
    )
    conn.execute("DELETE FROM search_offsets WHERE turn_pk = ?", (turn_pk,))


def unindex(conn: sqlite3.Connection, where: str, params: Iterable[Any]) -> int:
    """Remove from the index the turns selected by `where` (an SQL condition on `turns`,
    e.g. `pk IN (...)`), reading their bodies as they are now: call it before a write
    blanks, changes or deletes them. Returns how many turns had passages."""
    if _indexed_through(conn) < 0:
        return 0
    rows = conn.execute(
        f"SELECT pk, body FROM turns WHERE ({where}) AND EXISTS (SELECT 1 FROM"
        f" search_fts_docsize AS d WHERE d.id BETWEEN turns.pk << {SLOT_BITS}"
        f" AND (turns.pk << {SLOT_BITS}) + {_LAST_SLOT})",
        tuple(params),
    ).fetchall()
    for turn_pk, body in rows:
        _delete(conn, int(turn_pk), body)
    return len(rows)


def reindex_turn(
    conn: sqlite3.Connection, conversation_id: str, turn_pk: int, old_body: str, new: Turn
) -> None:
    """An edit: the old body's passages go, the new body's come (new text findable, old
    text not), in the caller's transaction."""
    if turn_pk > _indexed_through(conn):
        return
    _delete(conn, turn_pk, old_body)
    if not _answers_recall(conn, conversation_id, new.role, new.group, new.meta or {}, (new,)):
        _insert(conn, [(turn_pk, new.body)])


def scrub(conn: sqlite3.Connection) -> None:
    """An erasing call's index rewrite (SQLite < 3.42 has no FTS5 `secure-delete`): merge
    every segment into one, which drops the deleted entries; the freed pages are zeroed by
    `secure_delete`."""
    if _has_table(conn, "search_fts") and _indexed_through(conn) >= 0:
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")


# ---------------------------------------------------------------------- search


def check_args(query: object, limit: object, scope: object) -> tuple[str, int, str]:
    if not isinstance(query, str):
        raise InvalidInput(
            f"query: must be str, got {type(query).__name__}", field="query", problem="wrong-type"
        )
    limit = _validate.integer("limit", limit, minimum=1, maximum=100)
    return query, limit, _validate.choice("scope", scope, SCOPES)


_NO_FTS5 = "search: this SQLite has no FTS5, so search is unavailable"


def _ready(conn: sqlite3.Connection) -> None:
    """`StoreError` unless the index can answer: a v4 file opened read-only, an index still
    being built, an SQLite without FTS5."""
    if not _has_table(conn, "search_state"):
        raise StoreError(
            "search: this database has no search index yet (an older schema);"
            " open it once for writing to upgrade it"
        )
    row = conn.execute("SELECT complete, index_version FROM search_state").fetchone()
    if row is not None and int(row[1]) == 0:  # `_disable`: opened where FTS5 was missing
        raise StoreError(_NO_FTS5)
    if row is None or not row[0] or int(row[1]) != INDEX_VERSION:
        raise StoreError(
            "search: the search index is not built for this ledgerfold;"
            " open the database once for writing to build it"
        )


def _document_frequency(conn: sqlite3.Connection, term: str, cap: int) -> int:
    """Passages holding `term`, counted up to `cap` (cheap: no scoring)."""
    count: int = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)",
        (f'"{term}"', cap),
    ).fetchone()[0]
    return count


def kept_terms(conn: sqlite3.Connection, terms: list[str]) -> list[str]:
    """`terms` without those past `DF_DROP` (SPEC §16.5), keeping at least the rarest."""
    if len(terms) == 1:
        return terms
    counts = {term: _document_frequency(conn, term, DF_DROP + 1) for term in terms}
    kept = [term for term in terms if counts[term] <= DF_DROP]
    if kept:
        return kept
    exact = {term: _document_frequency(conn, term, 2**62) for term in terms}
    return [min(terms, key=lambda term: exact[term])]  # min keeps the first of equals


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
    _ready(conn)
    terms = query_terms(query)
    if (
        not terms
        or conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        is None
    ):
        return []
    match = " OR ".join(f'"{term}"' for term in kept_terms(conn, terms))
    current = _current(conn, conversation_id)
    covered_only = scope == "covered" and current is not None
    source_test = (
        "EXISTS (SELECT 1 FROM summary_sources AS ss WHERE ss.summary_pk = ? AND ss.turn_id = t.id)"
    )
    sql = (
        f"SELECT t.pk, t.id, t.sequence, t.role, search_fts.rowid & {_LAST_SLOT},"
        " bm25(search_fts) AS r"
        f"{', ' + source_test if current is not None and not covered_only else ''}"
        f" FROM search_fts JOIN turns AS t ON t.pk = search_fts.rowid >> {SLOT_BITS}"
        " WHERE search_fts MATCH ? AND t.conversation_id = ? AND t.state = ?"
        f"{' AND ' + source_test if covered_only else ''}"
        " ORDER BY r, t.sequence DESC, search_fts.rowid"
    )
    params: list[Any] = []
    if current is not None and not covered_only:
        params.append(current[0])
    params += [match, conversation_id, TURN_LIVE]
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
            raise StoreError(_NO_FTS5) from None
        raise
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
    if slot < _LAST_SLOT or end - start <= _PASSAGE_MAX:
        return _slice(conn, turn_pk, start, end)
    body: str = conn.execute("SELECT body FROM turns WHERE pk = ?", (turn_pk,)).fetchone()[0]
    passages = index_passages(body)[_LAST_SLOT:]
    wanted = set(terms)
    for first, last, tokens in passages:
        if wanted.intersection(tokens.split()):
            return body[first:last]
    return body[passages[0][0] : passages[0][1]]


def _slice(conn: sqlite3.Connection, turn_pk: int, start: int, end: int) -> str:
    # SQLite's substr counts characters as Python counts code points.
    text: str = conn.execute(
        "SELECT substr(body, ?, ?) FROM turns WHERE pk = ?", (start + 1, end - start, turn_pk)
    ).fetchone()[0]
    return text
