"""Checking and rebuilding the search index from the ledger (`SQLiteStore.check_search_index`,
`SQLiteStore.rebuild_search_index`, `ledgerfold reindex DB`).

The index is derived from the ledger (SPEC §16.1): whatever happened to it (an index made
corrupt by an SQLite from before 2023's FTS5 fix, past ~2,000 levels: `_search_levels`; a
damaged page; a file edited by hand), it can be made again from the live bodies. FTS5's own
`rebuild` needs a content table, which a contentless index has not, and `delete-all` (like
any use of the table, even `DROP TABLE`) fails when FTS5 cannot read its structure record or
its configuration. So the rebuild drops the table; when FTS5 refuses even that, its shadow
tables are first reset to the empty state a new table of this SQLite has (copied from one
made in the connection's temp schema), then dropped with it. The bodies are indexed again by
the same batched build as at a first open (`_search_index.build`: each batch commits,
resumable: an interrupted rebuild goes on at the next open for writing). Nothing in the
ledger is written; the old index's pages are zeroed as they are freed (`secure_delete`).
"""

from __future__ import annotations

import sqlite3

from ledgerfold._errors import StoreError
from ledgerfold._segment import INDEX_VERSION, index_passages, index_passages_many
from ledgerfold.store import _search_index as search_index
from ledgerfold.store import _search_levels as search_levels
from ledgerfold.store._database import Database, Transaction
from ledgerfold.store._recall_answers import NO_BATCH, answers_recall, stored_meta
from ledgerfold.store._schema import TURN_LIVE
from ledgerfold.store._search_batches import decoded, readable, text_rows
from ledgerfold.store._search_bounds import unpacked
from ledgerfold.store._search_index import LAST_SLOT, SLOT_BITS, _rows
from ledgerfold.store._search_state import read_state
from ledgerfold.store._search_vocab import token_counts, unfindable
from ledgerfold.store._sqlite_errors import quotes_stored_data

__all__ = ["PROBLEMS", "check", "check_store", "indexed_turns", "rebuild_store", "reset"]

#: What `check` reports, each a fixed code (never SQLite's message, which may quote data).
PROBLEMS = {
    "no-fts5": "this SQLite has no FTS5: there is no index to check",
    "missing": "the index table is missing",
    "not-built": "the index is not built: a build or rebuild is running or was interrupted,"
    " or it is of another ledgerfold (a rebuild, or the next open for writing, builds it)",
    "corrupt": "FTS5's integrity-check fails, or a search does not find what the index"
    " holds: the index is damaged",
    "too-deep": f"the index has more than {search_levels.MAX_LEVELS} levels",
    "removed-turns-indexed": "turns retracted, purged or deleted are still in the index",
    "live-turns-missing": "live turns are missing from the index",
    "stale-turns": "turns are indexed from a body they no longer hold, or their passage"
    " bounds are damaged (changed outside ledgerfold: revalidation repairs a changed body,"
    " a rebuild makes them again)",
}

#: A rebuild that failed after the old index was dropped (the ledger is not written).
INTERRUPTED = (
    "rebuild_search_index: the rebuild of the search index was interrupted (the ledger is"
    " unchanged; search is unavailable until `ledgerfold reindex DB`, or the next open for"
    " writing, finishes it)"
)

_SHADOWS = ("data", "idx", "docsize", "config")
_PROBE = "ledgerfold_fts5_rebuild_probe"


def indexed_turns(conn: sqlite3.Connection) -> int:
    """How many turns have passages in the index (read from FTS5's `docsize` table)."""
    if not search_index.has_table(conn, "search_fts_docsize"):
        return 0
    count: int = conn.execute(
        f"SELECT COUNT(DISTINCT id >> {SLOT_BITS}) FROM search_fts_docsize"
    ).fetchone()[0]
    return count


def check(conn: sqlite3.Connection) -> list[str]:
    """The problems of the index (codes of `PROBLEMS`), none when it is sound. Needs a
    connection that may write (FTS5 runs `integrity-check` as an insert); writes nothing."""
    if not search_index.fts5_available(conn):
        return ["no-fts5"]
    if not search_index.has_table(conn, "search_fts"):
        return ["missing"]
    problems: list[str] = []
    state = read_state(conn)
    if state is None or not state.complete or state.version != INDEX_VERSION:
        problems.append("not-built")
    try:
        conn.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 0)")
        if unfindable(conn):
            problems.append("corrupt")
    except sqlite3.DatabaseError:
        problems.append("corrupt")
    try:
        depth = search_levels.levels(conn)
    except sqlite3.DatabaseError:  # a shadow table gone: integrity-check said so
        depth = None
    if depth is not None and depth > search_levels.MAX_LEVELS:
        problems.append("too-deep")
    if not search_index.has_table(conn, "search_fts_docsize"):
        return problems if "corrupt" in problems else [*problems, "corrupt"]
    if conn.execute(
        f"SELECT 1 FROM search_fts_docsize AS d WHERE NOT EXISTS (SELECT 1 FROM turns AS t"
        f" WHERE t.pk = d.id >> {SLOT_BITS} AND t.state = ?) LIMIT 1",
        (TURN_LIVE,),
    ).fetchone():
        problems.append("removed-turns-indexed")
    if "not-built" not in problems and _live_turns_missing(conn):
        problems.append("live-turns-missing")
    if "not-built" not in problems and _stale_turns(conn):
        problems.append("stale-turns")
    return problems


#: Indexed live turns segmented again per batch by `_stale_turns`.
_STALE_BATCH = 1000


def _stale_turns(conn: sqlite3.Connection) -> bool:
    """Whether a live turn's index rows are not those its body makes now (other rowids or
    token counts: FTS5's `docsize`): a body changed outside ledgerfold that no repair has
    reindexed, or one no longer UTF-8 text. Every indexed body is segmented again."""
    after = -1
    while True:
        rows = text_rows(
            conn,
            "SELECT t.pk, t.body, o.bounds FROM turns AS t LEFT JOIN search_offsets AS o"
            " ON o.turn_pk = t.pk WHERE t.pk > ? AND t.state = ? AND EXISTS (SELECT 1 FROM"
            f" search_fts_docsize AS d WHERE d.id BETWEEN t.pk << {SLOT_BITS}"
            f" AND (t.pk << {SLOT_BITS}) + {LAST_SLOT}) ORDER BY t.pk LIMIT ?",
            (after, TURN_LIVE, _STALE_BATCH),
        )
        if not rows:
            return False
        first, after = int(rows[0][0]), int(rows[-1][0])
        indexed: dict[int, dict[int, int]] = {}
        for rowid, count in token_counts(
            conn, first << SLOT_BITS, (after << SLOT_BITS) + LAST_SLOT
        ).items():
            indexed.setdefault(rowid >> SLOT_BITS, {})[rowid] = count
        bodies = [decoded(body) for _, body, _ in rows]
        segmented = index_passages_many([body or "" for body in bodies])
        for (pk, _, packed), body, passages in zip(rows, bodies, segmented, strict=True):
            if body is None:
                return True
            try:
                bounds = None if packed is None else unpacked(packed)
                made, _ = _rows(int(pk), body, passages, bounds)
            except StoreError:  # stored bounds damaged or not this body's
                return True
            if bounds and bounds[-1][1] > len(body):
                return True
            if {rowid: tokens.count(" ") + 1 for rowid, tokens in made} != indexed.get(pk):
                return True


def _live_turns_missing(conn: sqlite3.Connection) -> bool:
    """Whether a live turn that the write paths index (a body with a term, not a
    `recall_history` result) has no passage in the index."""
    rows = text_rows(
        conn,
        "SELECT conversation_id, role, body, grp, meta, sequence FROM turns AS t"
        " WHERE t.state = ? AND NOT EXISTS (SELECT 1 FROM search_fts_docsize AS d"
        f" WHERE d.id BETWEEN t.pk << {SLOT_BITS} AND (t.pk << {SLOT_BITS}) + {LAST_SLOT})",
        (TURN_LIVE,),
    )
    for *columns, sequence in rows:
        turn = readable(columns)
        if turn is None:
            continue  # not UTF-8 text: the build leaves it out (`_search_batches`)
        conversation_id, role, body, group, meta = turn
        if not index_passages(body):
            continue  # nothing to index (an empty body)
        if not answers_recall(
            conn, conversation_id, role, group, stored_meta(meta), NO_BATCH, sequence
        ):
            return True
    return False


def reset(conn: sqlite3.Connection) -> None:
    """In the caller's write transaction: drop the index (however damaged) and make it
    again, empty, marked for the batched build (`_search_index.build`) to fill."""
    if not search_index.fts5_available(conn):
        raise StoreError(search_index.NO_FTS5)
    try:
        conn.execute("DROP TABLE IF EXISTS search_fts")
    except sqlite3.DatabaseError:
        _empty_shadows(conn)
        conn.execute("DROP TABLE search_fts")
    for shadow in _SHADOWS:  # left without their table (a table dropped by hand)
        conn.execute(f"DROP TABLE IF EXISTS search_fts_{shadow}")
    conn.execute(search_index.FTS_DDL)
    conn.execute("DELETE FROM search_offsets")
    conn.execute("DELETE FROM search_state")
    conn.execute(
        "INSERT INTO search_state (id, index_version, built_through, complete) VALUES (1, ?, 0, 0)",
        (INDEX_VERSION,),
    )


def _empty_shadows(conn: sqlite3.Connection) -> None:
    """Give the shadow tables the rows of a new, empty table of this SQLite (made in the
    temp schema), so that FTS5 can open the table to drop it."""
    probe_ddl = search_index.FTS_DDL.replace("search_fts", f"temp.{_PROBE}", 1)
    conn.execute(probe_ddl)
    try:
        for shadow in _SHADOWS:
            table = f"search_fts_{shadow}"
            if search_index.has_table(conn, table):
                conn.execute(f"DELETE FROM {table}")
            else:
                (sql,) = conn.execute(
                    "SELECT sql FROM temp.sqlite_master WHERE name = ?", (f"{_PROBE}_{shadow}",)
                ).fetchone()
                conn.execute(sql.replace(f"'{_PROBE}_{shadow}'", f"main.{table}", 1))
            conn.execute(f"INSERT INTO {table} SELECT * FROM temp.{_PROBE}_{shadow}")
    finally:
        conn.execute(f"DROP TABLE temp.{_PROBE}")


def check_store(transaction: Transaction) -> list[str]:
    """`SQLiteStore.check_search_index`: `check` in a write transaction that writes nothing."""
    with transaction(write=True, operation="check_search_index") as conn:
        return check(conn)


def rebuild_store(transaction: Transaction, db: Database) -> int:
    """`SQLiteStore.rebuild_search_index`: `reset` in one transaction, then the batched
    build, then a checkpoint (the old index's pages leave the WAL too); returns how many
    turns the index holds."""
    with db.lock:
        with transaction(write=True, operation="rebuild_search_index") as conn:
            reset(conn)
        conn = db.connection()
        try:
            search_index.build(conn, db.path)
        except sqlite3.Error as err:
            # The old index is gone and batches of the new one committed: not "nothing
            # was written". The ledger is unchanged; `ready` says the build is unfinished.
            quotes = quotes_stored_data(err)
            cause = "a damaged database?" if quotes else str(err)
            raise StoreError(f"{INTERRUPTED}: database failure ({cause})") from (
                None if quotes else err
            )
        db.checkpoint()
        with transaction(write=False, operation="rebuild_search_index") as conn:
            return indexed_turns(conn)
