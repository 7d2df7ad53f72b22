"""Columnar export of a ledgerfold SQLite database as Parquet (the `parquet` extra).

`export_parquet(db, out_dir)` writes one directory per table, each split into the same
numbered parts, with whole conversations per part: part N of every table holds the same
conversations, and no conversation spans two parts. A distributed engine can therefore
treat a part as an independent unit of work (see `ledgerfold.dask`)::

    DIR/_manifest.json
    DIR/conversations/part-00000.parquet   id, revision, last_sequence, current_summary, ...
    DIR/turns/part-00000.parquet           every row, any state; body as binary UTF-8 bytes
    DIR/summaries/part-00000.parquet       every attempt, its status, a `current` pointer flag
    DIR/summary_sources/part-00000.parquet the evidence index, with the conversation ID

A value of a text column that is not UTF-8 text (another tool's write: a damaged database)
is carried, not refused: it is null in its column and its stored bytes are in the row's
`not_utf8` column (a map of the column's name to the bytes; null when every text of the row
is sound), which `ledgerfold.dask` reads back. One stored as a blob, an integer or a real
(in a table another tool made again without text affinity) is carried so too, its storage
class in the row's `stored_as` map (`blob`, `integer`, `real`; a number's bytes are its
digits, exact), so that a blob or the number 42 is never the text of the same characters,
another key (format version 4).

Conversations are assigned to parts in ID order by cumulative turn count (about
`turns_per_file` rows a part; a larger conversation is a part of its own). The whole export
reads one consistent snapshot of the database, is written beside `out_dir` first (inside a
new directory made for it) and renamed into place when complete, and `_manifest.json`
(written last) records the format version, the counts and the parts. An empty database
exports as one empty part per table.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold import _validate
from ledgerfold._errors import InvalidInput
from ledgerfold._optional import require
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store import _export_reads as export_reads
from ledgerfold.store._schema import SCHEMA_VERSION
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.store._sqlite_errors import damaged_row, quotes_stored_data, store_error

__all__ = [
    "DEFAULT_TURNS_PER_FILE",
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "TABLES",
    "ExportReport",
    "export_parquet",
]

#: `_manifest.json` identifies a ledgerfold export by `format` and `format_version`.
FORMAT = "ledgerfold-parquet"
FORMAT_VERSION = 4
MANIFEST = "_manifest.json"
#: One directory per table, each with the same numbered parts.
TABLES = ("conversations", "turns", "summaries", "summary_sources")
DEFAULT_TURNS_PER_FILE = 200_000


def _require_pyarrow() -> Any:
    """`pyarrow`, or an ImportError that names the extra to install."""
    return require("pyarrow", needed_by="Parquet export", install="'ledgerfold[parquet]'")


#: The column of each table that carries the stored bytes of its text that is not UTF-8.
NOT_UTF8 = "not_utf8"
#: ... and the one that names the storage class of such a value stored as no text at all.
STORED_AS = "stored_as"
#: The storage classes `stored_as` names (SQLite's `typeof`).
STORAGE = ("blob", "integer", "real")


def _schemas(pa: Any) -> dict[str, Any]:
    schemas = _columns(pa)
    # Every text column is nullable: a value that is not UTF-8 text is null, its bytes in
    # `not_utf8` and, for a blob or a number, its storage class in `stored_as` (format 4).
    return {
        table: pa.schema(
            [field.with_nullable(True) if field.type == pa.string() else field for field in schema]
            + [
                pa.field(NOT_UTF8, pa.map_(pa.string(), pa.binary())),
                pa.field(STORED_AS, pa.map_(pa.string(), pa.string())),
            ]
        )
        for table, schema in schemas.items()
    }


def _columns(pa: Any) -> dict[str, Any]:
    text, blob, i64 = pa.string(), pa.binary(), pa.int64()
    return {
        "conversations": pa.schema(
            [
                pa.field("id", text, nullable=False),
                pa.field("revision", i64, nullable=False),
                pa.field("last_sequence", i64, nullable=False),
                pa.field("current_summary", text),
                pa.field("current_summary_pk", i64),
                # Why the current summary is not checked against its sources, as
                # `ledgerfold revalidate` has it ('damaged-record', 'conversation-mismatch'),
                # or null: the rule needs the database (format version 2).
                pa.field("current_summary_verdict", text),
            ]
        ),
        "turns": pa.schema(
            [
                pa.field("conversation_id", text, nullable=False),
                pa.field("pk", i64, nullable=False),
                pa.field("id", text, nullable=False),
                pa.field("sequence", i64, nullable=False),
                pa.field("role", text, nullable=False),
                pa.field("body", blob, nullable=False),  # UTF-8 bytes exactly as stored
                pa.field("protected", pa.bool_(), nullable=False),
                pa.field("protection_reason", text),
                pa.field("group", text),
                pa.field("meta", text),  # a JSON object as stored, or null
                pa.field("digest", blob, nullable=False),  # stored; revalidation re-hashes
                pa.field("state", pa.int8(), nullable=False),  # 0 live, 1 retracted, 2 purged
            ]
        ),
        "summaries": pa.schema(
            [
                pa.field("conversation_id", text, nullable=False),
                pa.field("pk", i64, nullable=False),
                pa.field("id", text),
                pa.field("plan_id", text, nullable=False),
                pa.field("status", text, nullable=False),
                pa.field("reason", text),
                pa.field("created_at", text, nullable=False),
                pa.field("source_revision", i64),
                pa.field("source_fingerprint", text),
                pa.field("policy_version", text),
                pa.field("text", text),
                pa.field("source_count", i64),
                pa.field("through_sequence", i64),
                pa.field("rejected_source_ids", text),  # JSON array, rejected results only
                # conversations.current_summary points here (its status may be 'stale')
                pa.field("current", pa.bool_(), nullable=False),
            ]
        ),
        "summary_sources": pa.schema(
            [
                pa.field("conversation_id", text, nullable=False),
                pa.field("summary_pk", i64, nullable=False),
                pa.field("summary_id", text),
                pa.field("position", i64, nullable=False),
                pa.field("turn_id", text, nullable=False),
                pa.field("turn_digest", blob, nullable=False),
            ]
        ),
    }


def _part_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What `ledgerfold export --json` prints."""

    out_dir: str
    parts: int
    conversations: int
    turns: int
    summaries: int
    summary_sources: int
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "parts": self.parts,
            "conversations": self.conversations,
            "turns": self.turns,
            "summaries": self.summaries,
            "summary_sources": self.summary_sources,
            "seconds": round(self.seconds, 6),
        }


def _assign_parts(counts: Sequence[tuple[int, int]], turns_per_file: int) -> list[list[int]]:
    """Conversations (their rowids, in key order) into consecutive parts of about
    `turns_per_file` rows."""
    parts: list[list[int]] = []
    current: list[int] = []
    rows = 0
    for conversation_id, turns in counts:
        if current and rows + turns > turns_per_file:
            parts.append(current)
            current, rows = [], 0
        current.append(conversation_id)
        rows += turns
    if current or not parts:
        parts.append(current)  # an empty database still gets one (empty) part
    return parts


def _part_range(parts: list[list[int]], index: int) -> tuple[int | None, int | None]:
    """Part `index` as the range [its first conversation, the next part's first) (their
    rowids): `None` at either end, so that every row falls into exactly one part."""
    low = parts[index][0] if index > 0 else None
    high = parts[index + 1][0] if index + 1 < len(parts) else None
    return low, high


def _fits(pa: Any, field: Any, column: Sequence[Any]) -> bool:
    """Whether every value of an integer or flag column is a whole number of its range (or
    NULL where the field allows it): pyarrow would cut 2.5 to 2, and take 2 as a flag."""
    values = [value for value in column if value is not None] if field.nullable else column
    if not values:
        return True
    if not set(map(type, values)) <= {int}:
        return False
    if field.type == pa.bool_():
        return set(values) <= {0, 1}
    bound: int = 2 ** (field.type.bit_width - 1)
    return bool(-bound <= min(values) and max(values) < bound)


def _array(pa: Any, table: str, field: Any, column: Sequence[Any]) -> Any:
    """One column as an Arrow array of its field's type, exactly as stored: a value that is
    not one (a sequence of 2.5, a flag of 2, a number in a text column), written by another
    tool, is a `StoreError` naming the table and column, never a silently changed value nor
    pyarrow's message (which quotes the value). (Text that is not UTF-8 is carried:
    `_text_array`.)"""
    integral = pa.types.is_integer(field.type) or field.type == pa.bool_()
    try:
        if integral and not _fits(pa, field, column):
            raise ValueError
        values = [bool(v) for v in column] if field.type == pa.bool_() else column
        return pa.array(values, field.type)
    except (ValueError, TypeError, OverflowError, pa.ArrowException):
        raise damaged_row(
            f"export: cannot read column {field.name!r} of table {table}: a value is not"
            f" {field.type} (a damaged database?)"
        ) from None


#: What a sound text column holds (a blob is `bytes`, a number `int` or `float`).
_TEXT = frozenset({str, type(None)})


def _not_text(value: object) -> tuple[bytes, str | None] | None:
    """The stored bytes of a value of a text column that is not UTF-8 text, and its storage
    class when it is not text at all (`STORAGE`); None for text (or NULL). A number's bytes
    are its digits as Python writes them (exact; SQLite's own text of a real is not)."""
    if isinstance(value, batch_reads.NotUtf8):
        return value.raw, None
    if isinstance(value, bytes):
        return value, "blob"
    if isinstance(value, int):
        return str(value).encode("ascii"), "integer"
    if isinstance(value, float):
        return repr(value).encode("ascii"), "real"
    return None


def _text_array(
    pa: Any, field: Any, column: Sequence[Any], carried: list[Any], stored_as: list[Any]
) -> Any:
    """A text column as an Arrow array; a value that is not UTF-8 text (`NotUtf8`, a blob,
    a number, written by another tool) is null, its bytes added to its row's entry of
    `carried` (the rows' `not_utf8` maps) under the column's name, and the storage class of
    a blob or number to its entry of `stored_as`: a blob of UTF-8 bytes, or the integer 42,
    is never taken for text of the same characters (another conversation's key)."""
    if set(map(type, column)) <= _TEXT:
        return pa.array(column, field.type)
    values: list[Any] = []
    for index, value in enumerate(column):
        found = _not_text(value)
        if found is None:
            values.append(value)
            continue
        raw, storage = found
        carried[index] = [*(carried[index] or ()), (field.name, raw)]
        if storage is not None:
            stored_as[index] = [*(stored_as[index] or ()), (field.name, storage)]
        values.append(None)
    return pa.array(values, field.type)


def _table(pa: Any, table: str, schema: Any, rows: list[tuple[Any, ...]]) -> Any:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema.names[:-2]]
    carried: list[Any] = [None] * len(rows)  # each row's `not_utf8`
    stored_as: list[Any] = [None] * len(rows)  # ... and `stored_as`
    arrays = []
    for column, field in zip(columns, list(schema)[:-2], strict=True):
        if field.type == pa.string():
            try:
                arrays.append(_text_array(pa, field, column, carried, stored_as))
                continue
            except (ValueError, TypeError, pa.ArrowException):
                pass  # a value pyarrow refuses: `_array` names the column
        arrays.append(_array(pa, table, field, column))
    arrays.append(pa.array(carried, schema.field(NOT_UTF8).type))
    arrays.append(pa.array(stored_as, schema.field(STORED_AS).type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _json_key(key: object) -> object:
    """A part's first or last conversation key for the manifest: null when there is none or
    it is not text nor a number (text that is not UTF-8, a blob: a damaged database)."""
    return key if isinstance(key, str | int) else None


def _check_out_dir(out_dir: Path) -> None:
    # The export is renamed into place as `out_dir`: that needs a name of its own in an
    # existing parent, and nothing there that a rename would follow or could not replace.
    if out_dir.name in ("", ".", ".."):
        raise InvalidInput(
            f"out_dir: {str(out_dir)!r} does not end in a directory name"
            " (give a new or empty directory by name, e.g. ./export)",
            field="out_dir",
            problem="not-allowed",
        )
    if out_dir.is_symlink():
        raise InvalidInput(
            f"out_dir: {out_dir} is a symbolic link (give the directory itself, or a new path)",
            field="out_dir",
            problem="not-allowed",
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidInput(
            f"out_dir: {out_dir} exists and is not a directory",
            field="out_dir",
            problem="not-allowed",
        )
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise InvalidInput(
            f"out_dir: {out_dir} is not empty (export into a new or empty directory)",
            field="out_dir",
            problem="not-allowed",
        )
    if not out_dir.parent.is_dir():
        raise InvalidInput(
            f"out_dir: the directory {str(out_dir.parent)!r} does not exist",
            field="out_dir",
            problem="not-allowed",
        )


def _make_staging(target: Path) -> Path:
    """A new directory beside `target`, created for this export only (`mkdtemp`: a unique
    name, never an existing path), so cleaning up never touches anything else."""
    # The name is cut so the holder's stays within NAME_MAX whatever the target's length.
    return Path(tempfile.mkdtemp(prefix=f".{target.name[:64]}.partial-", dir=target.parent))


def _publish(holder: Path, target: Path) -> None:
    """Rename the finished export `holder/<name>` to `target`, then drop `holder`."""
    if target.is_dir() and not target.is_symlink():
        target.rmdir()  # checked empty above; rmdir never removes a non-empty directory
    (holder / target.name).rename(target)
    # The export is in place; a holder that cannot be removed is litter, not a failure.
    with contextlib.suppress(OSError):
        holder.rmdir()


def _check_database(db: Path) -> None:
    """Refuse a file that is not a ledgerfold store (`StoreError`) and migrate an older
    schema, the one write an export may make; a current database is opened read-only, so
    the export changes none of its files (SPEC §15.7), not even a WAL a writer left."""
    try:
        with contextlib.closing(batch_reads.open_readonly(db)) as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:
        version = None  # the store's own open says what is wrong with the file
    with SQLiteStore(db, read_only=version == SCHEMA_VERSION):
        pass


def _record_verdicts(conn: sqlite3.Connection) -> dict[object, str]:
    """The reason of each conversation whose current summary `ledgerfold revalidate` does not
    check against its sources (a record the store cannot read, or another conversation's),
    by the command's own rule and read (`_revalidate_runs.record_verdict`), in the export's
    snapshot: the Parquet path gives the same verdicts (`ledgerfold.dask`)."""
    try:
        _, damaged, _ = revalidate_runs.jobs_damage_and_keys(conn)
    except sqlite3.Error as error:
        failure = store_error(conn, error, operation="export", write=False)
        if quotes_stored_data(error):
            raise failure from None  # SQLite's message quotes the stored bytes
        raise failure from error
    return {conversation_id: reason for conversation_id, _, reason, _ in damaged if reason}


def export_parquet(
    db_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    turns_per_file: int = DEFAULT_TURNS_PER_FILE,
) -> ExportReport:
    """Export the database at `db_path` as Parquet into `out_dir` (new or empty).

    Each part holds whole conversations, about `turns_per_file` turn rows. Raises
    `InvalidInput` for bad arguments, a missing database or an unusable `out_dir`, and
    `StoreError` for a file that is not a ledgerfold database or a number that is not its
    column's; a text value that is not UTF-8 text is carried (`not_utf8`, `stored_as`)."""
    for name, value in (("db_path", db_path), ("out_dir", out_dir)):
        if isinstance(value, bool) or not isinstance(value, str | os.PathLike):
            raise InvalidInput(
                f"{name}: must be str or os.PathLike, got {type(value).__name__}",
                field=name,
                problem="wrong-type",
            )
    turns_per_file = _validate.integer("turns_per_file", turns_per_file, minimum=1)
    db = Path(os.fspath(db_path))
    target = Path(os.fspath(out_dir))
    if not db.is_file():
        problem = "is a directory" if db.is_dir() else "no such database"
        raise InvalidInput(f"db_path: {db}: {problem}", field="db_path", problem="not-allowed")
    _check_out_dir(target)
    pa = _require_pyarrow()
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    started = time.perf_counter()
    _check_database(db)
    schemas = _schemas(pa)
    holder: Path | None = None
    conn = batch_reads.open_readonly(db)
    try:
        holder = _make_staging(target)
        # Written inside the holder under the target's name, with the usual directory modes
        # (mkdtemp's own directory is 0700), then renamed into place.
        staging = holder / target.name
        utf8 = batch_reads.is_utf8(conn)
        with batch_reads.snapshot(conn):  # one snapshot for every table
            counts = export_reads.conversation_turn_counts(conn)
            keys = {rowid: key for rowid, key, _ in counts}
            parts = _assign_parts([(rowid, turns) for rowid, _, turns in counts], turns_per_file)
            verdicts = _record_verdicts(conn)
            for table in TABLES:
                (staging / table).mkdir(parents=True)
            totals = dict.fromkeys(TABLES, 0)
            described: list[dict[str, Any]] = []
            for index in range(len(parts)):
                low, high = _part_range(parts, index)
                entry: dict[str, Any] = {"index": index, "file": _part_name(index)}
                for table in TABLES:
                    rows = export_reads.part_rows(conn, table, low, high, utf8=utf8)
                    if table == "conversations":
                        rows = [(*row, verdicts.get(row[0])) for row in rows]
                    table_data = _table(pa, table, schemas[table], rows)
                    pq.write_table(table_data, staging / table / _part_name(index))
                    entry[table] = len(rows)
                    totals[table] += len(rows)
                part = [keys[rowid] for rowid in parts[index]]
                entry["first_conversation"] = _json_key(part[0] if part else None)
                entry["last_conversation"] = _json_key(part[-1] if part else None)
                described.append(entry)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "schema_version": SCHEMA_VERSION,
            "turns_per_file": turns_per_file,
            "tables": list(TABLES),
            "counts": totals,
            "parts": described,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _publish(holder, target)
    except BaseException:
        if holder is not None:
            shutil.rmtree(holder, ignore_errors=True)  # ours alone: made by _make_staging
        raise
    finally:
        conn.close()
    return ExportReport(
        out_dir=str(target),
        parts=len(parts),
        conversations=totals["conversations"],
        turns=totals["turns"],
        summaries=totals["summaries"],
        summary_sources=totals["summary_sources"],
        seconds=time.perf_counter() - started,
    )
