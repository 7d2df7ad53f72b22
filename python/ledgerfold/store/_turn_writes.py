"""The work of `SQLiteStore`'s ledger writes (SPEC §9, §15.6): appends (one turn, many,
chat messages, legacy records) and edits, each validated before its one transaction and
logged after it. `SQLiteStore` holds one `TurnWrites` and its public methods of these
names delegate to it; the rows are `ledger`'s and `chat_append`'s."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ledgerfold import _validate
from ledgerfold._context import TurnItem
from ledgerfold._errors import DuplicateId, InvalidInput
from ledgerfold._events import EventHook, emit, stale_event
from ledgerfold._model import Turn
from ledgerfold.adapters._chat import ChatTurnSpec
from ledgerfold.store import _chat_append as chat_append
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _turn_changes as turn_changes
from ledgerfold.store._context_cache import ContextCache
from ledgerfold.store._database import Transaction
from ledgerfold.store._legacy import legacy_specs

__all__ = ["TurnWrites"]

_log = logging.getLogger("ledgerfold.store")

# `sequence` (optional) must exceed every sequence written before (SPEC §15.8).
_APPEND_KEYS = frozenset(
    {"id", "sequence", "role", "body", "protected", "protection_reason", "group", "meta"}
)
_EDIT_KEYS = frozenset({"role", "body", "protected", "protection_reason", "group", "meta"})


class TurnWrites:
    """The ledger writes over the store's transaction and event hook (the store's
    docstrings describe them)."""

    def __init__(
        self, transaction: Transaction, on_event: EventHook | None, contexts: ContextCache
    ) -> None:
        self._transaction = transaction
        self._on_event = on_event
        self._contexts = contexts

    def append(
        self, conversation_id: str, specs: list[Mapping[str, Any]], *, field_prefix: str
    ) -> list[Turn]:
        """Append turn specs (mappings of `append`'s keywords) all or nothing; a field of
        spec i is named `{field_prefix}[i].<key>`."""
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        # Validate everything the ledger does not decide before touching the database.
        prepared: list[tuple[str, Mapping[str, Any]]] = []
        seen: set[str] = set()
        for index, spec in enumerate(specs):
            turn_id = spec.get("id")
            if turn_id is None:
                turn_id = "t-" + uuid.uuid4().hex
            else:
                turn_id = _validate.identifier(ledger.field_of(field_prefix, index, "id"), turn_id)
            if turn_id in seen:
                field = ledger.field_of(field_prefix, index, "id")
                raise DuplicateId(
                    f"{field}: duplicate turn id {turn_id!r}", id=turn_id, field=field
                )
            seen.add(turn_id)
            protected = spec.get("protected", False)
            if protected is not False and protected is not True:  # the field named only then
                _validate.flag(ledger.field_of(field_prefix, index, "protected"), protected)
            prepared.append((turn_id, spec))
        if not prepared:
            return []
        with self._transaction(write=True, operation="append", scope=conversation_id) as conn:
            turns, revision, stale = ledger.insert_turns(
                conn, conversation_id, prepared, field_prefix
            )
            if not stale:
                self._contexts.appended(conversation_id, _items(turns))
        _log.debug(
            "appended: conversation=%s turns=%d sequences=%d..%d revision=%d",
            conversation_id,
            len(turns),
            turns[0].sequence,
            turns[-1].sequence,
            revision,
        )
        if stale:
            emit(self._on_event, stale_event(conversation_id, "group-split", stale))
        return turns

    def append_many(self, conversation_id: str, turns: Iterable[Mapping[str, Any]]) -> list[Turn]:
        if type(turns) is list or (  # a list: the ABC checks answered without asking them
            isinstance(turns, Iterable) and not isinstance(turns, (str, bytes, Mapping))
        ):
            turns = [chat_append.turn_spec(turn) for turn in turns]  # type: ignore[misc]
        specs: list[Mapping[str, Any]] = []
        for field, spec in ledger.mappings("turns", turns, _APPEND_KEYS):
            for required in ("role", "body"):
                if required not in spec:
                    raise InvalidInput(
                        f"{field}.{required}: missing", field=f"{field}.{required}", problem="empty"
                    )
            specs.append(spec)
        return self.append(conversation_id, specs, field_prefix="turns")

    def append_chat(self, conversation_id: str, specs: list[ChatTurnSpec]) -> list[Turn]:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        if not specs:
            return []
        ids = chat_append.prepare(specs)
        with self._transaction(write=True, operation="append_chat", scope=conversation_id) as conn:
            turns, revision, stale = chat_append.append_chat(conn, conversation_id, specs, ids)
            if not stale:
                self._contexts.appended(conversation_id, _items(turns))
        _log.debug(
            "appended chat messages: conversation=%s turns=%d revision=%d",
            conversation_id,
            len(turns),
            revision,
        )
        if stale:
            emit(self._on_event, stale_event(conversation_id, "group-split", stale))
        return turns

    def import_legacy(
        self, conversation_id: str, records: Iterable[Mapping[str, Any]]
    ) -> list[Turn]:
        turns = self.append(conversation_id, legacy_specs(records), field_prefix="records")
        _log.info(
            "legacy import: conversation=%s turns=%d protected=%d",
            conversation_id,
            len(turns),
            sum(turn.protected for turn in turns),
        )
        return turns

    def edit(self, conversation_id: str, turn_id: str, changes: Mapping[str, Any]) -> Turn:
        conversation_id = _validate.identifier("conversation_id", conversation_id)
        turn_id = _validate.identifier("turn_id", turn_id)
        for key in changes:
            if key not in _EDIT_KEYS:
                problem = "not-allowed" if key in ("id", "sequence") else "unknown-value"
                try:
                    key.encode("utf-8")
                    shown = key
                except UnicodeEncodeError:  # keep the message printable on any stream
                    shown = ascii(key)
                raise InvalidInput(f"{shown}: cannot be edited", field=shown, problem=problem)
        with self._transaction(write=True, operation="edit") as conn:
            new, revision, stale = turn_changes.edit_turn(conn, conversation_id, turn_id, changes)
        _log.info(
            "edited: conversation=%s turn=%s sequence=%d revision=%d summaries_stale=%d",
            conversation_id,
            turn_id,
            new.sequence,
            revision,
            len(stale),
        )
        if stale:
            emit(self._on_event, stale_event(conversation_id, "source-modified", stale, turn_id))
        return new


def _items(turns: list[Turn]) -> tuple[TurnItem, ...]:
    """The context items of new turns, exactly as a read of their rows would make them
    (`item_from_row` of the row `turn_values` wrote): the meta column is its JSON with
    sorted keys, str to str, so the read's dict is the meta's items in key order. Made
    without writing and reading that JSON again."""
    return tuple(
        TurnItem(turn.id, turn.role, turn.body, turn.sequence, _read_meta(turn.meta))
        for turn in turns
    )


def _read_meta(meta: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if meta is None else dict(sorted(meta.items()))
