"""The reads a Parquet export writes (`ledgerfold.export`): each table's rows of a range of
conversations, through `_batch_reads`' read-only connection inside one snapshot; the body
is exported as UTF-8 bytes whatever the database's text encoding. Stored text that is not
UTF-8 (written by another tool) is read as `NotUtf8`, for the export to carry as its bytes,
never a failed read."""

from __future__ import annotations

import sqlite3
from typing import Any

from ledgerfold.store._batch_reads import NotUtf8, lenient_rows, lenient_text, text_read_as
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


def conversation_turn_counts(conn: sqlite3.Connection) -> list[tuple[int, Any, int]]:
    """`(table rowid, conversation key, turn rows of any state)` for every conversation, in
    key order (as SQLite orders them); a key stored as text that is not UTF-8 comes as
    `NotUtf8`. A part's range is bound by its conversations' rowids (`part_rows`)."""
    try:
        return lenient_rows(
            conn,
            "SELECT c.rowid, c.id,"
            " (SELECT COUNT(*) FROM turns AS t WHERE t.conversation_id = c.id)"
            " FROM conversations AS c ORDER BY c.id",
        )
    except sqlite3.Error as error:
        failure = store_error(conn, error, operation="export", write=False)
        if quotes_stored_data(error):
            raise failure from None  # SQLite's message quotes the stored bytes
        raise failure from error


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


def _turn_part_rows(conn: sqlite3.Connection, query: str, args: list[int]) -> list[tuple[Any, ...]]:
    """The `turns` export rows in a database whose text is not stored as UTF-8: the body is
    read as text (SQLite converts it to UTF-8; a cast would give its UTF-16 bytes) and
    exported as the bytes of that, as a cast gives them in a UTF-8 database (a body that is
    not valid text too); any other text that is not valid comes as `NotUtf8`, as it does
    there."""
    with text_read_as(conn, lenient_text):
        rows = conn.execute(query.replace("CAST(body AS BLOB)", "body"), args).fetchall()
    exported: list[tuple[Any, ...]] = []
    for row in rows:
        body = row[_BODY]
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif isinstance(body, NotUtf8):
            body = body.raw
        exported.append((*row[:_BODY], body, *row[_BODY + 1 :]))
    return exported


#: A range bound: the key of the conversation with this table rowid, as stored. Never the key
#: bound as a parameter: one stored as text that is not valid in the file's encoding cannot
#: be bound back as itself (SQLite converts it), nor can a blob be told from text.
_BOUND = "(SELECT id FROM conversations WHERE rowid = ?)"


def part_rows(
    conn: sqlite3.Connection,
    table: str,
    low: int | None,
    high: int | None,
    *,
    utf8: bool = True,
) -> list[tuple[Any, ...]]:
    """The export rows of `table` whose conversation key is in `[low's key, high's key)`
    (`low` and `high` rowids of `conversations`, `None`: no bound), so that contiguous
    ranges put every row, even one whose conversation has no `conversations` row, in
    exactly one part. `utf8`: the database stores text as UTF-8 (`is_utf8`); the body is
    exported as UTF-8 bytes either way. Text that is not UTF-8 comes as `NotUtf8` (a sound
    part is read once, as it is)."""
    query, column = _PART_QUERIES[table]
    clauses: list[str] = []
    args: list[int] = []
    for rowid, operator in ((low, ">="), (high, "<")):
        if rowid is not None:
            clauses.append(f"{column} {operator} {_BOUND}")
            args.append(rowid)
    query = query.format(where=" AND ".join(clauses) or "1")
    try:
        if table == "turns" and not utf8:
            return _turn_part_rows(conn, query, args)
        return lenient_rows(conn, query, args)
    except sqlite3.Error as error:
        failure = store_error(conn, error, operation="export", write=False)
        if quotes_stored_data(error):
            raise failure from None  # SQLite's message quotes the stored bytes
        raise failure from error
