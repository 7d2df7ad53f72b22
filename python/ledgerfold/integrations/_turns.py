"""Converted chat messages as `Store.append_many` specs, grouped as the store would group them.

The integrations append through the `Store` protocol (any backend, no private method): the
one thing `SQLiteStore.append_chat_messages` adds over `append_many` is the group of a tool
result whose call was appended earlier, and that group is `tool_group` of the calling
message's call IDs, which the integration knows (`group_of_call`, kept as it appends).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledgerfold.adapters._chat import ChatTurnSpec, tool_group

__all__ = ["append_specs"]


def append_specs(
    specs: Sequence[ChatTurnSpec],
    ids: Sequence[str],
    group_of_call: dict[str, str],
    unknown_call: Callable[[str], str | None],
    extra_meta: Sequence[Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """`append_many` specs: an assistant turn calling tools gets `tool_group(call_ids)` (with
    its turn ID added when its first call ID was made before: a model reusing call IDs) and
    `group_of_call` learns its calls; a tool turn joins the group of the newest call of its
    ID, or the group `unknown_call(call_id)` names for a call made before `group_of_call` was
    kept."""
    turns: list[dict[str, Any]] = []
    for index, (turn_id, spec) in enumerate(zip(ids, specs, strict=True)):
        group: str | None = None
        if spec.call_ids:
            group = tool_group(spec.call_ids, turn_id, group_of_call)
            group_of_call.update(dict.fromkeys(spec.call_ids, group))
        if spec.answers is not None:
            group = group_of_call.get(spec.answers)
            if group is None:
                group = unknown_call(spec.answers)
        meta = dict(spec.meta)
        if extra_meta is not None:
            meta.update(extra_meta[index])
        turns.append(
            {
                "id": turn_id,
                "role": spec.role,
                "body": spec.body,
                "group": group,
                "meta": meta or None,
            }
        )
    return turns
