"""Rows of the store's tables <-> ledgerfold values: the one place that knows the columns."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgerfold.context import TurnItem
from ledgerfold.model import Turn
from ledgerfold.summary import SummaryEnvelope

__all__ = [
    "ITEM_COLUMNS",
    "SUMMARY_COLUMNS",
    "TURN_COLUMNS",
    "Version",
    "envelope_from_row",
    "item_from_row",
    "meta_dict",
    "meta_json",
    "turn_from_row",
    "turn_values",
]

#: `turns` columns in the order `turn_from_row` reads them.
TURN_COLUMNS = "id, sequence, role, body, protected, protection_reason, grp, meta"
#: `turns` columns in the order `item_from_row` reads them.
ITEM_COLUMNS = "id, sequence, role, body, meta"
#: `summaries` columns in the order `envelope_from_row` and the store read them.
SUMMARY_COLUMNS = (
    "pk, id, conversation_id, plan_id, status, reason, created_at, source_revision,"
    " source_fingerprint, policy_version, text, through_sequence, rejected_source_ids,"
    " parent_id"
)


def meta_json(meta: Mapping[str, str] | None) -> str | None:
    return None if meta is None else json.dumps(dict(meta), sort_keys=True, ensure_ascii=False)


def meta_dict(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    meta: dict[str, str] = json.loads(text)
    return meta


def turn_from_row(row: tuple[Any, ...]) -> Turn:
    """A `Turn` from a row of `TURN_COLUMNS`."""
    turn_id, sequence, role, body, protected, reason, group, meta = row
    return Turn(
        turn_id,
        sequence,
        role,
        body,
        protected=bool(protected),
        protection_reason=reason,
        group=group,
        meta=meta_dict(meta),
    )


def turn_values(conversation_id: str, turn: Turn) -> tuple[Any, ...]:
    """The `turns` row of a new turn: conversation_id, id, sequence, role, body, protected,
    protection_reason, grp, meta, digest."""
    return (
        conversation_id,
        turn.id,
        turn.sequence,
        turn.role,
        turn.body,
        int(turn.protected),
        turn.protection_reason,
        turn.group,
        meta_json(turn.meta),
        turn.digest,
    )


def item_from_row(row: tuple[Any, ...]) -> TurnItem:
    """A `TurnItem` from a row of `ITEM_COLUMNS`."""
    turn_id, sequence, role, body, meta = row
    return TurnItem(turn_id, role, body, sequence, meta_dict(meta))


@dataclass(frozen=True, slots=True)
class Version:
    """A stored summary as the store caches it."""

    pk: int
    envelope: SummaryEnvelope
    through_sequence: int


def envelope_from_row(row: tuple[Any, ...], source_ids: tuple[str, ...]) -> Version:
    """The version of a `summaries` row of `SUMMARY_COLUMNS` (not a `failed` one)."""
    envelope = SummaryEnvelope(
        id=row[1],
        plan_id=row[3],
        conversation_id=row[2],
        source_revision=row[7],
        source_ids=source_ids,
        source_fingerprint=row[8],
        policy_version=row[9],
        text=row[10],
        parent_id=row[13],
    )
    return Version(row[0], envelope, row[11] if row[11] is not None else 0)
