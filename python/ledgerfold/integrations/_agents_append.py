"""The turns `LedgerfoldSession.add_items` appends for the Agents SDK's items (one turn per
item, `_agents_items`), grouped as SPEC §17.2 pairs them: a result answers the nearest call
of its ID before it, so a model that numbers its calls `call_0` in every response makes one
compaction unit per exchange, not one of them all."""

from __future__ import annotations

import os
from typing import Any

from ledgerfold._errors import InvalidInput
from ledgerfold.adapters._chat import chat_turn_specs
from ledgerfold.integrations._agents_input import named_for_items, plain_item, stored_item
from ledgerfold.integrations._agents_items import (
    ITEM_KEY,
    is_output,
    item_groups,
    item_message,
    link_id,
    newest_calls,
)
from ledgerfold.integrations._turns import append_specs
from ledgerfold.store._protocol import Store

__all__ = ["item_turns"]


def item_turns(store: Store, session_id: str, version: str, items: list[Any]) -> list[Any]:
    """The `append_many` specs of `items` (checked: `InvalidInput` naming `items[i]...`), each
    item kept verbatim in its turn's meta; `version` is the policy's (the context read)."""
    plain = [plain_item(item, index) for index, item in enumerate(items)]
    if not plain:
        return []
    try:
        specs = chat_turn_specs((item_message(item) for item in plain), keep_parts=False)
    except InvalidInput as error:
        raise named_for_items(error, plain) from None
    ids = _new_turn_ids(len(specs))
    groups = item_groups(plain, ids)
    metas = [
        {ITEM_KEY: stored_item(item, index, spec.body)}
        for index, (item, spec) in enumerate(zip(plain, specs, strict=True))
    ]
    earlier = _call_groups(store, session_id, version, plain, groups)
    turns = append_specs(specs, ids, {}, earlier.get, metas)
    for turn, group in zip(turns, groups, strict=True):
        if group is not None:
            turn["group"] = group
    return turns


#: The bits `uuid.UUID(..., version=4)` sets: the variant (RFC 4122) and the version.
_UUID4_CLEARED = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET = (0x8000 << 48) | (4 << 76)


def _new_turn_ids(count: int) -> list[str]:
    """`count` times `"t-" + uuid.uuid4().hex`: the same random bits and text, read in one
    `os.urandom` call, without building a `UUID` (costs per appended item)."""
    raw = os.urandom(16 * count)
    return [
        "t-%032x" % ((int.from_bytes(raw[at : at + 16], "big") & _UUID4_CLEARED) | _UUID4_SET)
        for at in range(0, 16 * count, 16)
    ]


def _call_groups(
    store: Store, session_id: str, version: str, items: list[Any], groups: list[str | None]
) -> dict[str, str]:
    """The group of the call each result among `items` answers when that call is not among
    them: its newest call in the context, whose turn is read (only then). A call the context
    does not show gives none: the result is in its call's unit by the tool-call link."""
    answered = {
        call
        for item, group in zip(items, groups, strict=True)
        if group is None and is_output(item) and (call := link_id(item)) is not None
    }
    if not answered:
        return {}
    made = newest_calls(store.context(session_id, version).items, answered)
    turns = {turn.id: turn for turn in store.get_turns(session_id, made.values())}
    found = {call: turns[turn].group for call, turn in made.items() if turn in turns}
    return {call: group for call, group in found.items() if group is not None}
