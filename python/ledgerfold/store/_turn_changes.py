"""Edits and retractions of stored turns inside the caller's transaction (SPEC §9, §17.2):
the new revision, the summaries citing the turn marked stale, and what the change does to
tool-call pairs — a call's paired results retracted with it, results re-paired when an
edit takes calls away or adds them, and their search-index status decided again.

Every function takes an open connection inside the caller's transaction and validated
arguments; `SQLiteStore` owns the transactions, validation and logging.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from typing import Any

from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import RECALL_TOOL_NAME, call_name, tool_calls_of
from ledgerfold._toolcalls import check_meta, tool_call_ids
from ledgerfold.store import _call_pairs as call_pairs
from ledgerfold.store import _search_index as search_index
from ledgerfold.store import _unit_splits as unit_splits
from ledgerfold.store._batch_reads import NotUtf8, lenient_rows
from ledgerfold.store._database import now
from ledgerfold.store._ledger import (
    bump_revision,
    check_storable,
    mark_citing_stale,
    noncharacter_field,
)
from ledgerfold.store._recall_answers import group_results_without_id
from ledgerfold.store._rows import (
    TURN_COLUMNS,
    damaged_turn,
    meta_dict,
    meta_json,
    turn_from_row,
    unit_turn,
)
from ledgerfold.store._schema import TURN_LIVE, TURN_RETRACTED

__all__ = ["edit_turn", "retract_turn"]


def _live_turn_row(conn: sqlite3.Connection, conversation_id: str, turn_id: str) -> tuple[Any, ...]:
    """`(pk, <turn columns>, digest)` of the live turn, text that is not UTF-8 (a row
    damaged in storage) read as `NotUtf8`."""
    found = lenient_rows(
        conn,
        f"SELECT pk, {TURN_COLUMNS}, digest FROM turns"
        " WHERE conversation_id = ? AND id = ? AND state = ?",
        (conversation_id, turn_id, TURN_LIVE),
    )
    if not found:
        raise _no_live_turn(conversation_id, turn_id)
    return tuple(found[0])


def _no_live_turn(conversation_id: str, turn_id: str) -> InvalidInput:
    return InvalidInput(
        f"turn_id: no live turn {turn_id!r} in conversation {conversation_id!r}",
        field="turn_id",
        problem="unknown-value",
    )


def edit_turn(
    conn: sqlite3.Connection, conversation_id: str, turn_id: str, changes: Mapping[str, Any]
) -> tuple[Turn, int, list[str]]:
    """Apply `changes` to a live turn, keeping the earlier version in `turn_history`;
    returns the new turn, the new revision and the IDs of the summaries that went stale."""
    row = _live_turn_row(conn, conversation_id, turn_id)
    turn_pk, old_digest, old_body = row[0], row[-1], row[4]
    old, new, repaired = _edited(row[1:-1], changes)
    if "meta" in changes:
        check_meta(new.meta)  # the stored copy (a mapping read again may change)
    check_storable(conn, noncharacter_field(conversation_id, [new]))
    # The results paired with a call the edit changes may pair with another call after it
    # (SPEC §17.2): read before the row changes.
    old_calls = _calls_of(old)
    before = (
        call_pairs.results_of(conn, conversation_id, turn_id, old_calls)
        if old_calls and (new.meta != old.meta or new.role != old.role)
        else set()
    )
    revision = bump_revision(conn, conversation_id)
    conn.execute(
        "INSERT INTO turn_history (turn_pk, replaced_at_revision, role, body, protected,"
        " protection_reason, grp, meta, digest, replaced_at)"
        " SELECT pk, ?, role, body, protected, protection_reason, grp, meta, digest, ?"
        " FROM turns WHERE pk = ?",
        (revision, now(), turn_pk),
    )
    conn.execute(
        "UPDATE turns SET role = ?, body = ?, protected = ?, protection_reason = ?,"
        " grp = ?, meta = ?, digest = ? WHERE pk = ?",
        (
            new.role,
            new.body,
            int(new.protected),
            new.protection_reason,
            new.group,
            meta_json(new.meta),
            new.digest,
            turn_pk,
        ),
    )
    if repaired or (new.body, new.role, new.group, new.meta) != (
        old.body,
        old.role,
        old.group,
        old.meta,
    ):
        # A body that is not UTF-8 (None): its passages go as the index recorded them.
        old_text = old_body if isinstance(old_body, str) else None
        search_index.reindex_turn(conn, conversation_id, turn_pk, old_text, new)
    stale: list[str] = []
    if not isinstance(old_digest, bytes) or new.digest != old_digest:
        stale = mark_citing_stale(conn, conversation_id, "?", (turn_id,), "source-modified")
    relinked = (
        repaired
        or (new.group is not None and new.group != old.group)
        or new.meta != old.meta
        or new.role != old.role
    )
    new_calls = _calls_of(new)
    after = (
        call_pairs.results_of(conn, conversation_id, turn_id, new_calls)
        if relinked and new_calls
        else set()
    )
    if relinked:
        stale += unit_splits.mark_group_split(
            conn, conversation_id, [new], answers_too=True, known_results=after
        )
    if before:
        stale += unit_splits.mark_repaired_split(conn, conversation_id, before)
    # Whether each result paired with the call before or after the edit answers
    # `recall_history` may have changed with it: the index follows (SPEC §16.5, §17.7).
    search_index.redecide(
        conn, conversation_id, _turns_by_id(conn, conversation_id, before | after)
    )
    # A result without a call ID answers a `recall_history` call of its group: an assistant
    # turn of a group gaining or losing one (or changing group) changes that for the group.
    groups = {
        turn.group for turn in (old, new) if turn.role == "assistant" and turn.group is not None
    }
    if groups and (old.role, old.group, old.meta) != (new.role, new.group, new.meta):
        search_index.redecide(
            conn, conversation_id, group_results_without_id(conn, conversation_id, groups)
        )
    return new, revision, stale


#: A stored meta that is not a JSON object of strings (`_stored_fields`).
_BAD_META = object()

#: The `turns` column of each edit keyword whose name differs.
_COLUMNS = {"group": "grp"}

#: The fields an edit gives.
_EDITABLE = frozenset({"role", "body", "protected", "protection_reason", "group", "meta"})


def _edited(columns: tuple[Any, ...], changes: Mapping[str, Any]) -> tuple[Turn, Turn, bool]:
    """The stored turn, the edited one and whether the edit repairs a damaged row.

    A row damaged in storage (text that is not UTF-8, meta that is not a JSON object of
    strings, a value no turn holds: another tool's write) is repaired by an edit giving
    each damaged field a new value: the edit supplies whole fields, so nothing of the
    damaged value is read. The stored turn is then the bodiless stand-in the unit rule reads
    (`unit_turn`: what of its role, group and call links can be read), so its calls answer
    nothing, as everywhere else. A damaged field the edit leaves as it is raises the
    `StoreError` naming the turn and the column (never the value), before anything is
    written. Bad new values are `InvalidInput` as for any turn."""
    try:
        old = turn_from_row(columns)
    except StoreError:  # damaged in storage
        pass
    else:
        return old, old.replace(**changes), False
    turn_id, sequence = columns[0], columns[1]
    fields = _stored_fields(columns)
    for name, value in fields.items():
        if name not in changes and (isinstance(value, NotUtf8) or value is _BAD_META):
            raise _left_damaged(name, turn_id, sequence)
    merged = {**fields, **changes}
    try:
        new = Turn(turn_id, sequence, merged.pop("role"), merged.pop("body"), **merged)
    except InvalidInput as err:
        name = re.split(r"[.\[]", str(err.field), maxsplit=1)[0]
        if name in changes:
            raise
        raise _left_damaged(name, turn_id, sequence) from None
    stand_in = unit_turn(turn_id, sequence, columns[2], columns[6], columns[7])
    return stand_in or Turn(turn_id, sequence, "user", ""), new, True


def _stored_fields(columns: tuple[Any, ...]) -> dict[str, Any]:
    """The editable fields of a stored row as `Turn` takes them; meta that is not a JSON
    object of strings is `_BAD_META`, text that is not UTF-8 stays `NotUtf8`."""
    _, _, role, body, protected, reason, group, meta = columns
    try:
        meta = meta_dict(meta) if isinstance(meta, str) else meta
    except StoreError:
        meta = _BAD_META
    return {
        "role": role,
        "body": body,
        "protected": bool(protected),
        "protection_reason": reason,
        "group": group,
        "meta": meta,
    }


def _left_damaged(field: str, turn_id: object, sequence: object) -> StoreError:
    column = _COLUMNS.get(field, field)
    if field not in _EDITABLE:  # the sequence: nothing an edit gives
        return damaged_turn(column, turn_id, sequence)
    return damaged_turn(
        column, turn_id, sequence, f"; an edit giving {field} a new value replaces it"
    )


def _calls_of(turn: Turn) -> set[str]:
    """The call IDs an assistant turn's `tool_calls` names (none for other roles)."""
    if turn.role != "assistant" or not turn.meta:
        return set()
    return call_pairs.calls_in(turn.meta.get("tool_calls"))


def _turns_by_id(
    conn: sqlite3.Connection, conversation_id: str, turn_ids: set[str]
) -> list[tuple[int, Turn]]:
    """`(pk, turn)` of the live turns with these IDs."""
    return [
        (int(row[0]), turn_from_row(row[1:]))
        for row in conn.execute(
            f"SELECT pk, {TURN_COLUMNS} FROM turns WHERE conversation_id = ? AND state = ?"
            " AND id IN (SELECT value FROM json_each(?))",
            (conversation_id, TURN_LIVE, json.dumps(sorted(turn_ids), ensure_ascii=False)),
        )
    ]


def retract_turn(
    conn: sqlite3.Connection, conversation_id: str, turn_id: str
) -> tuple[int | None, int, list[str], list[str]]:
    """Take a live turn out of the ledger view; returns its sequence (None when the stored
    one is not an integer: a row damaged in storage), the new revision, the
    IDs of the summaries that went stale and the IDs of the answering tool turns that went
    with it.

    A turn that made tool calls takes the live tool turns answering them along, in the same
    revision (SPEC §17.2): a result whose call is gone would be a tool message without its
    call. Retracting a result leaves its call (an open call again: kept raw, and left out of
    chat messages until answered)."""
    # Neither body nor anything a damaged row may hold stops it (`unit_turn`): a row damaged
    # in storage is retracted (and erased) like any other.
    found = lenient_rows(
        conn,
        "SELECT pk, sequence, role, grp, meta FROM turns"
        " WHERE conversation_id = ? AND id = ? AND state = ?",
        (conversation_id, turn_id, TURN_LIVE),
    )
    if not found:
        raise _no_live_turn(conversation_id, turn_id)
    row = found[0]
    search_index.unindex(conn, "pk = ?", (row[0],))
    retracted = unit_turn(turn_id, *row[1:]) or Turn(turn_id, 0, "user", "")
    answers = _answering(conn, conversation_id, retracted)
    for answer_pk, _ in answers:  # their bodies leave the live view too (SPEC §16.1)
        search_index.unindex(conn, "pk = ?", (answer_pk,))
    conn.execute("UPDATE turns SET state = ? WHERE pk = ?", (TURN_RETRACTED, row[0]))
    retracted_ids = [turn_id, *(answer_id for _, answer_id in answers)]
    conn.executemany(
        "UPDATE turns SET state = ? WHERE pk = ?", [(TURN_RETRACTED, pk) for pk, _ in answers]
    )
    revision = bump_revision(conn, conversation_id)
    stale = mark_citing_stale(
        conn,
        conversation_id,
        "SELECT value FROM json_each(?)",
        (json.dumps(retracted_ids, ensure_ascii=False),),
        "source-missing",
    )
    # The results paired with its calls went with it; those of its group without a call ID
    # stay, and with its `recall_history` call gone may answer none: the index follows
    # (SPEC §16.5, §17.7; the summarizer reads them raw then, `recall_result_ids`).
    if retracted.group is not None and _calls_recall(retracted):
        search_index.redecide(
            conn,
            conversation_id,
            group_results_without_id(conn, conversation_id, (retracted.group,)),
        )
    # The stored sequence, or none when the column holds no integer (damaged in storage):
    # the stand-in's sequence is no turn's.
    sequence = row[1] if type(row[1]) is int else None
    return sequence, revision, stale, retracted_ids[1:]


def _calls_recall(turn: Turn) -> bool:
    """Whether an assistant turn makes a `recall_history` call."""
    return turn.role == "assistant" and any(
        call_name(call) == RECALL_TOOL_NAME for call in tool_calls_of(turn.meta)
    )


def _answering(conn: sqlite3.Connection, conversation_id: str, turn: Turn) -> list[tuple[int, str]]:
    """`(pk, id)` of the live tool turns answering a call `turn` made (none unless it is an
    assistant turn with `tool_calls`): paired with it by the core's rule, so a result of a
    call ID made again later stays with that later call."""
    raw = (turn.meta or {}).get("tool_calls") if turn.role == "assistant" else None
    if raw is None:
        return []
    try:
        call_ids = tool_call_ids(raw)
    except InvalidInput:  # stored before writes were checked: it names no call
        return []
    if not call_ids:
        return []
    paired = call_pairs.results_of(conn, conversation_id, turn.id, call_ids)
    if not paired:
        return []
    rows = conn.execute(
        # By the (conversation, ID) key: an ORDER BY here makes SQLite walk the sequences.
        "SELECT pk, id, sequence FROM turns WHERE conversation_id = ?"
        " AND id IN (SELECT value FROM json_each(?))",
        (conversation_id, json.dumps(sorted(paired), ensure_ascii=False)),
    ).fetchall()
    return [(int(pk), str(answer_id)) for pk, answer_id, _ in sorted(rows, key=lambda r: r[2])]
