"""Deep revalidation of sealed summaries (SPEC §15.5, §15.8 "Sealed summaries").

Batch revalidation re-hashes live turns natively and reports a summary whose source was
purged as `source-missing`. A current summary with purged sources is a sealed one: its purged
sources are checked by the digests its source index kept (they can no longer change), its
live ones re-hashed from their bodies. This module redoes that check for the few summaries
the native pass reported `source-missing` (both the database and the Parquet paths use it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from types import SimpleNamespace
from typing import Any

from ledgerfold import _native
from ledgerfold._model import Conversation, Turn

__all__ = ["SOURCE_MISSING", "recheck"]

SOURCE_MISSING = "source-missing"
_SOURCE_MODIFIED = "source-modified"


#: What a damaged row or source (one that is no valid turn, or not text) cannot be read as.
_DAMAGE = (ValueError, TypeError, UnicodeDecodeError, OverflowError, RecursionError)


def _text(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    return value


def _turn(row: tuple[Any, ...]) -> Turn | None:
    """A turn, re-hashed, from `(id, sequence, role, body, protected, protection_reason,
    group, meta_json)` (text columns may be UTF-8 bytes); None when the stored row is not a
    valid turn (damage in storage: no error, and none that would quote its text)."""
    try:
        turn_id, sequence, role, body, protected, reason, group, meta = (_text(v) for v in row)
        if not isinstance(protected, int):
            return None
        loaded = None if meta is None else json.loads(meta)
        return Turn(
            turn_id,
            int(sequence),
            role,
            body,
            protected=bool(protected),
            protection_reason=reason,
            group=group,
            meta=loaded,
        )
    except _DAMAGE:  # InvalidInput is a ValueError
        return None


def recheck(
    conversation_id: str,
    summary_id: str,
    fingerprint: str,
    sources: Iterable[tuple[str, bytes]],
    purged_ids: set[str],
    live_rows: Iterable[tuple[Any, ...]],
) -> tuple[str | None, str | None] | None:
    """`(reason, turn_id)` of a summary with its purged sources sealed, or None when no
    source of it was purged, or its record cannot be read (the native verdict stands).
    `sources`: `(turn_id, stored digest)` in position order. A live row that is not a valid
    turn is left out of the conversation, or, when the summary cites it, makes the summary
    `source-modified` (as the native check has it)."""
    try:
        cited = [(_text(turn_id), bytes(digest)) for turn_id, digest in sources]
    except _DAMAGE:
        return None
    sealed: Mapping[str, bytes] = {
        turn_id: digest for turn_id, digest in cited if turn_id in purged_ids
    }
    if not sealed or not isinstance(fingerprint, str):
        return None
    cited_ids = {turn_id for turn_id, _ in cited}
    turns = []
    for row in live_rows:
        turn = _turn(row)
        if turn is not None:
            turns.append(turn)
            continue
        try:
            damaged_id = _text(row[0])
        except _DAMAGE:
            continue  # not text: no source names it
        if damaged_id in cited_ids:
            return _SOURCE_MODIFIED, damaged_id
    try:
        conversation = Conversation(conversation_id, 0, turns)
    except _DAMAGE:  # two rows with one ID, or out of order: no valid ledger
        return None
    summary = SimpleNamespace(
        id=summary_id,
        conversation_id=conversation_id,
        policy_version="",
        source_ids=tuple(turn_id for turn_id, _ in cited),
        source_fingerprint=fingerprint,
    )
    try:
        current, reason, turn_id = _native.check(summary, conversation, "", dict(sealed))
    except _DAMAGE:
        return None
    return (None, None) if current else (reason, turn_id)
