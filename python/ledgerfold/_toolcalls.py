"""Tool calls in `meta` (SPEC §15.3, §15.8): `tool_calls` on assistant turns is JSON text of
an array of objects each with a string `id`; `tool_call_id` on a tool turn names the call it
answers. Writes refuse anything else, so planning and adapters can rely on the shape.

Compaction units (SPEC §17.2) are defined once, in the Rust core (`unit_roots`): turns
sharing a `group`, and an assistant turn whose `tool_calls` names a call together with every
tool turn answering it, merged transitively. A result answers the nearest call of its ID
before it (else, stored before its call, the first one after it): a model that numbers its
calls `call_0`, `call_1`, … in every response gets each result paired with its own call, as
a chat request pairs them. Planning, the `group-split` check, folding and purging all use
it, and open calls (`open_call_turns`) follow the same pairing."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold import _native
from ledgerfold._errors import InvalidInput
from ledgerfold._native import Turn

__all__ = ["check_meta", "open_call_turns", "tool_call_ids", "unit_roots", "units"]


def unit_roots(turns: Sequence[Turn]) -> list[int]:
    """For each turn (in the order given), the index of the first turn of its compaction
    unit (SPEC §17.2): two turns are in one unit exactly when their numbers are equal."""
    return _native.unit_roots(turns)


def units(turns: Sequence[Turn]) -> list[list[Turn]]:
    """The compaction units of `turns`, each in the order given, ordered by first member."""
    members: dict[int, list[Turn]] = {}
    for turn, root in zip(turns, unit_roots(turns), strict=True):
        members.setdefault(root, []).append(turn)
    return list(members.values())


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


def check_meta(meta: Mapping[str, str] | None, field: str = "meta") -> None:
    """Refuse `tool_calls` that is not a JSON array of objects each with a string `id`,
    NaN/Infinity anywhere in it, and a `tool_call_id` that is blank (`InvalidInput`)."""
    if not meta or not isinstance(meta, Mapping):
        return  # no meta, or not a mapping: the `Turn` constructor names that problem
    raw = meta.get("tool_calls")
    if isinstance(raw, str):
        tool_call_ids(raw, field=f"{field}.tool_calls")
    call_id = meta.get("tool_call_id")
    if isinstance(call_id, str) and not call_id.strip():
        raise InvalidInput(
            f"{field}.tool_call_id: must not be blank",
            field=f"{field}.tool_call_id",
            problem="empty",
        )


def tool_call_ids(raw: str, *, field: str = "meta.tool_calls") -> tuple[str, ...]:
    """The call IDs of a `tool_calls` JSON text, in order; `InvalidInput` when the text is
    not a JSON array of objects each with a non-empty string `id`, or holds NaN/Infinity."""
    try:
        calls = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise InvalidInput(
            f"{field}: must be JSON text of an array of calls", field=field, problem="wrong-type"
        ) from None
    if not isinstance(calls, list):
        raise InvalidInput(f"{field}: must be a JSON array", field=field, problem="wrong-type")
    ids: list[str] = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            raise InvalidInput(
                f"{field}[{index}]: must be an object", field=field, problem="wrong-type"
            )
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInput(
                f"{field}[{index}].id: must be a non-empty string",
                field=f"{field}[{index}].id",
                problem="wrong-type",
            )
        if not _finite(call):
            raise InvalidInput(
                f"{field}[{index}]: NaN and Infinity are not JSON",
                field=field,
                problem="out-of-range",
            )
        ids.append(call_id)
    return tuple(ids)


def open_call_turns(turns: Iterable[Turn]) -> set[str]:
    """IDs of the assistant turns (among `turns`, in sequence order) whose `tool_calls` name a
    call no tool turn answers (SPEC §15.3: their group stays raw until every call is
    answered). A result answers the nearest call of its ID before it, as the unit rule pairs
    them (`_native.open_calls`), so a call ID used again is open until its own result comes;
    `tool_calls` stored before writes were checked keeps its turn raw."""
    turns = turns if isinstance(turns, (Sequence, _native.Conversation)) else list(turns)
    ordered = turns.turns if isinstance(turns, _native.Conversation) else turns
    return {ordered[at].id for at in _native.open_calls(turns)}
