"""The nearest call of an ID before or after a sequence (SPEC §17.2), through the calls
indexes: `turns_by_call` keys a turn making one call by its ID, `turns_by_call_at_k` a turn
making several by its call at position k (up to `_schema.INDEXED_CALLS`), so finding a
call's maker is one probe of each, whatever the ledger holds; only the rare turns making
more calls than that are walked (`turns_by_many_calls`), and only between the probes'
nearest find and the sequence asked about."""

from __future__ import annotations

import json
import sqlite3
from contextlib import suppress

from ledgerfold.store._schema import (
    CALL_AT,
    CALL_KEY,
    CALLS_ARE,
    CALLS_BEYOND,
    INDEXED_CALLS,
    TURN_LIVE,
)

__all__ = ["nearest_call", "stored_form"]

#: The call's JSON, of a turn making one call.
_CALL_AT_0 = "json_extract(json_extract(meta, '$.tool_calls'), '$[0]')"

#: (key, condition, the call's JSON) of each probe of a turn making several calls, by the
#: call at each position (the key and condition repeat the index's, so SQLite uses it).
_PROBES = tuple(
    (CALL_AT[k], CALLS_BEYOND[k], f"json_extract(json_extract(meta, '$.tool_calls'), '$[{k}]')", k)
    for k in range(INDEXED_CALLS)
)


def nearest_call(
    conn: sqlite3.Connection,
    conversation_id: str,
    call_id: str,
    sequence: int,
    *,
    before: bool,
    states: tuple[int, ...] = (TURN_LIVE,),
    above: int | None = None,
) -> tuple[int, str] | None:
    """`(sequence, call JSON)` of the call of this ID, among turns in `states`, nearest before
    (or after) `sequence`. `above` (with `before`): only a call after that sequence counts.
    A turn naming the ID twice gives its first call of it.

    Cost: a probe of `turns_by_call` for the nearest turn making this one call, then a read
    of the nearest `_NEAR` turns making several between it and `sequence` (key NULL there);
    only past them, a probe of each index by position (`_PROBES`) and a walk of the turns
    making more than `INDEXED_CALLS` calls between the nearest find and `sequence` (a row
    not holding the ID's text is passed over before its JSON is parsed). The SQL's text
    does not change with the call, so its prepared statements are reused. Without the
    indexes by position (a file opened read-only since a ledgerfold before them wrote it)
    the turns making several calls are walked, as then."""
    order = "DESC" if before else ""
    states_sql = ", ".join(map(str, states))
    low, high = (_NO_LOW if above is None else above, sequence) if before else (sequence, _NO_HIGH)
    if not _indexed(conn):
        return _unindexed(conn, conversation_id, call_id, states_sql, order, low, high)
    found = conn.execute(
        _probe(CALL_KEY, CALLS_ARE, _CALL_AT_0, 0, states_sql, order),
        (conversation_id, call_id, low, high),
    ).fetchone()
    if found is not None:
        low, high = (int(found[0]), high) if before else (low, int(found[0]))
    # The nearest few turns making several calls, read: the call is usually among them (a
    # result's call was just made); when they are all there are, nothing else is asked.
    near = conn.execute(
        f"SELECT t.sequence, (SELECT c.value FROM json_each(json_extract(t.meta, '$.tool_calls'))"
        " AS c WHERE json_extract(c.value, '$.id') = ? LIMIT 1) FROM (SELECT sequence, meta"
        f" FROM turns WHERE conversation_id = ? AND {CALLS_ARE} AND {CALL_KEY} IS NULL"
        f" AND state IN ({states_sql}) AND sequence > ? AND sequence < ?"
        f" ORDER BY sequence {order} LIMIT {_NEAR}) AS t",
        (call_id, conversation_id, low, high),
    )
    read = 0
    for row in near:  # each row's calls are parsed as it is stepped to: stop at the call
        if row[1] is not None:
            near.close()
            return int(row[0]), str(row[1])
        read, last = read + 1, int(row[0])
    if read < _NEAR:
        return None if found is None else (int(found[0]), str(found[1]))
    # Past them, the indexes by position.
    low, high = (low, last) if before else (last, high)
    probes = " UNION ALL ".join(
        f"SELECT * FROM ({_probe(key, condition, value, position, states_sql, order)})"
        for key, condition, value, position in _PROBES
    )
    rows = conn.execute(probes, (conversation_id, call_id, low, high) * len(_PROBES)).fetchall()
    if rows:
        # The nearest turn; in it, the first position (a probe's number is its position).
        found = min(rows, key=lambda row: (-row[0] if before else row[0], row[2]))
        low, high = (int(found[0]), high) if before else (low, int(found[0]))
    many = conn.execute(
        _walk(CALLS_BEYOND[INDEXED_CALLS], states_sql, order),
        (conversation_id, stored_form(call_id), call_id, low, high),
    ).fetchone()
    if many is not None:
        return int(many[0]), str(many[1])
    return None if found is None else (int(found[0]), str(found[1]))


#: How many of the nearest turns making several calls are read before the indexes by
#: position are asked.
_NEAR = 4

#: Below and above every sequence: the bounds of a side left open.
_NO_LOW = -(2**63)
_NO_HIGH = 2**63 - 1


def _probe(key: str, condition: str, value: str, position: int, states_sql: str, order: str) -> str:
    """SQL: the nearest turn meeting `condition` whose `key` is the call ID, strictly between
    two sequences; its sequence, the call's JSON (`value`) and `position`. Parameters:
    conversation, call ID, the bounds."""
    return (
        f"SELECT sequence, {value}, {position} FROM turns WHERE conversation_id = ?"
        f" AND {condition} AND {key} = ? AND state IN ({states_sql})"
        f" AND sequence > ? AND sequence < ? ORDER BY sequence {order} LIMIT 1"
    )


#: The names of the indexes `nearest_call` probes and walks (`_schema.CALLS_INDEX`,
#: `calls_at_index`, `MANY_CALLS_INDEX`).
_INDEXES = (
    "turns_by_call",
    *(f"turns_by_call_at_{k}" for k in range(INDEXED_CALLS)),
    "turns_by_many_calls",
)


def _indexed(conn: sqlite3.Connection) -> bool:
    """Whether the file has the indexes by position (every writing open makes them), read
    once per store connection: without them each probe would read the conversation."""
    known: bool | None = getattr(conn, "calls_indexed", None)
    if known is None:
        marks = ", ".join("?" * len(_INDEXES))
        (count,) = conn.execute(
            f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN ({marks})",
            _INDEXES,
        ).fetchone()
        known = count == len(_INDEXES)
        with suppress(AttributeError):  # the store's `_search_index.IndexConnection` keeps it
            setattr(conn, "calls_indexed", known)  # noqa: B010
    return known


def _walk(condition: str, states_sql: str, order: str) -> str:
    """SQL: the nearest call of the ID among the turns meeting `condition` strictly between
    two sequences, each read and its calls parsed (a row not holding the ID's text is passed
    over first). Parameters: conversation, (those of `condition`), `stored_form(call_id)`,
    call ID, the bounds."""
    return (
        "SELECT turns.sequence, c.value FROM turns,"
        " json_each(json_extract(turns.meta, '$.tool_calls')) AS c"
        f" WHERE conversation_id = ? AND {condition} AND state IN ({states_sql})"
        " AND (instr(meta, ?) > 0 OR instr(meta, '\\u') > 0)"
        " AND json_extract(c.value, '$.id') = ? AND turns.sequence > ? AND turns.sequence < ?"
        f" ORDER BY turns.sequence {order} LIMIT 1"
    )


def _unindexed(
    conn: sqlite3.Connection,
    conversation_id: str,
    call_id: str,
    states_sql: str,
    order: str,
    low: int,
    high: int,
) -> tuple[int, str] | None:
    """`nearest_call` in a file without the indexes by position (opened read-only since a
    ledgerfold before them wrote it): the probe of `turns_by_call` for the turn making this
    one call, then the walk of every turn making several down to it."""
    text = stored_form(call_id)
    single = _walk(f"{CALLS_ARE} AND {CALL_KEY} = ?", states_sql, order)
    row = conn.execute(single, (conversation_id, call_id, text, call_id, low, high)).fetchone()
    if row is not None:
        low, high = (int(row[0]), high) if order else (low, int(row[0]))
    several = _walk(f"{CALLS_ARE} AND {CALL_KEY} IS NULL", states_sql, order)
    found = conn.execute(several, (conversation_id, text, call_id, low, high)).fetchone() or row
    return None if found is None else (int(found[0]), str(found[1]))


def stored_form(call_id: str) -> str:
    """Text every stored meta naming this call ID holds unless it holds a `\\u` escape (the
    ID is a `tool_call_id` value or inside `tool_calls`' JSON text, which a writer may
    escape): the ID itself when JSON needs no escape for any of its characters (then only
    `\\u` can spell them otherwise), else "" (which any text holds)."""
    escaped = json.dumps(call_id, ensure_ascii=False)[1:-1]
    return call_id if escaped == call_id and "/" not in call_id else ""
