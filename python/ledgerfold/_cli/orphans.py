"""Turns whose conversation key has no `conversations` row (another tool's
`UPDATE conversations SET id = ...` leaves them behind, its summaries too, or deletes the
row): no command can name them, so `list` and `report` show them as damaged, each key with
the SQL literal that selects its rows."""

from __future__ import annotations

import sqlite3

from ledgerfold._cli.main import key_sql
from ledgerfold.store._batch_reads import lenient_rows

__all__ = ["ORPHANED", "orphan_damage", "orphan_keys", "orphan_sql"]

#: Why the turns of a key with no `conversations` row are listed as damaged.
ORPHANED = (
    "its turns have no row in table conversations (their conversation's key there was"
    " changed, or its row deleted, outside ledgerfold), so no command can name it; the"
    " database was changed outside ledgerfold"
)


def orphan_keys(conn: sqlite3.Connection) -> list[object]:
    """The conversation keys of turn rows that no `conversations` row has, in key order,
    read leniently (text that is not UTF-8 comes as `NotUtf8`) through `conn`, in the
    caller's transaction."""
    rows = lenient_rows(
        conn,
        "SELECT DISTINCT conversation_id FROM turns AS t WHERE NOT EXISTS"
        " (SELECT 1 FROM conversations AS c WHERE c.id = t.conversation_id) ORDER BY 1",
    )
    return [key for (key,) in rows]


def orphan_sql(key: object) -> str:
    """The SQL literal that selects the orphaned key's rows (`conversation_id = ...`): text
    quoted, any other key as `key_sql` gives it."""
    if isinstance(key, str):
        return "'" + key.replace("'", "''") + "'"
    return str(key_sql(key))


def orphan_damage(key: object) -> str:
    """Why `report` lists the orphaned key, with the SQL that selects its turns."""
    return f"{ORPHANED} (in SQL: conversation_id = {orphan_sql(key)})"
