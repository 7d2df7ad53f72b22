"""The search index's state row (`search_state`, SPEC §16.5 "Normalisation": the
`index_version` the index was built with, how far its build got), read as numbers.

The row is derived data another tool can damage (text or a blob written over a number).
A value that is not an integer reads as unknown (None), never as a `ValueError` from
`int()`: the writing open then builds the index again from the ledger (`_search_index.build`),
a search says the index is not built for this ledgerfold, and `check_search_index` says
`not-built`, so one damaged row of a derived table never stops a store from opening.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from ledgerfold.store._schema import MIGRATIONS

#: The index's plain tables, as schema v5 made them, by name: `{table: CREATE TABLE ...}`.
_TABLES = {
    statement.split("CREATE TABLE ", 1)[1].split()[0]: statement.strip()
    for version, _, ddl in MIGRATIONS
    if version == 5
    for statement in re.sub(r"--[^\n]*", "", ddl).split(";")  # comments hold ";"
    if "CREATE TABLE " in statement
}

__all__ = ["IndexState", "read_state", "restore_tables"]


@dataclass(frozen=True)
class IndexState:
    #: The segmenter's `INDEX_VERSION` the index was built with (0: not kept here, no
    #: FTS5); None when the stored value is not an integer.
    version: int | None
    #: Turns with a pk up to this are indexed; None when the stored value is not an integer.
    through: int | None
    #: Every turn is indexed (the write paths keep it so): the stored value is 1.
    complete: bool

    @property
    def known(self) -> bool:
        """Whether it says which turns are indexed (complete, or built through a pk)."""
        return self.complete or self.through is not None


def _integer(value: object) -> int | None:
    return value if type(value) is int else None


def read_state(conn: sqlite3.Connection) -> IndexState | None:
    """The state row, or None when there is none (no index yet)."""
    row = conn.execute("SELECT index_version, built_through, complete FROM search_state").fetchone()
    if row is None:
        return None
    return IndexState(version=_integer(row[0]), through=_integer(row[1]), complete=row[2] == 1)


def restore_tables(conn: sqlite3.Connection) -> bool:
    """Make again, empty, the index's plain tables (`search_state`, `search_offsets`) that
    another tool dropped; returns whether it made one (the index must then be built again:
    what it held is not known)."""
    made = False
    for table, ddl in _TABLES.items():
        found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        if conn.execute(found, (table,)).fetchone() is None:
            conn.execute(ddl)
            made = True
    return made
