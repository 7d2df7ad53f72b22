"""The FTS5 index's level count after an erasing call's rewrite (`_search_index.scrub`).

FTS5's `optimize` merges every segment into one placed on a new level above the old ones.
An SQLite from before FTS5's fix of August 2023 (3.40 here; it caps the count at 64 since)
adds levels at every `optimize` that has two segments to merge once the index outgrows a
page, two levels per erasing call after a write on the real transcripts; past 2,000 levels
FTS5 reads its own structure record as corrupt ("database disk image is malformed"), and
every later write of the store fails. So when the record names more than `MAX_LEVELS`
levels, the index is rebuilt from the bodies of the turns it holds ('delete-all', then the
same rows again), which resets it to one level and, like the merge, leaves no deleted term
in its pages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from ledgerfold.store._search_batches import decoded, text_rows

__all__ = ["MAX_LEVELS", "levels", "rebuild_if_deep"]

#: Levels past which the index is rebuilt: newer SQLite never goes past 64 itself; on older
#: ones (3.40 here), two levels an erasure make this a rebuild every ~128 erasing calls (a
#: rebuild costs about five `optimize` merges on the real transcripts), far below 2,000.
MAX_LEVELS = 256

#: The FTS5 structure record's row in `search_fts_data`, and the marker that a version-2
#: record carries after its 4-byte cookie.
_STRUCTURE_ROWID = 10
_STRUCTURE_V2 = b"\xff\x00\x00\x01"

#: Turns read back per query while rebuilding.
_CHUNK = 500


def levels(conn: sqlite3.Connection) -> int | None:
    """The number of levels the index's structure record names, or None when it cannot be
    read (no record yet)."""
    row = conn.execute(
        "SELECT block FROM search_fts_data WHERE id = ?", (_STRUCTURE_ROWID,)
    ).fetchone()
    if row is None or row[0] is None:
        return None
    record = bytes(row[0])
    offset = 8 if record[4:8] == _STRUCTURE_V2 else 4
    value = 0
    for byte in record[offset : offset + 9]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return None


def rebuild_if_deep(
    conn: sqlite3.Connection,
    slot_bits: int,
    insert: Callable[[sqlite3.Connection, Sequence[tuple[int, str]]], None],
) -> bool:
    """Rebuild the index (in the caller's transaction) when its structure is deeper than
    `MAX_LEVELS`; `insert` indexes `(turn pk, body)` pairs. Returns whether it did."""
    depth = levels(conn)
    if depth is None or depth <= MAX_LEVELS:
        return False
    pks = [
        int(row[0])
        for row in conn.execute(
            f"SELECT DISTINCT id >> {slot_bits} FROM search_fts_docsize ORDER BY 1"
        )
    ]
    conn.execute("INSERT INTO search_fts(search_fts) VALUES ('delete-all')")
    conn.execute("DELETE FROM search_offsets")
    for first in range(0, len(pks), _CHUNK):
        chunk = pks[first : first + _CHUNK]
        marks = ",".join("?" * len(chunk))
        query = f"SELECT pk, body FROM turns WHERE pk IN ({marks}) ORDER BY pk"
        # A body that is not UTF-8 (damaged in storage) is left out, as the build leaves it.
        bodies = [(int(pk), decoded(body)) for pk, body in text_rows(conn, query, chunk)]
        insert(conn, [(pk, body) for pk, body in bodies if body is not None])
    return True
