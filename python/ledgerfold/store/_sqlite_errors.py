"""SQLite failures as `StoreError`s that never quote stored text (SPEC §15.8 "Errors")."""

from __future__ import annotations

import re
import sqlite3
from contextlib import suppress

from ledgerfold._errors import StoreError

__all__ = ["quotes_stored_data", "store_error"]

_UNDECODABLE = re.compile(r"^Could not decode to UTF-8 column '([^']*)'")


def quotes_stored_data(error: sqlite3.Error) -> bool:
    """Whether SQLite's message may quote stored text."""
    return bool(_UNDECODABLE.match(str(error))) or " with text " in str(error)


def damaged_row(message: str) -> StoreError:
    """The `StoreError` of data changed outside ledgerfold that cannot be read back (a row
    the store cannot take, text that is not UTF-8), marked so (`is_damaged_row`): the
    ledger, not the database, failed, and a compaction raises it, as `load()` does, rather
    than call it a failed compaction."""
    error = StoreError(message)
    setattr(error, "damaged_row", True)  # noqa: B010 (no such field on the public class)
    return error


def is_damaged_row(error: BaseException) -> bool:
    """Whether `error` is `damaged_row`'s."""
    return getattr(error, "damaged_row", False) is True


def store_error(
    conn: sqlite3.Connection | None, error: sqlite3.Error, *, operation: str, write: bool
) -> StoreError:
    """The `StoreError` of a failed read or write. SQLite's message is kept unless it may
    quote stored data (a text column that is not valid UTF-8 quotes its bytes): then only
    the column, its table(s) and the operation are named, and the caller raises it
    `from None` (SPEC §15.8 "Errors")."""
    message = str(error)
    undecodable = _UNDECODABLE.match(message)
    if not quotes_stored_data(error):
        outcome = "nothing was written" if write else "while reading"
        return StoreError(f"{operation}: database failure, {outcome} ({message})")
    column = undecodable.group(1) if undecodable is not None else "?"
    tables = "?"
    if conn is not None:
        with suppress(sqlite3.Error):
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT m.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p"
                    " WHERE m.type = 'table' AND p.name = ? ORDER BY m.name",
                    (column,),
                )
            ]
            tables = " or ".join(names) or "?"
    return damaged_row(
        f"{operation}: cannot read column {column!r} of table {tables}: its text is not"
        " valid UTF-8 (a damaged database?)" + ("; nothing was written" if write else "")
    )
