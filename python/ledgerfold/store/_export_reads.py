"""The reads a Parquet export writes (`ledgerfold.export`): each table's rows of a range of
conversations, through `_batch_reads`' read-only connection inside one snapshot; the body
is exported as UTF-8 bytes whatever the database's text encoding."""

from __future__ import annotations

import sqlite3
from typing import Any

from ledgerfold.store._batch_reads import NotUtf8, lenient_text, text_read_as
from ledgerfold.store._sqlite_errors import quotes_stored_data, store_error

__all__ = ["conversation_turn_counts", "part_rows"]

# Each table's rows of a range of conversations, in export order, with the conversation-ID
# column the range applies to.
_PART_QUERIES = {
    "conversations": (
        "SELECT c.id, c.revision, c.last_sequence, s.id, c.current_summary"
        " FROM conversations AS c LEFT JOIN summaries AS s ON s.pk = c.current_summary"
        " WHERE {where} ORDER BY c.id",
        "c.id",
    ),
    "turns": (
        "SELECT conversation_id, pk, id, sequence, role, CAST(body AS BLOB), protected,"
        " protection_reason, grp, meta, digest, state"
        " FROM turns WHERE {where} ORDER BY conversation_id, sequence",
        "conversation_id",
    ),
    "summaries": (
        "SELECT s.conversation_id, s.pk, s.id, s.plan_id, s.status, s.reason, s.created_at,"
        " s.source_revision, s.source_fingerprint, s.policy_version, s.text, s.source_count,"
        " s.through_sequence, s.rejected_source_ids, c.current_summary IS s.pk"
        " FROM summaries AS s LEFT JOIN conversations AS c ON c.id = s.conversation_id"
        " WHERE {where} ORDER BY s.conversation_id, s.pk",
        "s.conversation_id",
    ),
    "summary_sources": (
        "SELECT s.conversation_id, ss.summary_pk, s.id, ss.position, ss.turn_id, ss.turn_digest"
        " FROM summaries AS s JOIN summary_sources AS ss ON ss.summary_pk = s.pk"
        " WHERE {where} ORDER BY s.conversation_id, ss.summary_pk, ss.position",
        "s.conversation_id",
    ),
}


def conversation_turn_counts(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """`(conversation ID, turn rows of any state)` for every conversation, in ID order."""
    counts: list[tuple[str, int]] = conn.execute(
        "SELECT c.id, (SELECT COUNT(*) FROM turns AS t WHERE t.conversation_id = c.id)"
        " FROM conversations AS c ORDER BY c.id"
    ).fetchall()
    return counts


#: The columns of the `turns` export rows, and where the body is among them.
_TURN_PART_COLUMNS = [
    "conversation_id",
    "pk",
    "id",
    "sequence",
    "role",
    "body",
    "protected",
    "protection_reason",
    "grp",
    "meta",
    "digest",
    "state",
]
_BODY = _TURN_PART_COLUMNS.index("body")


def _turn_part_rows(conn: sqlite3.Connection, query: str, args: list[str]) -> list[tuple[Any, ...]]:
    """The `turns` export rows in a database whose text is not stored as UTF-8: the body is
    read as text (SQLite converts it to UTF-8; a cast would give its UTF-16 bytes) and
    exported as the bytes of that, as a cast gives them in a UTF-8 database (a body that is
    not valid text too); any other text that is not valid fails the read, as it does there."""
    with text_read_as(conn, lenient_text):
        rows = conn.execute(query.replace("CAST(body AS BLOB)", "body"), args).fetchall()
    exported: list[tuple[Any, ...]] = []
    for row in rows:
        for index, value in enumerate(row):
            if isinstance(value, NotUtf8) and index != _BODY:
                column = _TURN_PART_COLUMNS[index]
                raise sqlite3.OperationalError(f"Could not decode to UTF-8 column '{column}'")
        body = row[_BODY]
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif isinstance(body, NotUtf8):
            body = body.raw
        exported.append((*row[:_BODY], body, *row[_BODY + 1 :]))
    return exported


def part_rows(
    conn: sqlite3.Connection,
    table: str,
    low: str | None,
    high: str | None,
    *,
    utf8: bool = True,
) -> list[tuple[Any, ...]]:
    """The export rows of `table` whose conversation ID is in `[low, high)` (`None`: no
    bound), so that contiguous ranges put every row, even one whose conversation has no
    `conversations` row, in exactly one part. `utf8`: the database stores text as UTF-8
    (`is_utf8`); the body is exported as UTF-8 bytes either way."""
    query, column = _PART_QUERIES[table]
    clauses: list[str] = []
    args: list[str] = []
    if low is not None:
        clauses.append(f"{column} >= ?")
        args.append(low)
    if high is not None:
        clauses.append(f"{column} < ?")
        args.append(high)
    query = query.format(where=" AND ".join(clauses) or "1")
    try:
        if table == "turns" and not utf8:
            return _turn_part_rows(conn, query, args)
        return conn.execute(query, args).fetchall()
    except sqlite3.Error as error:
        failure = store_error(conn, error, operation="export", write=False)
        if quotes_stored_data(error):
            raise failure from None  # SQLite's message quotes the stored bytes
        raise failure from error
