"""Ledger reads and writes inside one transaction: turns, revisions, purge boundaries, and
the eager staleness of the summaries that cite a changed turn (SPEC §9); edits and
retractions are `_turn_changes`'s, a unit split by tool-call links is `unit_splits`'s.

Every function takes an open connection inside the caller's transaction and validated
arguments; `SQLiteStore` owns the transactions, validation and logging.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ledgerfold._context import HistoryBoundary, TurnItem
from ledgerfold._errors import DuplicateId, InvalidInput
from ledgerfold._model import Conversation, Turn
from ledgerfold._toolcalls import check_meta
from ledgerfold.store import _call_pairs as call_pairs
from ledgerfold.store import _search_index as search_index
from ledgerfold.store import _unit_splits as unit_splits
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._database import now
from ledgerfold.store._rows import (
    ITEM_COLUMNS,
    TURN_COLUMNS,
    damaged_turn,
    item_from_row,
    turn_from_row,
    turn_values,
)
from ledgerfold.store._schema import LIVE_ACCEPTED, STALE, TURN_LIVE
from ledgerfold.store._sqlite_errors import damaged_row

__all__ = [
    "boundary",
    "bump_revision",
    "check_storable",
    "checkable",
    "conversation_row",
    "field_of",
    "get_turns",
    "insert_turns",
    "known_ids",
    "live_turn_row",
    "load",
    "mappings",
    "mark_citing_stale",
    "noncharacter_field",
    "raw_items",
    "turns_at",
]

#: IDs per `IN (...)` list: under SQLite's host-parameter limit.
_CHUNK = 500


def conversation_row(conn: sqlite3.Connection, conversation_id: str) -> tuple[Any, ...] | None:
    row = conn.execute(
        "SELECT revision, current_summary FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    return None if row is None else tuple(row)


def load(conn: sqlite3.Connection, conversation_id: str) -> Conversation:
    """The live ledger of a conversation (empty at revision 0 when unknown), built in one
    native call from the stored rows with their stored digests: no body is re-hashed (eager
    invalidation keeps them honest; batch revalidation re-hashes)."""
    row = conversation_row(conn, conversation_id)
    if row is None:
        return Conversation(conversation_id, 0, ())
    # Text that is not UTF-8 (another tool's write) is read as `NotUtf8`, which makes no
    # turn: the row is named below, as any other damaged one, not the whole read failed.
    rows = lenient_rows(
        conn,
        f"SELECT {TURN_COLUMNS}, digest FROM turns"
        " WHERE conversation_id = ? AND state = ? ORDER BY sequence",
        (conversation_id, TURN_LIVE),
    )
    try:
        return Conversation._from_rows(conversation_id, row[0], rows)
    except InvalidInput as err:
        # Stored rows are valid when written: one that is not was damaged in storage.
        index, column = _refused_row(err, rows, conversation_id), str(err.field)
        column = {"group": "grp", "meta_json": "meta"}.get(column, column)
        raise damaged_turn(column, rows[index][0], rows[index][1]) from None


def _refused_row(err: InvalidInput, rows: list[Any], conversation_id: str) -> int:
    """The index of the stored row `Conversation._from_rows` refused (its error reads
    'rows[i].<field>: ...'); the damaged-row `StoreError` of the conversation's row when it
    refused its stored revision (not a count, another tool's write); `err` itself when it
    names neither."""
    if str(err.field) == "revision":
        raise damaged_row(
            f"damaged row in table conversations, column revision: conversation"
            f" {conversation_id!r}; the database was changed outside ledgerfold"
        ) from None
    found = re.match(r"rows\[(\d+)\]\.", str(err))
    if found is None or int(found.group(1)) >= len(rows):
        raise err
    return int(found.group(1))


#: The digest a damaged row stands in with in `checkable`: it matches no turn's.
_UNMATCHED = bytes(32)


def checkable(
    conn: sqlite3.Connection, conversation_id: str, digests: Mapping[str, bytes] | None = None
) -> Conversation:
    """The live ledger as a summary check reads it (IDs, sequences, roles, flags, groups,
    meta and stored digests), without the bodies, which it does not read: a turn's body is
    blank and its stored digest kept (for a turn ID in `digests`, that digest instead). A
    row damaged in storage does not stop the check (an erasure or a purge must get past it,
    SPEC §15.5): one whose ID or sequence cannot be read is left out (a summary citing it
    finds it missing), any other stands in with only its ID and sequence and a digest that
    matches nothing (a summary citing it finds it modified, as revalidation does; one that
    does not cite it is not held up by it)."""
    row = conversation_row(conn, conversation_id)
    if row is None:
        return Conversation(conversation_id, 0, ())
    rows = lenient_rows(
        conn,
        "SELECT id, sequence, role, '', protected, protection_reason, grp, meta, digest"
        " FROM turns WHERE conversation_id = ? AND state = ? ORDER BY sequence",
        (conversation_id, TURN_LIVE),
    )
    if digests:
        rows = [(*row[:8], digests.get(row[0], row[8])) for row in rows]
    while True:
        try:
            return Conversation._from_rows(conversation_id, row[0], rows)
        except InvalidInput as err:
            index = _refused_row(err, rows, conversation_id)
            if str(err.field) in ("id", "sequence") or rows[index][2:] == _STAND_IN:
                del rows[index]
            else:
                rows[index] = (*rows[index][:2], *_STAND_IN)


#: The columns after ID and sequence of a damaged row's stand-in in `checkable`.
_STAND_IN = ("user", "", 0, None, None, None, _UNMATCHED)


def raw_items(conn: sqlite3.Connection, conversation_id: str) -> tuple[TurnItem, ...]:
    """Every live turn as a context item, in sequence order (no `Turn` is built)."""
    return item_rows(
        conn,
        f"SELECT {ITEM_COLUMNS} FROM turns"
        " WHERE conversation_id = ? AND state = ? ORDER BY sequence",
        (conversation_id, TURN_LIVE),
    )


def item_rows(
    conn: sqlite3.Connection, query: str, parameters: Sequence[object]
) -> tuple[TurnItem, ...]:
    """The context items of `query`'s rows (of `ITEM_COLUMNS`). Text that is not UTF-8
    (another tool's write) is read as `NotUtf8`, so the damaged row is named (turn ID,
    sequence, column) as `load()` names it, rather than the read failing unnamed."""
    return tuple(item_from_row(row) for row in lenient_rows(conn, query, parameters))


def get_turns(
    conn: sqlite3.Connection, conversation_id: str, turn_ids: Sequence[str]
) -> list[Turn]:
    """The live turns with these IDs, in sequence order (missing IDs are left out)."""
    return _live_turns(conn, conversation_id, "id", turn_ids)


def known_ids(conn: sqlite3.Connection, conversation_id: str, ids: Sequence[str]) -> set[str]:
    """The IDs among `ids` of turns ever written to the conversation (any state)."""
    # A JSON array parameter rather than `IN (?, ...)`: no host-parameter limit.
    rows = conn.execute(
        "SELECT t.id FROM json_each(?) AS j CROSS JOIN turns AS t"
        " ON t.conversation_id = ? AND t.id = j.value",
        (json.dumps(list(ids)), conversation_id),
    ).fetchall()
    return {row[0] for row in rows}


def turns_at(
    conn: sqlite3.Connection, conversation_id: str, sequences: Sequence[int]
) -> list[Turn]:
    """The live turns at these sequences, in sequence order (missing ones left out)."""
    # Only sequences SQLite can hold: a larger cited number names no turn.
    wanted = [sequence for sequence in sequences if -(2**63) <= sequence < 2**63]
    return _live_turns(conn, conversation_id, "sequence", wanted)


def _live_turns(
    conn: sqlite3.Connection, conversation_id: str, column: str, values: Sequence[object]
) -> list[Turn]:
    """The live turns whose `column` (`id` or `sequence`) is among `values`, in sequence
    order, read in chunks under SQLite's host-parameter limit."""
    turns: list[Turn] = []
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        turns.extend(
            turn_from_row(row)
            for row in conn.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE conversation_id = ? AND state = ?"
                f" AND {column} IN ({marks})",
                (conversation_id, TURN_LIVE, *chunk),
            )
        )
    turns.sort(key=lambda turn: turn.sequence)
    return turns


def insert_turns(
    conn: sqlite3.Connection,
    conversation_id: str,
    prepared: list[tuple[str, Mapping[str, Any]]],
    field_prefix: str,
) -> tuple[list[Turn], int, list[str]]:
    """Append `(turn_id, spec)` pairs at the next sequences; returns the turns, the new
    revision and the IDs of the summaries the new turns made stale (a group split). Values
    the `Turn` constructor refuses raise `InvalidInput` named by index."""
    row = conn.execute(
        "SELECT revision, last_sequence FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    revision, last_sequence = row if row is not None else (0, 0)
    turns: list[Turn] = []
    previous = last_sequence  # the highest sequence ever written, retracted turns included
    for index, (turn_id, spec) in enumerate(prepared):
        if "sequence" in spec:
            previous = _sequence_of(spec, previous, field_of(field_prefix, index, "sequence"))
        else:
            previous += 1
        try:
            turn = Turn(
                turn_id,
                previous,
                spec.get("role"),  # type: ignore[arg-type]  # validated by Turn
                spec.get("body"),  # type: ignore[arg-type]
                protected=spec.get("protected", False),
                protection_reason=spec.get("protection_reason"),
                group=spec.get("group"),
                meta=spec.get("meta"),
            )
        except InvalidInput as err:
            if not field_prefix:
                raise
            prefix = field_of(field_prefix, index, "")
            raise InvalidInput(
                f"{prefix}{err}", field=f"{prefix}{err.field}", problem=err.problem
            ) from None
        # The turn's own copy of its meta, which is what is stored: a mapping read again may
        # not give what a check of it read. (`check_meta` passes a turn without meta.)
        if turn.meta:
            check_meta(turn.meta, field_of(field_prefix, index, "meta"))
        turns.append(turn)
    check_storable(conn, noncharacter_field(conversation_id, turns, field_prefix))
    if len(turns) > _ONE_INSERT:
        _refuse_existing(conn, conversation_id, turns)
    written_at = now()
    if row is None:
        conn.execute(
            "INSERT INTO conversations (id, revision, last_sequence) VALUES (?, 0, 0)",
            (conversation_id,),
        )
    rows = [(*turn_values(conversation_id, turn), written_at) for turn in turns]
    if len(turns) > _ONE_INSERT:
        conn.executemany(f"{_INSERT_TURNS} {_ROW_MARKS}", rows)
    else:
        failed: sqlite3.IntegrityError | None = None
        try:
            conn.execute(_insert_sql(len(rows)), [value for row in rows for value in row])
        except sqlite3.IntegrityError as err:
            failed = err
        if failed is not None:
            # One statement: its failure left no row of it. An ID the conversation has
            # (the UNIQUE constraint) is looked up only now, named as it always was.
            _refuse_existing(conn, conversation_id, turns)
            raise failed
    conn.execute(
        "UPDATE conversations SET revision = ?, last_sequence = ? WHERE id = ?",
        (revision + 1, turns[-1].sequence, conversation_id),
    )
    # Results stored before their call, which a call among these turns now answers.
    answered = call_pairs.results_before(conn, conversation_id, turns)
    stale = unit_splits.mark_group_split(conn, conversation_id, turns, answered=answered)
    search_index.index_turns(conn, conversation_id, turns, answered)
    return turns, revision + 1, stale


def _has_noncharacter(value: object) -> bool:
    return isinstance(value, str) and ("\ufffe" in value or "\uffff" in value)


def noncharacter_field(
    conversation_id: str, turns: Sequence[Turn], field_prefix: str = ""
) -> str | None:
    """The first field holding U+FFFE or U+FFFF among the conversation ID and the turns'
    text (named as `insert_turns` names fields), or None."""
    if _has_noncharacter(conversation_id):
        return "conversation_id"
    if not any(map(_has_noncharacter, _turn_texts(turns))):  # the usual: none anywhere
        return None
    for index, turn in enumerate(turns):
        for field, value in (
            ("id", turn.id),
            ("role", turn.role),
            ("body", turn.body),
            ("protection_reason", turn.protection_reason),
            ("group", turn.group),
        ):
            if _has_noncharacter(value):
                return field_of(field_prefix, index, field)
        if turn.meta and any(
            _has_noncharacter(key) or _has_noncharacter(value) for key, value in turn.meta.items()
        ):
            return field_of(field_prefix, index, "meta")
    return None


def _turn_texts(turns: Sequence[Turn]) -> Iterator[str]:
    """Every text of the turns `noncharacter_field` looks at, as one run (searched in C)."""
    for turn in turns:
        meta = turn.meta
        yield "\x00".join(
            [
                turn.id,
                turn.role,
                turn.body,
                turn.protection_reason or "",
                turn.group or "",
                *(meta.keys() if meta else ()),
                *(meta.values() if meta else ()),
            ]
        )


def field_of(field_prefix: str, index: int, name: str) -> str:
    """Field `name` of spec `index` as the appends name it: `{field_prefix}[i].name`, or
    `name` alone without a prefix (`append`'s one turn). Built only when it is used."""
    return f"{field_prefix}[{index}].{name}" if field_prefix else name


def check_storable(conn: sqlite3.Connection, field: str | None) -> None:
    """Refuse (`InvalidInput`) text that a UTF-16 database would store as another text
    (`field`, from `_noncharacter_field`): U+FFFE or U+FFFF becomes U+FFFD there, so a body
    would differ from its digest and two IDs could become one. The encoding is asked only
    when such a character is there."""
    if field is None or conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-8":
        return
    raise InvalidInput(
        f"{field}: U+FFFE and U+FFFF cannot be stored in this database (its text is"
        " UTF-16, where SQLite stores them as U+FFFD)",
        field=field,
        problem="not-allowed",
    )


def _sequence_of(spec: Mapping[str, Any], previous: int, field: str) -> int:
    """A spec's explicit `sequence` (SPEC §15.6, §15.8: above every sequence written before,
    gaps kept), else the next one."""
    if "sequence" not in spec:
        return previous + 1
    sequence = spec["sequence"]
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        raise InvalidInput(
            f"{field}: must be int, got {type(sequence).__name__}",
            field=field,
            problem="wrong-type",
        )
    if sequence <= previous:
        raise InvalidInput(
            f"{field}: {sequence} must exceed {previous}, the highest sequence written before",
            field=field,
            problem="out-of-range",
        )
    return sequence


#: Turns written by one multi-row INSERT (11 values a row: under SQLite's oldest default
#: host-parameter limit, 999); more are checked for existing IDs first, then inserted.
_ONE_INSERT = 90
_INSERT_TURNS = (
    "INSERT INTO turns (conversation_id, id, sequence, role, body, protected,"
    " protection_reason, grp, meta, digest, created_at) VALUES"
)
_ROW_MARKS = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


@functools.lru_cache(maxsize=_ONE_INSERT)
def _insert_sql(rows: int) -> str:
    return f"{_INSERT_TURNS} {', '.join([_ROW_MARKS] * rows)}"


def _refuse_existing(conn: sqlite3.Connection, conversation_id: str, turns: list[Turn]) -> None:
    """`DuplicateId` for the first of the turns' IDs the conversation already has, if any."""
    clash = _first_existing_id(conn, conversation_id, [t.id for t in turns])
    if clash is not None:
        raise DuplicateId(f"id: turn id {clash!r} already exists", id=clash)


def _first_existing_id(
    conn: sqlite3.Connection, conversation_id: str, turn_ids: list[str]
) -> str | None:
    for start in range(0, len(turn_ids), _CHUNK):
        chunk = turn_ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        row = conn.execute(
            f"SELECT id FROM turns WHERE conversation_id = ? AND id IN ({marks}) LIMIT 1",
            (conversation_id, *chunk),
        ).fetchone()
        if row is not None:
            return str(row[0])
    return None


def live_turn_row(
    conn: sqlite3.Connection, conversation_id: str, turn_id: str
) -> tuple[Any, ...] | None:
    """`(pk, <turn columns>, digest)` of the live turn, or None."""
    row = conn.execute(
        f"SELECT pk, {TURN_COLUMNS}, digest FROM turns"
        " WHERE conversation_id = ? AND id = ? AND state = ?",
        (conversation_id, turn_id, TURN_LIVE),
    ).fetchone()
    return None if row is None else tuple(row)


def bump_revision(conn: sqlite3.Connection, conversation_id: str) -> int:
    conn.execute(
        "UPDATE conversations SET revision = revision + 1 WHERE id = ?", (conversation_id,)
    )
    revision: int = conn.execute(
        "SELECT revision FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()[0]
    return revision


def mark_citing_stale(
    conn: sqlite3.Connection,
    conversation_id: str,
    turn_ids_sql: str,
    params: tuple[Any, ...],
    reason: str,
    *,
    unless_digest: bytes | None = None,
) -> list[str]:
    """Mark the accepted versions citing any of the selected turn IDs stale; returns the IDs
    of those that went stale (not those already stale). A later `source-missing` overrides
    an earlier `source-modified`, the order `check_summary` reports them in, so the stored
    reason is what a full check would say. With `unless_digest`, a version whose source
    index records that digest for the turn cites it faithfully and is left alone."""
    faithful = ""
    if unless_digest is not None:
        faithful = " AND turn_digest IS NOT ?"
        params = (*params, unless_digest)
    citing = (
        "pk IN (SELECT summary_pk FROM summary_sources"
        f" WHERE turn_id IN ({turn_ids_sql}){faithful})"
    )
    if reason == "source-missing":
        conn.execute(
            f"UPDATE summaries SET reason = ? WHERE conversation_id = ? AND status = '{STALE}'"
            f" AND reason != 'source-missing' AND {citing}",
            (reason, conversation_id, *params),
        )
    rows = conn.execute(
        f"UPDATE summaries SET status = '{STALE}', reason = ? WHERE conversation_id = ?"
        f" AND status IN {LIVE_ACCEPTED} AND {citing} RETURNING id",
        (reason, conversation_id, *params),
    ).fetchall()
    return [str(row[0]) for row in rows]


def boundary(conn: sqlite3.Connection, conversation_id: str) -> HistoryBoundary | None:
    row = conn.execute(
        "SELECT through_sequence, reason, purged_at FROM history_boundaries"
        # The furthest boundary: a later, smaller purge does not bring history back.
        " WHERE conversation_id = ? ORDER BY through_sequence DESC, pk DESC LIMIT 1",
        (conversation_id,),
    ).fetchone()
    return None if row is None else HistoryBoundary(row[0], row[1], row[2])


def mappings(
    name: str, items: object, allowed: frozenset[str] | set[str]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """`(field, mapping)` for each item of an iterable of mappings with only `allowed` keys;
    anything else is `InvalidInput` naming `name[index]`."""
    # `type(...) is list` / `dict`: the ABC checks' answer known without asking them.
    if type(items) is not list and (
        isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable)
    ):
        raise InvalidInput(
            f"{name}: must be an iterable of mappings", field=name, problem="wrong-type"
        )
    for index, item in enumerate(items):
        field = f"{name}[{index}]"
        if type(item) is not dict and not isinstance(item, Mapping):
            raise InvalidInput(
                f"{field}: must be a mapping, got {type(item).__name__}",
                field=field,
                problem="wrong-type",
            )
        for key in item:
            if key not in allowed:  # the keys named only then
                unknown = sorted(str(key) for key in item if key not in allowed)
                raise InvalidInput(
                    f"{field}: unknown keys {unknown}", field=field, problem="not-allowed"
                )
        yield field, item
