"""The bulk reads of a ledgerfold database that deep revalidation checks, each read through a
read-only connection inside one snapshot (the parts a Parquet export writes are
`_export_reads`, on the same connection helpers).

Revalidation reads a run of conversations packed by column, one aggregate row for the whole
run, so no driver or Python code runs per turn (the format: `columns/format.rs` in the core).
The query that packs is generated here from the constants the native module exports
(`_native.PACKED_*`, `ROLE_CODES`, `PROTECTION_REASON_CODES`), so it cannot disagree with the
decoder on a number; a run whose packing does not line up all the same is read again by rows
(`turn_rows`, `source_rows`).
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerfold import _native
from ledgerfold._sized import sized
from ledgerfold.store._paths import connect_reading_uri
from ledgerfold.store._schema import TURN_LIVE, TURN_PURGED
from ledgerfold.store._sqlite_errors import quotes_stored_data

__all__ = [
    "MAX_RUN_SUMMARIES",
    "NATIVE_FORMAT",
    "Job",
    "NotUtf8",
    "PackedFormat",
    "conversation_count",
    "is_utf8",
    "lenient_rows",
    "lenient_text",
    "open_readonly",
    "open_readonly_first",
    "packed_audit",
    "packed_sources",
    "packed_turns",
    "snapshot",
    "source_rows",
    "text_read_as",
    "turn_rows",
    "unbindable",
]


def open_readonly(path: str | os.PathLike[str], uri: str | None = None) -> sqlite3.Connection:
    """A read-only connection any thread may use (one at a time), waiting out writers; it
    creates and changes no file (`reading_uri`).

    Connections opened side by side must share one `uri`, chosen while the first of them is
    open and kept open until the last closes: `reading_uri` looks at the WAL files, which a
    sibling's open creates and its close deletes, so deciding it again per thread races
    (a WAL opened without its `-shm` failed with "unable to open database file", and a
    `mode=ro` sibling left both files behind)."""
    if uri is None:
        return open_readonly_first(path)[0]
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def open_readonly_first(path: str | os.PathLike[str]) -> tuple[sqlite3.Connection, str]:
    """`open_readonly`'s first connection, and the URI the ones opened beside it while it
    stays open share: it has read the database once (`connect_reading_uri`), so the last
    writer's close cannot delete the WAL files it chose its URI by under it."""
    conn, uri = connect_reading_uri(
        str(Path(path).resolve()),
        factory=sqlite3.Connection,
        isolation_level=None,
        check_same_thread=False,
    )
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn, uri


def is_utf8(conn: sqlite3.Connection) -> bool:
    """Whether text is stored as UTF-8 (a packed read's lengths count its bytes)."""
    encoding: str = conn.execute("PRAGMA encoding").fetchone()[0]
    return encoding == "UTF-8"


def unbindable(text: str) -> bool:
    """Whether `text`, read from a database whose text is UTF-16, cannot be bound as what it
    is stored as: SQLite converts a bound U+FFFE or U+FFFF to U+FFFD (so a lookup or range
    by it finds another key); such a key is found by a scan instead."""
    return "\ufffe" in text or "\uffff" in text


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: every read inside sees the same database (inside one already
    open, that one)."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


@dataclass(frozen=True, slots=True)
class NotUtf8:
    """A stored text value whose bytes are not UTF-8 (SQLite stores what it is given: a
    damaged database). Neither `str` nor `bytes`, so that it is never taken for a key the
    API can name, nor for a blob with the same bytes (SQLite tells the two apart); a query
    binds it back as `CAST(? AS TEXT)` of `raw`. Its bytes are never put in an error or a
    log."""

    raw: bytes

    def __repr__(self) -> str:
        return f"NotUtf8({sized(len(self.raw), 'byte')})"


def lenient_text(raw: bytes) -> str | NotUtf8:
    """A `text_factory`: stored text as `str`, or as `NotUtf8` when its bytes are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return NotUtf8(raw)


@contextmanager
def text_read_as(conn: sqlite3.Connection, factory: Any) -> Iterator[None]:
    """Stored text read through `factory` (`bytes`, `lenient_text`) in the block: the
    connection's own `text_factory` comes back after it, also when the block raises."""
    previous = conn.text_factory
    conn.text_factory = factory
    try:
        yield
    finally:
        conn.text_factory = previous


def lenient_rows(
    conn: sqlite3.Connection, query: str, parameters: Sequence[object] = ()
) -> list[tuple[Any, ...]]:
    """Every row of `query`, any text that is not UTF-8 read as `NotUtf8` instead of failing
    the read. The plain read runs first, so a sound database pays nothing for it."""
    try:
        rows: list[tuple[Any, ...]] = conn.execute(query, parameters).fetchall()
        return rows
    except sqlite3.OperationalError as error:
        if not quotes_stored_data(error):  # not a text that failed to decode
            raise
    with text_read_as(conn, lenient_text):
        rows = conn.execute(query, parameters).fetchall()
    return rows


def conversation_count(conn: sqlite3.Connection) -> int:
    """How many conversations the database records (their keys are not read)."""
    count: int = conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
    return count


# ------------------------------------------------------------------ revalidation

# (conversation_id, summary_pk, summary_id, source_fingerprint, source_count, through_sequence)
Job = tuple[str, int, str, str, int, int | None]


@dataclass(frozen=True, slots=True)
class PackedFormat:
    """The constants of the packed format the packing queries are generated from;
    `NATIVE_FORMAT` holds the native module's."""

    separator: str
    null_length: int
    turn_key_summary: int
    turn_key_role: int
    turn_key_protected: int
    turn_key_reason: int
    unknown_code: int
    source_summary_shift: int
    source_position_shift: int
    source_position_bits: int
    source_id_length_bits: int
    role_codes: tuple[tuple[str, int], ...]
    reason_codes: tuple[tuple[str, int], ...]


NATIVE_FORMAT = PackedFormat(
    separator=_native.PACKED_SEPARATOR,
    null_length=_native.PACKED_NULL_LENGTH,
    turn_key_summary=_native.PACKED_TURN_KEY_SUMMARY,
    turn_key_role=_native.PACKED_TURN_KEY_ROLE,
    turn_key_protected=_native.PACKED_TURN_KEY_PROTECTED,
    turn_key_reason=_native.PACKED_TURN_KEY_REASON,
    unknown_code=_native.PACKED_UNKNOWN_CODE,
    source_summary_shift=_native.PACKED_SOURCE_SUMMARY_SHIFT,
    source_position_shift=_native.PACKED_SOURCE_POSITION_SHIFT,
    source_position_bits=_native.PACKED_SOURCE_POSITION_BITS,
    source_id_length_bits=_native.PACKED_SOURCE_ID_LENGTH_BITS,
    role_codes=tuple(_native.ROLE_CODES.items()),
    reason_codes=tuple(_native.PROTECTION_REASON_CODES.items()),
)

#: Summaries one run may name: the format's limit, and 3 parameters each stay under
#: SQLite's oldest limit of 999.
MAX_RUN_SUMMARIES = _native.PACKED_MAX_SUMMARIES


def _text_column(fmt: PackedFormat, column: str, *, nullable: bool = True) -> str:
    """A text column packed: its byte lengths (`null_length` for NULL), then its values back
    to back. A NOT NULL column skips the NULL case (a fifth less time a row; a NULL would
    drop out of both lists, and the packing be refused)."""
    length = f"length(CAST({column} AS BLOB))"
    if nullable:
        length = f"ifnull({length}, {fmt.null_length})"
    return f"group_concat({length}, '{fmt.separator}'), CAST(group_concat({column}, '') AS BLOB)"


def _digit(fmt: PackedFormat, column: str, codes: tuple[tuple[str, int], ...], place: int) -> str:
    """A coded text column as its digit of the turn key (already in its place); the unknown
    code for a value no valid turn has. Compared as text whatever the storage class, as
    every text field is read."""
    whens = " ".join(f"WHEN '{value}' THEN {code * place}" for value, code in codes)
    return f"CASE CAST({column} AS TEXT) {whens} ELSE {fmt.unknown_code * place} END"


def _turn_key(fmt: PackedFormat) -> str:
    """Which summary (`k`) a row was read for, with its role, protection flag and reason."""
    protected = (
        f"CASE WHEN protected = 0 THEN 0 WHEN typeof(protected) = 'integer'"
        f" THEN {fmt.turn_key_protected} ELSE {fmt.unknown_code * fmt.turn_key_protected} END"
    )
    reason = _digit(fmt, "protection_reason", fmt.reason_codes, fmt.turn_key_reason)
    return (
        f"k * {fmt.turn_key_summary}"
        f" + {_digit(fmt, 'role', fmt.role_codes, fmt.turn_key_role)}"
        f" + {protected}"
        f" + CASE WHEN protection_reason IS NULL THEN 0 ELSE {reason} END"
    )


@functools.cache
def _packed_turns_query(fmt: PackedFormat, slots: int, *, bounded: bool) -> str:
    """Each summary `k` of a run reads the live turns of its conversation up to its
    `through_sequence` (the largest sequence it cites): the newest turns, which no summary
    covers, are never read. The unbounded form reads all of them, for a run where a cited
    turn was not found below that bound."""
    columns = ", ".join(_turn_columns(fmt))
    rows = ", ".join(["(?, ?, ?)"] * slots)
    below = " AND t.sequence <= run.bound" if bounded else ""
    return (
        f"WITH run(k, conversation, bound) AS (VALUES {rows}) SELECT {columns}"
        " FROM run CROSS JOIN turns AS t ON t.conversation_id = run.conversation"
        f"{below} WHERE t.state = ?"
    )


def _source_key(fmt: PackedFormat) -> str:
    """Each source row as one key, `k`, position and byte length of the turn ID in their
    bits: two aggregate calls a row (with the IDs) instead of four. Multiplied rather than
    shifted, so that a position that is not an integer stays one (SQLite would truncate it
    for a shift) and writes no key; so does a position or ID out of range, which writes
    'x': the packing is refused and the run read by rows."""
    length = "length(CAST(ss.turn_id AS BLOB))"
    return (
        f"CASE WHEN ss.position BETWEEN 0 AND {(1 << fmt.source_position_bits) - 1}"
        f" AND {length} < {1 << fmt.source_id_length_bits}"
        f" THEN run.k * {1 << fmt.source_summary_shift}"
        f" + ss.position * {1 << fmt.source_position_shift} + {length} ELSE 'x' END"
    )


@functools.cache
def _packed_sources_query(fmt: PackedFormat, slots: int) -> str:
    """The sources of exactly the summaries a run names (by key), not whatever is current
    by the time the run is read: a summary superseded meanwhile is checked as itself."""
    rows = ", ".join(["(?, ?)"] * slots)
    return (
        f"WITH run(k, pk) AS (VALUES {rows}) SELECT group_concat({_source_key(fmt)},"
        f" '{fmt.separator}'), CAST(group_concat(ss.turn_id, '') AS BLOB)"
        " FROM run CROSS JOIN summary_sources AS ss ON ss.summary_pk = run.pk"
    )


def _slots(run: Sequence[Job]) -> int:
    """How many summaries a run's statements name: its own, padded to a power of two (with
    `None`), so that few statements are prepared."""
    return 1 << (len(run) - 1).bit_length()


def _keys(run: Sequence[Job]) -> list[int | None]:
    keys: list[int | None] = [job[1] for job in run]
    return keys + [None] * (_slots(run) - len(keys))


def _turn_parameters(run: Sequence[Job]) -> list[object]:
    """`(k, conversation, bound)` for each summary of the run, padded, then the live state."""
    parameters: list[object] = []
    for k, job in enumerate(run):
        parameters += [k, job[0], job[5]]
    return parameters + [None] * (3 * (_slots(run) - len(run))) + [TURN_LIVE]


def _source_parameters(run: Sequence[Job]) -> list[object]:
    """`(k, summary key)` for each summary of the run, padded."""
    parameters: list[object] = []
    for k, job in enumerate(run):
        parameters += [k, job[1]]
    return parameters + [None] * (2 * (_slots(run) - len(run)))


# The packing reads look `NATIVE_FORMAT` up when called, so that a test can swap in a
# drifted copy and show that the drift is caught.


def packed_turns(conn: sqlite3.Connection, run: Sequence[Job], *, bounded: bool) -> tuple[Any, ...]:
    """The run's live turns as the 10 packed columns `_native.revalidate_columns` takes, up
    to each summary's `through_sequence` when `bounded`. Raises `sqlite3.DataError` when a
    column outgrows SQLite's length limit."""
    query = _packed_turns_query(NATIVE_FORMAT, _slots(run), bounded=bounded)
    columns: tuple[Any, ...] = conn.execute(query, _turn_parameters(run)).fetchone()
    return columns


def packed_sources(conn: sqlite3.Connection, run: Sequence[Job]) -> tuple[Any, ...]:
    """The run's sources as the 2 packed columns `_native.revalidate_columns` takes."""
    query = _packed_sources_query(NATIVE_FORMAT, _slots(run))
    columns: tuple[Any, ...] = conn.execute(query, _source_parameters(run)).fetchone()
    return columns


# The audit of a run (`ledgerfold._revalidate_audit`): the live turns no verified summary
# covers, packed as the check's turns are, plus each row's table key and stored digest. A
# slot `(k, conversation, bound)` reads the rows above `bound` (`-inf`: all of them; NULL:
# none), and `kept` (a JSON array of `[k, sequence]`) names rows at or below it that the
# check read and found uncited.
_AUDIT_ROW = (
    "t.pk AS pk, t.id AS id, t.sequence AS sequence, t.role AS role, t.body AS body,"
    " t.protected AS protected, t.protection_reason AS protection_reason, t.grp AS grp,"
    " t.meta AS meta, t.digest AS digest"
)


def _turn_columns(fmt: PackedFormat) -> list[str]:
    """The packed turn columns (key, id, sequence, body, group, meta) the native check reads."""
    return [
        f"group_concat({_turn_key(fmt)}, '{fmt.separator}')",
        _text_column(fmt, "id", nullable=False),
        f"group_concat(sequence, '{fmt.separator}')",
        _text_column(fmt, "body", nullable=False),
        _text_column(fmt, "grp"),
        _text_column(fmt, "meta"),
    ]


@functools.cache
def _packed_audit_query(fmt: PackedFormat, slots: int, *, kept: bool) -> str:
    digest_length = (
        f"CASE WHEN typeof(digest) = 'blob' THEN length(digest) ELSE {fmt.null_length} END"
    )
    columns = ", ".join(
        [
            *_turn_columns(fmt),
            f"group_concat(pk, '{fmt.separator}')",
            f"group_concat({digest_length}, '{fmt.separator}')",
            "CAST(group_concat(CASE WHEN typeof(digest) = 'blob' THEN digest END, '') AS BLOB)",
        ]
    )
    rows = ", ".join(["(?, ?, ?)"] * slots)
    selects = [
        f"SELECT run.k AS k, {_AUDIT_ROW} FROM run CROSS JOIN turns AS t"
        " ON t.conversation_id = run.conversation AND t.sequence > run.bound WHERE t.state = ?"
    ]
    if kept:
        selects.append(
            f"SELECT run.k AS k, {_AUDIT_ROW} FROM json_each(?) AS kept CROSS JOIN run"
            " ON run.k = json_extract(kept.value, '$[0]') CROSS JOIN turns AS t"
            " ON t.conversation_id = run.conversation"
            " AND t.sequence = json_extract(kept.value, '$[1]') WHERE t.state = ?"
        )
    return (
        f"WITH run(k, conversation, bound) AS (VALUES {rows})"
        f" SELECT {columns} FROM ({' UNION ALL '.join(selects)})"
    )


def packed_audit(
    conn: sqlite3.Connection,
    slots: Sequence[tuple[object, float | int | None]],
    kept: Sequence[tuple[int, int]],
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The audit rows of a run, as `_native.audit_columns` takes them: the 10 turn columns
    and the 3 audit columns. `slots[k]` is `(conversation, bound)`; `kept` `(k, sequence)`
    pairs. Raises `sqlite3.DataError` when a column outgrows SQLite's length limit."""
    count = 1 << (max(len(slots), 1) - 1).bit_length()
    query = _packed_audit_query(NATIVE_FORMAT, count, kept=bool(kept))
    parameters: list[object] = []
    for k, (conversation, bound) in enumerate(slots):
        parameters += [k, conversation, bound]
    parameters += [None] * (3 * (count - len(slots))) + [TURN_LIVE]
    if kept:
        parameters += [json.dumps(kept), TURN_LIVE]
    columns: tuple[Any, ...] = conn.execute(query, parameters).fetchone()
    return columns[:10], columns[10:]


# The row form, text fields as their stored bytes in a UTF-8 database (whatever the storage
# class, and text that is not UTF-8 stays visible as such: the packed read sees the same
# bytes). In a UTF-16 one a cast would give UTF-16 bytes: text is read as text there, which
# SQLite converts to UTF-8, as bytes (`_as_utf8_bytes`; text that is not valid UTF-16 comes
# out as bytes that are not UTF-8, damage for the reader to judge, not a failed read).
_ROW_COLUMNS = (
    "conversation_id",
    "id",
    "sequence",
    "role",
    "body",
    "protected",
    "protection_reason",
    "grp",
    "meta",
)


def _read(column: str, utf8: bool) -> str:
    return f"CAST({column} AS BLOB)" if utf8 else column


def _number(column: str, utf8: bool) -> str:
    """A column that holds a number (sequence, protected) in the row form: a number as it
    is, anything else as its bytes (as text is read), so that a text that is not UTF-8
    (damage) does not fail the read; the wrong type makes the row an invalid turn."""
    if not utf8:  # read with `_as_utf8_bytes`
        return column
    return (
        f"CASE WHEN typeof({column}) IN ('text', 'blob') THEN CAST({column} AS BLOB)"
        f" ELSE {column} END"
    )


def _row_column(column: str, utf8: bool) -> str:
    return _number(column, utf8) if column in ("sequence", "protected") else _read(column, utf8)


@contextmanager
def _as_utf8_bytes(conn: sqlite3.Connection, utf8: bool) -> Iterator[None]:
    """In a database whose text is not stored as UTF-8, text read in the block comes as the
    bytes of SQLite's UTF-8 of it (what `_read`'s cast gives in a UTF-8 one)."""
    if utf8:
        yield
        return
    with text_read_as(conn, bytes):
        yield


def turn_rows(conn: sqlite3.Connection, run: Sequence[Job], *, utf8: bool) -> list[tuple[Any, ...]]:
    """Every live turn of the run's range of conversations, one row each, as
    `_native.revalidate_flat` takes them."""
    columns = [_row_column(column, utf8) for column in _ROW_COLUMNS]
    query = (
        f"SELECT {', '.join(columns)} FROM turns"
        " WHERE conversation_id BETWEEN ? AND ? AND state = ?"
    )
    with _as_utf8_bytes(conn, utf8):
        rows: list[tuple[Any, ...]] = conn.execute(
            query, (run[0][0], run[-1][0], TURN_LIVE)
        ).fetchall()
    return rows


def source_rows(
    conn: sqlite3.Connection, run: Sequence[Job], *, utf8: bool
) -> list[tuple[Any, ...]]:
    """`(summary_pk, turn_id)` of the sources of the run's summaries, each summary's in
    position order."""
    keys = _keys(run)
    query = (
        f"SELECT summary_pk, {_read('turn_id', utf8)} FROM summary_sources"
        f" WHERE summary_pk IN ({', '.join(['?'] * len(keys))}) ORDER BY summary_pk, position"
    )
    with _as_utf8_bytes(conn, utf8):
        rows: list[tuple[Any, ...]] = conn.execute(query, keys).fetchall()
    return rows


def sealed_inputs(
    conn: sqlite3.Connection, conversation_id: str, summary_id: str
) -> tuple[str, list[tuple[str, bytes]], set[str], list[tuple[Any, ...]]]:
    """What `ledgerfold._sealed.recheck` needs of one summary: its fingerprint, its sources
    with their stored digests, the conversation's purged turn IDs and its live turns."""
    utf8 = is_utf8(conn)  # text read as its stored bytes: damage is the reader's to judge
    pk, fingerprint = conn.execute(
        "SELECT pk, source_fingerprint FROM summaries WHERE id = ?", (summary_id,)
    ).fetchone()
    columns = [_row_column(column, utf8) for column in _ROW_COLUMNS[1:]]
    with _as_utf8_bytes(conn, utf8):
        sources = conn.execute(
            f"SELECT {_read('turn_id', utf8)}, turn_digest FROM summary_sources"
            " WHERE summary_pk = ? ORDER BY position",
            (pk,),
        ).fetchall()
        purged = {
            bytes(row[0]).decode("utf-8", errors="replace")
            for row in conn.execute(
                f"SELECT {_read('id', utf8)} FROM turns WHERE conversation_id = ? AND state = ?",
                (conversation_id, TURN_PURGED),
            )
        }
        live = conn.execute(
            f"SELECT {', '.join(columns)} FROM turns"
            " WHERE conversation_id = ? AND state = ? ORDER BY sequence",
            (conversation_id, TURN_LIVE),
        ).fetchall()
    return fingerprint, sources, purged, live
