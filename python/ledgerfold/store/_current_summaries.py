"""The current summaries deep revalidation checks (`ledgerfold._revalidate_runs`), listed
in one read of a read-only connection: each as a `Job`, with whether its own conversation
points at it and whether the store reads its record (SPEC §6, the store's `damaged-record`).

A record is judged as the store reads it, by the store's rule (`summaries.readable_record`),
without keeping its text: in a UTF-8 file the SQL vouches for the usual record and the read
decodes its text columns, so the rule runs in Python only on the others. A record whose slot
(`through_sequence`) is not its sources' last sequence is damaged too, as the store's read of
the version finds it (`_summary_slot.check_slot`), and so is one whose plan's preserved
roles cannot be read back (`_plan_roles.plan_roles`), as the store's context finds it: both
judged in the same SQL, by the same rules (`SLOT_SOUND_SQL`, `ROLES_DAMAGED_SQL`), with
indexed lookups of each summary.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ledgerfold.store._batch_reads import (
    Job,
    is_utf8,
    lenient_rows,
    lenient_text,
    snapshot,
    text_read_as,
)
from ledgerfold.store._plan_roles import ROLES_DAMAGED_SQL
from ledgerfold.store._rows import SUMMARY_COLUMNS
from ledgerfold.store._schema import CURRENT
from ledgerfold.store._sqlite_errors import quotes_stored_data
from ledgerfold.store._summary_slot import SLOT_SOUND_SQL

__all__ = ["READ_SURELY", "current_summaries"]

_FROM_CURRENT = (
    " FROM conversations AS c JOIN summaries AS s ON s.pk = c.current_summary"
    f" WHERE s.status = '{CURRENT}'"
)
#: SQL: whether the store lays out current summary row `s` as its record says (else its
#: context finds it damaged, as a record it cannot read): its slot is its sources', and the
#: roles its plan kept raw can be read back (`_plan_roles.plan_roles`; SPEC §17.3's check
#: needs them).
LAYOUT_SOUND = (
    f"(IFNULL({SLOT_SOUND_SQL}, 0) AND NOT EXISTS (SELECT 1 FROM plans l"
    f" WHERE l.id = s.plan_id AND IFNULL({ROLES_DAMAGED_SQL}, 1)))"
)
# In table order (ORDER BY c.id would walk the ID index and look each row up, twice the
# time); the caller sorts them.
_JOB = (
    "SELECT c.id, s.pk, s.id, s.source_fingerprint, s.source_count, s.through_sequence,"
    f" s.conversation_id IS c.id, {LAYOUT_SOUND}"
)
_RECORD = ", ".join(f"s.{column.strip()}" for column in SUMMARY_COLUMNS.split(","))


def _leads(column: str) -> str:
    # Text whose first byte is printable ASCII, `!` up to DEL (U+007F) excluded, in a UTF-8
    # file: not blank. (In UTF-16le the first byte is not the first character's.)
    return f"({column} >= '!' AND {column} < '\x7f')"


def _text(column: str) -> str:
    return f"({column} >= '' AND {column} < X'')"  # SQLite orders numbers < text < blobs


# The records the store surely reads as versions (`readable` agrees) if their text is
# UTF-8: IDs of text that are not blank, a text that is text, a revision that is a whole
# number >= 0, no rejected sources. (The conversation key: the job's own, when it is the
# pointing conversation's.) Comparisons and one `typeof`, no Python call: with the
# decoding of `_DECODED`, about 1.2 us per record (36,000 current summaries: 45 ms).
READ_SURELY = (
    f"{_leads('s.id')} AND {_leads('s.plan_id')} AND {_leads('s.source_fingerprint')}"
    f" AND {_leads('s.policy_version')} AND {_text('s.text')}"
    f" AND (s.parent_id IS NULL OR {_leads('s.parent_id')})"
    " AND typeof(s.source_revision) = 'integer' AND s.source_revision >= 0"
    " AND s.rejected_source_ids IS NULL"
)
# The record's text columns the job leaves out: the plain read decodes them as the store's
# read does (a text that is not UTF-8 fails both), and they go with the row.
_DECODED = "s.plan_id, s.reason, s.created_at, s.policy_version, s.text, s.parent_id"
_CURRENT_UTF8 = f"{_JOB}, IFNULL({READ_SURELY}, 0), {_DECODED}{_FROM_CURRENT}"
_CURRENT_RECORDS = f"{_JOB}, {_RECORD}{_FROM_CURRENT}"
_RECORD_AT = f"SELECT {_RECORD} FROM summaries AS s WHERE s.pk = ?"


def current_summaries(
    conn: sqlite3.Connection, readable: Callable[[tuple[Any, ...]], bool]
) -> list[tuple[Job, bool, bool]]:
    """Every current summary to check, as a `Job`, with whether the summary's own
    conversation is the one pointing at it (SPEC §6 `conversation-mismatch`) and whether
    the store reads its record: `readable` (the store's rule) of its `SUMMARY_COLUMNS` read
    as the store reads them, any text that is not UTF-8 as `NotUtf8`, and its layout sound
    (`LAYOUT_SOUND`: else it is not read either); in table order. A key
    or fingerprint stored as text that is not UTF-8 comes back as `NotUtf8`.

    The records are read one row at a time and let go: no summary text is kept. In a UTF-8
    file a record the SQL finds sound is not handed to `readable` (its text columns are
    decoded by the read, as the store's read decodes them); only the others are, and every
    record in a UTF-16 file (SQLite converts its text to UTF-8 as the store reads it) or in
    a file where some text is not UTF-8."""
    if is_utf8(conn):
        try:
            with snapshot(conn):
                return _current_utf8(conn, readable)
        except sqlite3.OperationalError as error:
            if not quotes_stored_data(error):  # not a text that failed to decode
                raise
    with snapshot(conn), text_read_as(conn, lenient_text):
        return [
            (row[:6], bool(row[6]), bool(row[7]) and readable(row[8:]))
            for row in conn.execute(_CURRENT_RECORDS)
        ]


def _current_utf8(
    conn: sqlite3.Connection, readable: Callable[[tuple[Any, ...]], bool]
) -> list[tuple[Job, bool, bool]]:
    found: list[tuple[Job, bool, bool]] = []
    unsure: list[int] = []
    for row in conn.execute(_CURRENT_UTF8):
        if row[7] and not (row[8] and row[6]):
            unsure.append(len(found))
        found.append((row[:6], bool(row[6]), bool(row[7])))
    for at in unsure:  # in the same snapshot: the record is there
        job, own, _ = found[at]
        (record,) = lenient_rows(conn, _RECORD_AT, (job[1],))
        found[at] = (job, own, readable(record))
    return found
