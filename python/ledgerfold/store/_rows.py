"""Rows of the store's tables <-> ledgerfold values: the one place that knows the columns."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgerfold._context import TurnItem
from ledgerfold._errors import InvalidInput, StoreError
from ledgerfold._model import ROLES, Turn
from ledgerfold._native import SourceIds
from ledgerfold._summary import SummaryEnvelope
from ledgerfold.store._sqlite_errors import damaged_row

__all__ = [
    "DAMAGED",
    "ITEM_COLUMNS",
    "SUMMARY_COLUMNS",
    "TURN_COLUMNS",
    "DamagedSummary",
    "Version",
    "envelope_from_row",
    "item_from_row",
    "meta_dict",
    "meta_json",
    "turn_from_row",
    "turn_values",
    "unit_turn",
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


#: `json.dumps(..., sort_keys=True, ensure_ascii=False)`, made once: `dumps` with options
#: builds a new encoder per call, a cost every appended turn paid.
_META_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
#: How that encoder writes a str (`ensure_ascii=False`).
_encode_str = json.encoder.encode_basestring


def meta_json(meta: Mapping[str, str] | None) -> str | None:
    """The meta column: the JSON `json.dumps(meta, sort_keys=True, ensure_ascii=False)`
    writes (its separators), for a meta of str keys and values (a `Turn`'s) written
    directly: the encoder's machinery cost more than the text."""
    if meta is None:
        return None
    items = sorted(dict(meta).items())
    if all(type(key) is str and type(value) is str for key, value in items):
        return "{" + ", ".join([_encode_str(k) + ": " + _encode_str(v) for k, v in items]) + "}"
    return _META_ENCODER.encode(dict(meta))


#: The stale reason of a summary whose stored record is damaged (it cannot be read back).
DAMAGED = "damaged-record"


class DamagedSummary(Exception):
    """A `summaries` row that cannot be read back as a version (damaged in storage). Internal:
    it reaches callers as a `StoreError` with the same message, or as a fallback."""

    def __init__(self, message: str, *, summary_id: str | None):
        super().__init__(message)
        self.summary_id = summary_id


def damaged_turn(column: str, turn_id: object, sequence: object, hint: str = "") -> StoreError:
    """A `turns` row that cannot be read back: named by table, column and row, never by
    its content; `hint` (from `; `) says what would get past it."""
    return damaged_row(
        f"damaged row in table turns, column {column}: turn {turn_id!r} (sequence"
        f" {sequence!r}); the database was changed outside ledgerfold{hint}"
    )


#: Meta texts up to this long are decoded once and kept (`_short_meta`): a conversation's
#: turns share a few (an agents item's marker of its moved content), which every turn read
#: decoded again. Longer ones (an item kept verbatim) are decoded each time, not kept.
SHORT_META = 256


def meta_dict(
    text: str | None, turn_id: object = None, sequence: object = None
) -> dict[str, str] | None:
    """The meta column as a `Turn` takes it: a JSON object of str values (a new dict each
    call); anything else is damage, named by the row (`damaged_turn`)."""
    if text is None:
        return None
    if type(text) is str and len(text) <= SHORT_META:
        items = _short_meta(text)
        if items is not None:
            return dict(items)
        meta = None
    else:
        meta = _decoded_meta(text)
    if meta is None:
        raise damaged_turn("meta", turn_id, sequence) from None
    return meta


def _decoded_meta(text: object) -> dict[str, str] | None:
    """`text` decoded as a meta object, or None when it does not make one."""
    try:
        meta = json.loads(text)  # type: ignore[arg-type]  # a damaged column: any value
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(meta, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in meta.items()
    ):
        return None
    return meta


@functools.lru_cache(maxsize=512)
def _short_meta(text: str) -> tuple[tuple[str, str], ...] | None:
    """`_decoded_meta` of a short text, kept as its items (immutable: each caller gets a
    dict of its own)."""
    meta = _decoded_meta(text)
    return None if meta is None else tuple(meta.items())


def turn_from_row(row: tuple[Any, ...]) -> Turn:
    """A `Turn` from a row of `TURN_COLUMNS`."""
    turn_id, sequence, role, body, protected, reason, group, meta = row
    try:
        return Turn(
            turn_id,
            sequence,
            role,
            body,
            protected=bool(protected),
            protection_reason=reason,
            group=group,
            meta=meta_dict(meta, turn_id, sequence),
        )
    except InvalidInput as err:
        column = {"group": "grp"}.get(str(err.field), str(err.field))
        raise damaged_turn(column, turn_id, sequence) from None


def unit_turn(
    turn_id: object, sequence: object, role: object, group: object, meta: object
) -> Turn | None:
    """A bodiless turn carrying what the unit rule reads (role, group, call links, SPEC
    §17.2), from a row's columns as they are. A column damaged in storage links nothing: a
    role that is not one is read as `user`, a group that is not one as none, and meta that
    is not a JSON object as none, so that an erasure or a purge gets past the row. None
    when the ID or sequence makes no turn."""
    links: dict[str, str] | None = None
    if isinstance(meta, str):
        try:
            loaded = json.loads(meta)
        except (ValueError, RecursionError):
            loaded = None
        if isinstance(loaded, dict):
            links = {
                key: value
                for key, value in loaded.items()
                if key in ("tool_calls", "tool_call_id") and isinstance(value, str) and value
            } or None
    if not isinstance(turn_id, str) or type(sequence) is not int:
        return None
    role = role if isinstance(role, str) and role in ROLES else "user"
    try:
        grouped = group if isinstance(group, str) and group else None
        return Turn(turn_id, sequence, role, "", group=grouped, meta=links)
    except InvalidInput:
        pass
    try:
        return Turn(turn_id, sequence, role, "")
    except InvalidInput:
        return None


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
    """A `TurnItem` from a row of `ITEM_COLUMNS`; a row that makes none is damaged (a
    `StoreError`, as `turn_from_row` says it), not the caller's bad input."""
    turn_id, sequence, role, body, meta = row
    try:
        return TurnItem(turn_id, role, body, sequence, meta_dict(meta, turn_id, sequence))
    except InvalidInput as err:
        raise damaged_turn(str(err.field), turn_id, sequence) from None


@dataclass(frozen=True, slots=True)
class Version:
    """A stored summary as the store caches it."""

    pk: int
    envelope: SummaryEnvelope
    through_sequence: int


def envelope_from_row(row: tuple[Any, ...], source_ids: tuple[str, ...] | SourceIds) -> Version:
    """The version of a `summaries` row of `SUMMARY_COLUMNS` (not a `failed` one); a row
    that does not make one raises `DamagedSummary` naming its column."""
    try:
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
    except InvalidInput as err:
        raise damaged_summary(row, str(err.field)) from None
    return Version(row[0], envelope, row[11] if row[11] is not None else 0)


def damaged_summary(row: tuple[Any, ...], column: str) -> DamagedSummary:
    summary_id = row[1] if isinstance(row[1], str) else None
    return DamagedSummary(
        f"damaged row in table summaries, column {column}: pk {row[0]!r} (summary"
        f" {summary_id!r}); the database was changed outside ledgerfold",
        summary_id=summary_id,
    )
