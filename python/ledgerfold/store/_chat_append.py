"""`SQLiteStore.append_chat_messages` inside one transaction (SPEC §15.6, §15.8).

Messages are converted by the rules of `adapters.chat.from_chat_messages`; what this adds
is the store's side of grouping: a tool result whose call was made in an earlier call
joins the group of the stored assistant turn whose `tool_calls` names it, looked up in
the same transaction as the insert, so a concurrent writer cannot slip in between.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping
from typing import Any

from ledgerfold._model import Turn
from ledgerfold.adapters._chat import ChatTurnSpec, tool_group
from ledgerfold.store import _ledger as ledger
from ledgerfold.store._schema import TURN_LIVE

__all__ = ["append_chat", "prepare", "turn_spec"]

#: Call IDs per `IN (...)` list: under SQLite's host-parameter limit.
_CHUNK = 500


def prepare(specs: list[ChatTurnSpec]) -> list[str]:
    """Each message's `id` when present, else a fresh unique ID."""
    return [spec.id if spec.id is not None else "t-" + uuid.uuid4().hex for spec in specs]


def _stored_call_groups(
    conn: sqlite3.Connection, conversation_id: str, call_ids: list[str]
) -> dict[str, tuple[str, str | None]]:
    """`call id -> (assistant turn id, its group)` of the newest stored assistant turn naming
    each call (retracted and purged turns included: a call ID stays made; such a turn has no
    group to join)."""
    found: dict[str, tuple[str, str | None]] = {}
    for start in range(0, len(call_ids), _CHUNK):
        chunk = call_ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT json_extract(c.value, '$.id'), t.id, t.grp, t.state FROM turns AS t,"
            " json_each(json_extract(t.meta, '$.tool_calls')) AS c"
            " WHERE t.conversation_id = ? AND t.role = 'assistant'"
            " AND json_valid(json_extract(t.meta, '$.tool_calls'))"
            f" AND json_extract(c.value, '$.id') IN ({marks})"
            " ORDER BY t.sequence",
            (conversation_id, *chunk),
        ).fetchall()
        for call_id, turn_id, group, state in rows:
            # A retracted or purged call still holds its ID, but has no group to join.
            found[call_id] = (turn_id, group if state == TURN_LIVE else None)
    return found


def append_chat(
    conn: sqlite3.Connection,
    conversation_id: str,
    specs: list[ChatTurnSpec],
    ids: list[str],
) -> tuple[list[Turn], int, list[str]]:
    """Insert converted messages at the next sequences; returns the turns and the revision."""
    made = [call_id for spec in specs for call_id in spec.call_ids]
    answered = [spec.answers for spec in specs if spec.answers is not None]
    stored = _stored_call_groups(conn, conversation_id, sorted(set(made) | set(answered)))
    group_of_call: dict[str, str | None] = {
        call_id: group for call_id, (_, group) in stored.items()
    }
    prepared: list[tuple[str, Mapping[str, Any]]] = []
    for turn_id, spec in zip(ids, specs, strict=True):
        group: str | None = None
        if spec.call_ids:
            # A call ID made before (a model numbering its calls in every response) keeps
            # its results with this call: the group is told apart by the turn's ID.
            group = tool_group(spec.call_ids, turn_id, group_of_call)
            group_of_call.update(dict.fromkeys(spec.call_ids, group))
        if spec.answers is not None:
            group = group_of_call.get(spec.answers)
        prepared.append(
            (
                turn_id,
                {"role": spec.role, "body": spec.body, "group": group, "meta": spec.meta or None},
            )
        )
    return ledger.insert_turns(conn, conversation_id, prepared, "messages")


def turn_spec(item: object) -> object:
    """A `Turn` given to `append_many` as a spec: its fields but `sequence` (the ledger
    assigns the next ones); anything else is passed on unchanged."""
    if not isinstance(item, Turn):
        return item
    return {
        "id": item.id,
        "role": item.role,
        "body": item.body,
        "protected": item.protected,
        "protection_reason": item.protection_reason,
        "group": item.group,
        "meta": item.meta,
    }
