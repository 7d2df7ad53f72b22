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


def _text(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    return value


def _turn(row: tuple[Any, ...]) -> Turn:
    """A turn, re-hashed, from `(id, sequence, role, body, protected, protection_reason,
    group, meta_json)` (text columns may be UTF-8 bytes)."""
    turn_id, sequence, role, body, protected, reason, group, meta = (_text(v) for v in row)
    return Turn(
        turn_id,
        int(sequence),
        role,
        body,
        protected=bool(protected),
        protection_reason=reason,
        group=group,
        meta=None if meta is None else json.loads(meta),
    )


def recheck(
    conversation_id: str,
    summary_id: str,
    fingerprint: str,
    sources: Iterable[tuple[str, bytes]],
    purged_ids: set[str],
    live_rows: Iterable[tuple[Any, ...]],
) -> tuple[str | None, str | None] | None:
    """`(reason, turn_id)` of a summary with its purged sources sealed, or None when no
    source of it was purged (the native verdict stands). `sources`: `(turn_id, stored
    digest)` in position order."""
    cited = [(_text(turn_id), bytes(digest)) for turn_id, digest in sources]
    sealed: Mapping[str, bytes] = {
        turn_id: digest for turn_id, digest in cited if turn_id in purged_ids
    }
    if not sealed:
        return None
    conversation = Conversation(conversation_id, 0, [_turn(row) for row in live_rows])
    summary = SimpleNamespace(
        id=summary_id,
        conversation_id=conversation_id,
        policy_version="",
        source_ids=tuple(turn_id for turn_id, _ in cited),
        source_fingerprint=fingerprint,
    )
    current, reason, turn_id = _native.check(summary, conversation, "", dict(sealed))
    return (None, None) if current else (reason, turn_id)
