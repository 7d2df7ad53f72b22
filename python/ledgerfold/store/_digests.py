"""Stored turn digests checked against the bytes they describe, and repaired.

The per-call path trusts `turns.digest` (eager invalidation keeps it honest for every write
made through the library). A body changed behind the library's back (raw SQL) leaves it
wrong: the next summary would be fingerprinted from it, and an edit back to the old text
would be compared with it and stale nothing. Deep revalidation finds such rows here and the
repair recomputes their digest, marks every version citing them stale and starts a new
revision, in one transaction, as an edit does (no history row: the earlier bytes are gone).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold.store._batch_reads import (
    NotUtf8,
    lenient_rows,
    lenient_text,
    text_read_as,
    unbindable,
)
from ledgerfold.store._ledger import bump_revision, live_turn_row, mark_citing_stale
from ledgerfold.store._rows import TURN_COLUMNS, turn_from_row
from ledgerfold.store._schema import CURRENT, TURN_LIVE
from ledgerfold.store._search_stale import reindex_changed

__all__ = [
    "RowCheck",
    "WrongDigest",
    "check_row",
    "cited_rows",
    "mended_cited",
    "recomputed_digest",
    "repair",
    "row_by_key",
    "turn_pairs",
    "wrong_digests",
]

#: `(conversation_id, turn_id)` of a live turn whose stored digest is not its bytes'.
WrongDigest = tuple[str, str]

# The live turns that no verified current summary cites: a current summary whose check
# passed re-hashed its sources' bytes against the digests it was fingerprinted from, so only
# the rest needs hashing here. `?`: the table keys (JSON array) of the summaries the check
# found stale or damaged, whose sources are hashed too (by key: a damaged ID names nothing).
# Text is read as bytes so that a row that is not valid UTF-8 is counted as unreadable
# rather than failing the whole scan. Deep revalidation hashes
# most of these rows natively, run by run (`ledgerfold._revalidate_audit`); this is the
# row-by-row form, per conversation, for what that cannot decide.
# A digest not stored as a blob is wrong whatever it holds: read as NULL (text that is not
# UTF-8 would fail the read).
# A sequence or flag that is not a number is read as its bytes too (text that is not UTF-8
# would fail the read; a text or a blob is not a turn's either way).
_SEQUENCE = "CASE WHEN typeof(t.sequence) IN ('text', 'blob') THEN CAST(t.sequence AS BLOB)"
_PROTECTED = "CASE WHEN typeof(t.protected) IN ('text', 'blob') THEN CAST(t.protected AS BLOB)"
_COLUMNS = (
    f"CAST(t.id AS BLOB), {_SEQUENCE} ELSE t.sequence END, CAST(t.role AS BLOB),"
    f" CAST(t.body AS BLOB), {_PROTECTED} ELSE t.protected END,"
    " CAST(t.protection_reason AS BLOB),"
    " CAST(t.grp AS BLOB), CAST(t.meta AS BLOB),"
    " CASE WHEN typeof(t.digest) = 'blob' THEN t.digest END, t.pk FROM turns AS t"
)
# In a database whose text is stored as UTF-16, a cast to a blob gives the UTF-16 bytes (the
# digest is over UTF-8): text is read as text there (SQLite converts it to UTF-8), leniently,
# and encoded back (`_as_utf8`), so that the row has the form the cast gives in UTF-8.
_TEXT_COLUMNS = (
    "t.id, t.sequence, t.role, t.body, t.protected, t.protection_reason, t.grp, t.meta,"
    " CASE WHEN typeof(t.digest) = 'blob' THEN t.digest END, t.pk FROM turns AS t"
)
_ROW = f"SELECT t.conversation_id, {_COLUMNS}"
_TEXT_ROW = f"SELECT t.conversation_id, {_TEXT_COLUMNS}"
_NOT_VERIFIED = (
    " AND t.state = ? AND NOT EXISTS ("
    " SELECT 1 FROM conversations AS c JOIN summaries AS s ON s.pk = c.current_summary"
    " JOIN summary_sources AS ss ON ss.summary_pk = s.pk"
    f" WHERE c.id = t.conversation_id AND s.status = '{CURRENT}' AND ss.turn_id = t.id"
    " AND s.pk NOT IN (SELECT value FROM json_each(?)))"
)
_UNVERIFIED = f"{_ROW} WHERE t.conversation_id = ?{_NOT_VERIFIED}"
# The same, for a conversation key stored as text that is not UTF-8 (`NotUtf8`): bound as
# its bytes made text again, and not read back (Python cannot decode it).
_UNVERIFIED_NOT_UTF8 = (
    f"SELECT NULL, {_COLUMNS} WHERE t.conversation_id = CAST(? AS TEXT){_NOT_VERIFIED}"
)
_BY_KEY = f"{_ROW} WHERE t.pk = ?"
_CITED_WHERE = (
    " WHERE t.conversation_id = ? AND t.state = ?"
    " AND t.id IN (SELECT turn_id FROM summary_sources WHERE summary_pk = ?)"
)
_CITED = f"{_ROW}{_CITED_WHERE}"
# Each read in its form for a database whose text is not stored as UTF-8, by its UTF-8 form.
_READS = {
    _UNVERIFIED: f"{_TEXT_ROW} WHERE t.conversation_id = ?{_NOT_VERIFIED}",
    # The key's bytes are SQLite's UTF-8 of a stored UTF-16 text that is not valid (made
    # text again they would be read as UTF-16): every text key is read, and matched here.
    _UNVERIFIED_NOT_UTF8: (f"{_TEXT_ROW} WHERE typeof(t.conversation_id) = 'text'{_NOT_VERIFIED}"),
    _BY_KEY: f"{_TEXT_ROW} WHERE t.pk = ?",
    _CITED: f"{_TEXT_ROW}{_CITED_WHERE}",
}


def _utf8_bytes(value: object) -> object:
    """A text field read as text (`NotUtf8` when SQLite's UTF-8 of it is not UTF-8) as the
    bytes a cast to a blob gives in a UTF-8 database; a blob, a number, NULL as they are."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, NotUtf8):
        return value.raw
    return value


def _as_utf8(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row of `_TEXT_ROW` in the form of `_ROW` (the conversation key as read)."""
    return (row[0], *map(_utf8_bytes, row[1:9]), *row[9:])


def _text_rows(
    conn: sqlite3.Connection, query: str, parameters: tuple[object, ...]
) -> list[tuple[Any, ...]]:
    """The rows of one of `_READS`' UTF-8 queries in its form, read in a database whose text
    is not stored as UTF-8."""
    with text_read_as(conn, lenient_text):
        rows = conn.execute(_READS[query], parameters).fetchall()
    return [_as_utf8(row) for row in rows]


def _text(value: object) -> object:
    """A text column read as bytes, decoded (UTF-8, strict); anything else as it is."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def recomputed_digest(row: tuple[Any, ...]) -> bytes | None:
    """The digest of a row of `TURN_COLUMNS` recomputed from its fields, or None when the
    row is damaged (it cannot be read back as a turn at all)."""
    try:
        return turn_from_row(tuple(_text(value) for value in row)).digest
    except (StoreError, InvalidInput, UnicodeDecodeError):
        return None


#: What the row check finds of one row: `(pk, key, n)`, `key` None for a row whose digest
#: matches its bytes, `(conversation_id, turn_id)` for one that does not or that cannot be
#: hashed; `n` is the body's length in bytes, `-n - 1` for a damaged row that cannot be
#: hashed (its turn ID's bytes that are not UTF-8 replaced: it is named, never its body).
RowCheck = tuple[int, "WrongDigest | None", int]


def check_row(row: tuple[Any, ...]) -> RowCheck:
    """One row of `_ROW` checked against its stored digest."""
    size = len(row[4]) if isinstance(row[4], bytes) else 0
    digest = recomputed_digest(row[1:9])
    if digest is None:
        turn_id = row[1].decode(errors="replace") if isinstance(row[1], bytes) else str(row[1])
        return row[10], (row[0], turn_id), -size - 1
    if isinstance(row[9], bytes) and digest == row[9]:
        return row[10], None, size
    return row[10], (row[0], str(_text(row[1]))), size


def wrong_digests(
    conn: sqlite3.Connection,
    conversation_id: object,
    stale_summary_pks: Iterable[int],
    *,
    utf8: bool = True,
) -> Iterator[RowCheck]:
    """Hash every live turn of the conversation not verified by its current summary (inside
    the caller's snapshot), one `check_row` each. A conversation key that is `NotUtf8`
    (damage) is found by its bytes, and reported as that key. `utf8`: the database stores
    text as UTF-8 (`_batch_reads.is_utf8`)."""
    stale = json.dumps(sorted(stale_summary_pks))
    if isinstance(conversation_id, NotUtf8):
        rows = (
            conn.execute(_UNVERIFIED_NOT_UTF8, (conversation_id.raw, TURN_LIVE, stale))
            if utf8
            else [
                row
                for row in _text_rows(conn, _UNVERIFIED_NOT_UTF8, (TURN_LIVE, stale))
                if row[0] == conversation_id
            ]
        )
        for row in rows:
            yield check_row((conversation_id, *row[1:]))
        return
    if not utf8 and isinstance(conversation_id, str) and unbindable(conversation_id):
        # Bound, it would be another key: every text key is read, and matched here.
        for row in _text_rows(conn, _UNVERIFIED_NOT_UTF8, (TURN_LIVE, stale)):
            if row[0] == conversation_id:
                yield check_row(row)
        return
    if not utf8:
        for row in _text_rows(conn, _UNVERIFIED, (conversation_id, TURN_LIVE, stale)):
            yield check_row(row)
        return
    for row in conn.execute(_UNVERIFIED, (conversation_id, TURN_LIVE, stale)):
        yield check_row(row)


def row_by_key(conn: sqlite3.Connection, pk: int, *, utf8: bool = True) -> tuple[Any, ...] | None:
    """The `_ROW` of the turn with table key `pk`."""
    if not utf8:
        return next(iter(_text_rows(conn, _BY_KEY, (pk,))), None)
    row: tuple[Any, ...] | None = conn.execute(_BY_KEY, (pk,)).fetchone()
    return row


def cited_rows(
    conn: sqlite3.Connection, conversation_id: str, summary_pk: int, *, utf8: bool = True
) -> list[tuple[Any, ...]]:
    """The `_ROW`s of the conversation's live turns the summary cites."""
    parameters = (conversation_id, TURN_LIVE, summary_pk)
    if not utf8:
        return _text_rows(conn, _CITED, parameters)
    return conn.execute(_CITED, parameters).fetchall()


def mended_cited(
    conn: sqlite3.Connection, conversation_id: str, summary_pk: int
) -> dict[str, bytes]:
    """The live turns the summary cites whose stored digest is not the one its source index
    recorded although their bytes still give that one (the stored digest alone was changed
    behind the library's back), by turn ID: their digest recomputed. The store's checks
    trust stored digests, so such a summary reads `source-modified` there; what does harm
    with that (a purge erasing the summary it should seal) asks here first. Only the turns
    whose two digests disagree are read and hashed: none for a sound ledger."""
    rows = lenient_rows(
        conn,
        f"SELECT {', '.join(f't.{c.strip()}' for c in TURN_COLUMNS.split(','))},"
        " ss.turn_digest FROM summary_sources ss JOIN turns t"
        " ON t.conversation_id = ? AND t.id = ss.turn_id"
        " WHERE ss.summary_pk = ? AND t.state = ? AND t.digest IS NOT ss.turn_digest",
        (conversation_id, summary_pk, TURN_LIVE),
    )
    mended: dict[str, bytes] = {}
    for row in rows:
        digest = recomputed_digest(tuple(row[:-1]))
        if digest is not None and digest == row[-1] and isinstance(row[0], str):
            mended[row[0]] = digest
    return mended


def turn_pairs(turns: object) -> list[tuple[str, str]]:
    """`repair_digests`'s argument: an iterable of `(conversation_id, turn_id)` pairs (as
    revalidation found them: any non-empty conversation ID)."""
    if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Iterable):
        raise InvalidInput("turns: must be an iterable", field="turns", problem="wrong-type")
    items: list[tuple[str, str]] = []
    for index, pair in enumerate(turns):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InvalidInput(
                f"turns[{index}]: must be a (conversation_id, turn_id) tuple",
                field=f"turns[{index}]",
                problem="wrong-type",
            )
        items.append(
            (
                _validate.text("conversation_id", pair[0], blank_ok=True, empty_ok=False),
                _validate.identifier("turn_id", pair[1]),
            )
        )
    return items


def repair(
    conn: sqlite3.Connection, turns: Iterable[WrongDigest]
) -> list[tuple[str, str, list[str]]]:
    """Recompute the digest of each `(conversation_id, turn_id)` still live and still wrong
    (a write since the scan may have fixed it), inside the caller's write transaction: the
    versions citing it go stale (`source-modified`), but for those whose source index
    recorded the recomputed digest (their summary was made from these very bytes: only the
    stored digest was wrong), and its conversation gets a new revision. Returns
    `(conversation_id, turn_id, IDs of the versions marked stale)` per repaired turn."""
    repaired: list[tuple[str, str, list[str]]] = []
    bumped: set[str] = set()
    changed: list[int] = []
    for conversation_id, turn_id in turns:
        row = live_turn_row(conn, conversation_id, turn_id)
        if row is None:
            continue
        digest = recomputed_digest(tuple(row[1:-1]))
        if digest is None or (isinstance(row[-1], bytes) and digest == row[-1]):
            continue
        conn.execute("UPDATE turns SET digest = ? WHERE pk = ?", (digest, row[0]))
        changed.append(int(row[0]))
        stale = mark_citing_stale(
            conn, conversation_id, "?", (turn_id,), "source-modified", unless_digest=digest
        )
        if conversation_id not in bumped:
            bump_revision(conn, conversation_id)
            bumped.add(conversation_id)
        repaired.append((conversation_id, turn_id, stale))
    # The index holds the bytes before the change: it follows the ledger (SPEC §16.1).
    reindex_changed(conn, changed)
    return repaired
