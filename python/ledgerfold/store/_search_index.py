"""The search index (SPEC §16.1, §16.5): an FTS5 table in the ledger's database, changed in
the same transaction as the ledger by every write path; `search` queries it.

Layout (schema v5, `_schema.py` holds the plain tables):

- `search_fts`: a *contentless* FTS5 table (`content=''`, `tokenize='ascii'`,
  `detail=full`) fed the segmenter's token strings, one row per passage. Contentless: the
  index keeps no copy of the text (the body is in `turns`), so it stays well under the
  0.6x-of-body budget. Deleting a row needs its original token string, which the
  deterministic segmenter re-creates from the body being removed: every write path calls
  `unindex` *before* it blanks or changes a body.
- Rowids: `turn pk << 10 | slot`, slot = the row's number among the turn's rows: one row a
  passage, or, for a body of more than 1,024 passages (over ~600 KB), rows of several
  consecutive passages each (`_rows`). The rowid names the turn and the passage, so a short
  body (one passage, the common case) writes no side row, and FTS5's rowid deltas stay small
  (index ~0.5x the English body bytes against 0.64x with `pk << 20`, measured on the real
  transcripts). Which turns are indexed is read from FTS5's own `search_fts_docsize`.
- `search_offsets`: the bounds of each row of a body that is not one passage from start to
  end (numbers only), so a hit's passage is cut without segmenting its body again, and a
  turn's rows are made again exactly for their deletion, whichever layout wrote them.
- `search_state`: the segmenter's `index_version` the index was built with, and how far the
  build of an existing ledger got (`built_through`, a turn pk; `complete`).

Group commit (`_group_commit`): inside a batch of the store's worker, the index rows of the
batch's appends wait in the connection's `pending` list (`IndexConnection`) and are written
by `flush_pending` in the batch's transaction, before it commits (or before a job that reads
or deletes index rows starts): one FTS5 segment a batch instead of one a job (FTS5 flushes
its pending terms at every savepoint, and each job of a batch is one). SPEC §16.5's "same
transaction" holds: the batch is one transaction. A job that rolls back drops its rows
(`Database.transaction`).

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
from collections.abc import Iterable, Sequence
from contextlib import suppress
from typing import Any

from ledgerfold._errors import StoreError
from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import RECALL_TOOL_NAME, call_name, tool_calls_of
from ledgerfold._segment import INDEX_VERSION, index_passages, index_passages_many
from ledgerfold.store import _search_levels as search_levels
from ledgerfold.store._call_pairs import Answered
from ledgerfold.store._recall_answers import NO_BATCH, BatchCalls, answers_recall, stored_meta
from ledgerfold.store._schema import TURN_LIVE
from ledgerfold.store._search_batches import decoded, indexable_turns, text_rows
from ledgerfold.store._search_bounds import DAMAGED, packed, unpacked
from ledgerfold.store._search_state import read_state, restore_tables
from ledgerfold.store._search_vocab import as_indexed, uncounted_bodies

__all__ = [
    "BUILDING",
    "FTS_DDL",
    "LAST_SLOT",
    "NO_FTS5",
    "PASSAGE_MAX",
    "SLOT_BITS",
    "IndexConnection",
    "build",
    "flush_pending",
    "fts5_available",
    "has_table",
    "index_turns",
    "ready",
    "reindex_turn",
    "scrub",
    "stored_bounds",
    "unindex",
]

_log = logging.getLogger("ledgerfold.store")

#: Turns indexed per transaction while building the index of an existing ledger, so no
#: write lock is held for long (SPEC §17.9).
BUILD_BATCH = 1000

#: FTS5's delete of a contentless row: its rowid and the tokens it was written with.
DELETE_ROW = "INSERT INTO search_fts (search_fts, rowid, tokens) VALUES ('delete', ?, ?)"

FTS_DDL = (
    "CREATE VIRTUAL TABLE search_fts USING fts5(tokens, content='', tokenize='ascii', detail=full)"
)


class IndexConnection(sqlite3.Connection):
    """The store's connection (`sqlite3.connect(..., factory=IndexConnection)`). `pending`
    is a list only inside a group-commit batch: the `(turn pk, body)` pairs its appends
    index at its end (`flush_pending`), and `(turn pk, None)` for a turn an append took out
    of the index (`_drop`: its pair before, or its stored rows, go then); None otherwise
    (appends index at once)."""

    pending: list[tuple[int, str | None]] | None = None
    #: Whether the file has the calls indexes by position (`_call_index._indexed`), once read.
    calls_indexed: bool | None = None


def _pending(conn: sqlite3.Connection) -> list[tuple[int, str | None]] | None:
    return conn.pending if isinstance(conn, IndexConnection) else None


def flush_pending(conn: sqlite3.Connection) -> None:
    """Write the index rows the batch's appends left pending (in the caller's transaction).
    The list is emptied only once they are written: a failure leaves it as it was (the
    caller then rolls the batch back)."""
    pending = _pending(conn)
    if pending:
        bodies: dict[int, str] = {}
        dropped: list[int] = []
        for turn_pk, body in pending:
            if body is not None:
                bodies[turn_pk] = body
            elif bodies.pop(turn_pk, None) is None:
                dropped.append(turn_pk)  # indexed before the batch, or by an earlier one
        _insert(conn, list(bodies.items()))
        if dropped:
            _unindex(conn, "pk IN (SELECT value FROM json_each(?))", (json.dumps(dropped),))
        pending.clear()


def _flushed(conn: sqlite3.Connection) -> None:
    """Every path that reads or deletes index rows runs after `flush_pending` (the
    `Database` does it before each job that is not `INDEX_FREE`): a bug otherwise."""
    if _pending(conn):
        raise StoreError("search index: rows of this batch are not written yet (a bug)")


# ---------------------------------------------------------------------- availability


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has FTS5 (probed with a table in the connection's temp schema)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.ledgerfold_fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.ledgerfold_fts5_probe")
    return True


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return conn.execute(found, (name,)).fetchone() is not None


def _indexed_through(conn: sqlite3.Connection) -> int:
    """Turns with a pk up to this are kept in the index by the write paths (the build covers
    the rest); -1 when the index is not kept (no index yet, or no FTS5 here). `StoreError`
    when another segmenter rebuilt it since this store opened (only its tokens delete rows)."""
    state = read_state(conn)
    if state is None:
        return -1
    if state.version not in (0, INDEX_VERSION) or not state.known:
        raise StoreError(
            f"search index: rebuilt by another ledgerfold or damaged (index_version"
            f" {state.version}, this one {INDEX_VERSION}) since this store opened;"
            " reopen the store to rebuild it"
        )
    return 2**63 - 1 if state.complete else state.through or 0


# ---------------------------------------------------------------------- building


def build(conn: sqlite3.Connection, path: str, *, available: bool | None = None) -> None:
    """At a writing open, after the migrations: create the index, rebuild it when the
    segmenter's version changed (or a table of it was dropped), and index the turns not yet
    indexed in batches that each commit (resumable after a crash; progress logged). Without
    FTS5 the index is emptied and marked for a rebuild, so no write path needs FTS5."""
    if available is None:
        available = fts5_available(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        # A table another tool dropped is made again, and the index with it.
        fresh = restore_tables(conn)
        if not available:
            _disable(conn)
            conn.execute("COMMIT")
            return
        if not has_table(conn, "search_fts"):
            conn.execute(FTS_DDL)
            fresh = True
        state = read_state(conn)
        if fresh or state is None or state.version != INDEX_VERSION or not state.known:
            # A new segmenter: the old rows cannot be deleted with the new tokens; start over
            # (also over a state row another tool damaged: how far it got is not known).
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
            now = read_state(conn)
            if now is None or now.complete:
                conn.execute("COMMIT")
                break
            through = now.through or 0
            if total is None:
                total = conn.execute(
                    "SELECT COUNT(*) FROM turns WHERE pk > ?", (through,)
                ).fetchone()[0]
                if total:
                    _log.info("building the search index: path=%s turns=%d", path, total)
            wanted, last, read = indexable_turns(conn, through, BUILD_BATCH)
            if last is None:
                conn.execute("UPDATE search_state SET complete = 1")
                conn.execute("COMMIT")
                if total:
                    _log.info("search index built: path=%s turns=%d", path, done)
                break
            _insert(conn, wanted)
            conn.execute("UPDATE search_state SET built_through = ?", (last,))
            conn.execute("COMMIT")
            done += read
            _log.info("search index progress: path=%s turns=%d of %d", path, done, total)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _disable(conn: sqlite3.Connection) -> None:
    """No FTS5 in this SQLite: the index cannot be kept, so it is emptied (its shadow tables
    are plain tables) and marked for a rebuild by the next opener that has FTS5."""
    for shadow in ("search_fts_data", "search_fts_idx", "search_fts_docsize"):
        if has_table(conn, shadow):
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


#: Bits of a rowid that number the passage within its turn (SPEC §16.5 passages).
SLOT_BITS = 10
LAST_SLOT = (1 << SLOT_BITS) - 1

#: A passage is at most this many characters (SPEC §16.5 "Hits").
PASSAGE_MAX = 600


def _rows(
    turn_pk: int,
    body: str,
    passages: list[tuple[int, int, str]] | None = None,
    bounds: Sequence[tuple[int, int]] | None = None,
) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """The index rows of a body, `(rowid, tokens)`, and each row's `(start, end)` in code
    points. A body of at most 1,024 passages has a row a passage; a longer one has rows of
    `ceil(passages / 1024)` consecutive passages each, so a term near its end is in a row
    hardly longer than the others (not in one row holding everything past the 1,023rd
    passage, as an index written before did). `bounds`: the stored bounds of the rows a
    body was indexed with (`search_offsets`), whose rows are then made again exactly,
    whichever layout wrote them. `passages`: the body's `index_passages`, when computed."""
    if passages is None:
        passages = index_passages(body)
    base = turn_pk << SLOT_BITS
    if len(passages) == 1 and bounds is None:  # most bodies
        start, end, tokens = passages[0]
        return [(base, tokens)], [(start, end)]
    groups: list[list[tuple[int, int, str]]] = []
    if bounds is None:
        per = max(1, -(-len(passages) // (LAST_SLOT + 1)))
        groups = [passages[at : at + per] for at in range(0, len(passages), per)]
    else:
        at = 0
        for _, end in bounds:
            first = at
            while at < len(passages) and passages[at][1] <= end:
                at += 1
            groups.append(passages[first:at])
        if at != len(passages) or not all(groups):
            raise StoreError(DAMAGED)
    rows = [(base + slot, " ".join(p[2] for p in group)) for slot, group in enumerate(groups)]
    return rows, [(group[0][0], group[-1][1]) for group in groups]


def stored_bounds(conn: sqlite3.Connection, turn_pk: int) -> list[tuple[int, int]] | None:
    """The `(start, end)` of each of a turn's index rows, as stored; None when it has one
    row holding the whole body (nothing stored). `StoreError` when the stored row is
    damaged (`_search_bounds.unpacked`)."""
    # As a blob: text written over it (not UTF-8, maybe) is damage, not a failed read.
    row = conn.execute(
        "SELECT CAST(bounds AS BLOB) FROM search_offsets WHERE turn_pk = ?", (turn_pk,)
    ).fetchone()
    return None if row is None else unpacked(row[0])


def _insert(conn: sqlite3.Connection, turns: Sequence[tuple[int, str]]) -> None:
    """Index `(turn pk, body)` pairs. A body that is not one passage from its start to its
    end gets its passage bounds in `search_offsets` (numbers only), so a hit's passage is
    cut without segmenting its body again."""
    rows: list[tuple[int, str]] = []
    offsets: list[tuple[int, bytes]] = []
    # One native call segments the batch (on both cores when it is large).
    segmented = index_passages_many([body for _, body in turns])
    for (turn_pk, body), passages in zip(turns, segmented, strict=True):
        made, bounds = _rows(turn_pk, body, passages)
        rows += made
        if bounds and (len(bounds) > 1 or bounds[0] != (0, len(body))):
            offsets.append((turn_pk, packed(bounds)))
    if rows:
        conn.executemany("INSERT INTO search_fts (rowid, tokens) VALUES (?, ?)", rows)
    if offsets:
        conn.executemany("INSERT INTO search_offsets (turn_pk, bounds) VALUES (?, ?)", offsets)


def index_turns(
    conn: sqlite3.Connection,
    conversation_id: str,
    turns: Sequence[Turn],
    answered: Sequence[Answered] = (),
) -> None:
    """Index turns just inserted (append, `append_many`, `append_chat_messages`, imports),
    in the caller's transaction; `turns` are in sequence order. A stored result that a
    `recall_history` call among them answers leaves the index (SPEC §16.5, §17.7): one
    stored before its call (`answered`, from `_call_pairs.results_before`), or a result
    without a call ID in the group of such a call."""
    through = _indexed_through(conn)
    if through < 0 or not turns:
        return
    _drop(conn, _recall_answers_before(conn, conversation_id, turns, answered))
    pks = {
        int(row[1]): int(row[0])
        for row in conn.execute(
            "SELECT pk, sequence FROM turns WHERE conversation_id = ? AND sequence >= ?",
            (conversation_id, turns[0].sequence),
        )
    }
    batch = BatchCalls(turns)
    wanted = [
        (pks[turn.sequence], turn.body)
        for turn in turns
        if pks[turn.sequence] <= through
        and not answers_recall(
            conn, conversation_id, turn.role, turn.group, turn.meta or {}, batch, turn.sequence
        )
    ]
    pending = _pending(conn)
    if pending is not None:  # in a group-commit batch: written at its end (`flush_pending`)
        pending += wanted
        return
    _insert(conn, wanted)


def _recall_answers_before(
    conn: sqlite3.Connection,
    conversation_id: str,
    turns: Sequence[Turn],
    answered: Sequence[Answered],
) -> list[int]:
    """pks of the stored live tool turns that a `recall_history` call among `turns` (just
    inserted) answers: by call ID (`answered`), or by group for a result without one (read
    through `turns_by_group`, only for a recall call in a group)."""
    gone = [pair.result_pk for pair in answered if call_name(pair.call) == RECALL_TOOL_NAME]
    groups = {
        turn.group
        for turn in turns
        if turn.role == "assistant"
        and turn.group is not None
        and any(call_name(call) == RECALL_TOOL_NAME for call in tool_calls_of(turn.meta))
    }
    for group in sorted(groups):
        gone += [
            int(turn_pk)
            for turn_pk, meta in conn.execute(
                "SELECT pk, meta FROM turns WHERE conversation_id = ? AND grp = ?"
                " AND role = 'tool' AND state = ? AND sequence < ?",
                (conversation_id, group, TURN_LIVE, turns[0].sequence),
            )
            if not isinstance(stored_meta(meta).get("tool_call_id"), str)
        ]
    return gone


def _drop(conn: sqlite3.Connection, turn_pks: Sequence[int]) -> None:
    """Take stored turns out of the index. Inside a group-commit batch, at its end
    (`flush_pending`): their rows may be pending still, and a rolled-back job takes the
    mark back with its own rows."""
    if not turn_pks:
        return
    pending = _pending(conn)
    if pending is not None:
        pending += [(turn_pk, None) for turn_pk in turn_pks]
        return
    unindex(conn, "pk IN (SELECT value FROM json_each(?))", (json.dumps(list(turn_pks)),))


def _indexed(conn: sqlite3.Connection, turn_pk: int, *, checked: bool = False) -> int:
    """How many index rows the turn has (FTS5 keeps one `docsize` row a rowid)."""
    if not checked:
        _flushed(conn)
    base = turn_pk << SLOT_BITS
    count: int = conn.execute(
        "SELECT COUNT(*) FROM search_fts_docsize WHERE id BETWEEN ? AND ?",
        (base, base + LAST_SLOT),
    ).fetchone()[0]
    return count


def _delete(conn: sqlite3.Connection, pk: int, body: str | None, *, checked: bool = False) -> None:
    """Remove one turn's passages; `body` is the body they were indexed from (None: not
    UTF-8), unless the index says otherwise (`as_indexed`). `checked`: none is pending."""
    if not checked:
        _flushed(conn)
    rows: list[tuple[int, str]] = []
    if body is not None:
        with suppress(StoreError):  # stored bounds damaged or not this body's
            rows = _rows(pk, body, bounds=stored_bounds(conn, pk))[0]
    rows = as_indexed(conn, pk, SLOT_BITS, rows)
    if not rows:
        return
    conn.executemany(DELETE_ROW, rows)
    conn.execute("DELETE FROM search_offsets WHERE turn_pk = ?", (pk,))


def unindex(conn: sqlite3.Connection, where: str, params: Iterable[Any]) -> int:
    """Remove from the index the turns selected by `where` (an SQL condition on `turns`,
    e.g. `pk IN (...)`), reading their bodies as they are now: call it before a write
    blanks, changes or deletes them. Returns how many turns had passages."""
    _flushed(conn)
    return _unindex(conn, where, params)


def _unindex(conn: sqlite3.Connection, where: str, params: Iterable[Any]) -> int:
    """`unindex` without the check that no rows are pending (`flush_pending` writes them
    first)."""
    if _indexed_through(conn) < 0:
        return 0
    counted = "EXISTS (SELECT 1 FROM search_fts_docsize AS d WHERE d.id BETWEEN turns.pk"
    counted += f" << {SLOT_BITS} AND (turns.pk << {SLOT_BITS}) + {LAST_SLOT})"
    selected = f"FROM turns WHERE ({where}) AND"
    # A body that is not UTF-8 (a damaged row) is None: still deleted.
    rows = text_rows(conn, f"SELECT pk, body {selected} {counted}", params := tuple(params))
    for turn_pk, body in rows:
        _delete(conn, int(turn_pk), decoded(body), checked=True)
    # Rows whose `docsize` rows another tool deleted: their terms still go.
    others = text_rows(conn, f"SELECT pk, body {selected} NOT {counted}", params)
    lost = uncounted_bodies(conn, [(int(pk), decoded(body)) for pk, body in others], SLOT_BITS)
    conn.executemany(DELETE_ROW, lost)
    return len(rows) + len({rowid >> SLOT_BITS for rowid, _ in lost})


def reindex_turn(
    conn: sqlite3.Connection, conversation_id: str, turn_pk: int, old_body: str | None, new: Turn
) -> None:
    """An edit: the old body's passages go (None: a body that is not UTF-8, its passages
    as the index recorded them), the new body's come (new text findable, old text not), in
    the caller's transaction."""
    if turn_pk > _indexed_through(conn):
        return
    _delete(conn, turn_pk, old_body)
    if not answers_recall(
        conn, conversation_id, new.role, new.group, new.meta or {}, NO_BATCH, new.sequence
    ):
        _insert(conn, [(turn_pk, new.body)])


def redecide(
    conn: sqlite3.Connection, conversation_id: str, turns: Iterable[tuple[int, Turn]]
) -> None:
    """Live stored turns whose body is unchanged but whose answer may have changed (a call
    they answered renamed, re-identified, retracted or purged, or one made): each is in the
    index again exactly when it answers no `recall_history` call (SPEC §16.5, §17.7), in
    the caller's transaction; one already as the rule says is left alone. Its body as it is
    now is what gets indexed (a result blanked after an erasure holds only the
    placeholder)."""
    through = _indexed_through(conn)
    for turn_pk, turn in turns:
        if turn_pk > through:
            continue
        wanted = not answers_recall(
            conn, conversation_id, turn.role, turn.group, turn.meta or {}, NO_BATCH, turn.sequence
        )
        present = _indexed(conn, turn_pk) > 0
        if wanted and not present:
            _insert(conn, [(turn_pk, turn.body)])
        elif present and not wanted:
            _delete(conn, turn_pk, turn.body, checked=True)


def scrub(conn: sqlite3.Connection) -> None:
    """An erasing call's index rewrite (SQLite < 3.42 has no FTS5 `secure-delete`): merge
    every segment into one, which drops the deleted entries; the freed pages are zeroed by
    `secure_delete`."""
    _flushed(conn)
    if has_table(conn, "search_fts") and _indexed_through(conn) >= 0:
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
        # On an SQLite from before 2023's fix each merge adds levels; 2,000 corrupt the index.
        if search_levels.rebuild_if_deep(conn, SLOT_BITS, _insert):
            _log.info("search index rebuilt: its FTS5 structure had too many levels")


NO_FTS5 = "search: this SQLite has no FTS5, so search is unavailable"

BUILDING = (
    "search: the search index is being built or rebuilt, or its build was interrupted;"
    " run `ledgerfold reindex DB` (or open the database for writing) to finish it"
)


def ready(conn: sqlite3.Connection) -> None:
    """`StoreError` unless the index can answer: a v4 file opened read-only, an index still
    being built or rebuilt (or whose build was interrupted), an index of another
    segmenter, an SQLite without FTS5."""
    _flushed(conn)
    if not has_table(conn, "search_state"):
        raise StoreError(
            "search: this database has no search index yet (an older schema);"
            " open it once for writing to upgrade it"
        )
    state = read_state(conn)
    if state is not None and state.version == 0:  # `_disable`: opened where FTS5 was missing
        raise StoreError(NO_FTS5)
    if state is None or state.version != INDEX_VERSION:
        raise StoreError(
            "search: the search index is not built for this ledgerfold;"
            " open the database once for writing to build it"
        )
    if not state.complete:  # `build` (first build, `rebuild_search_index`) running or stopped
        raise StoreError(BUILDING)
