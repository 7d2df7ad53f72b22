"""The rows of `memory_store.MemoryStore` (a second backend of the `Store` protocol, in
memory): its summary records, plans and conversations, and the input checks it makes itself
(ledgerfold's validation helpers are private)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import ledgerfold as lf

TURN_KEYS = ("id", "role", "body", "protected", "protection_reason", "group", "meta")


def now() -> str:
    return datetime.now(UTC).isoformat()


def bad(field_name: str, message: str, problem: str = "invalid") -> lf.InvalidInput:
    return lf.InvalidInput(f"{field_name}: {message}", field=field_name, problem=problem)


def text(field_name: str, value: object) -> str:
    if not isinstance(value, str):
        raise bad(field_name, f"must be str, got {type(value).__name__}", "wrong-type")
    if not value.strip():
        raise bad(field_name, "must not be blank", "blank")
    return value


def integer(field_name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise bad(field_name, f"must be an int >= {minimum}")
    return value


def flag(field_name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise bad(field_name, "must be bool", "wrong-type")
    return value


def call_ids(turn: lf.Turn) -> set[str]:
    raw = (turn.meta or {}).get("tool_calls")
    if turn.role != "assistant" or raw is None:
        return set()
    return {call["id"] for call in json.loads(raw)}


def check_tool_calls(field_name: str, meta: Mapping[str, str] | None) -> None:
    """SPEC §15.8 Writes: `tool_calls` is a JSON array of objects with a string `id`; no
    NaN/Infinity in any meta value that is JSON."""
    if not meta:
        return
    for key, value in meta.items():
        try:
            parsed = json.loads(value, parse_constant=_refuse_constant)
        except _NotFinite:
            raise bad(f"{field_name}.{key}", "NaN/Infinity in JSON") from None
        except (TypeError, ValueError):
            parsed = _NOT_JSON
        if key != "tool_calls":
            continue
        if (
            parsed is _NOT_JSON
            or not isinstance(parsed, list)
            or not all(isinstance(c, dict) and isinstance(c.get("id"), str) for c in parsed)
        ):
            raise bad(f"{field_name}.tool_calls", "must be an array of calls with a string id")


class _NotFinite(Exception):
    pass


_NOT_JSON = object()


def _refuse_constant(name: str) -> Any:
    raise _NotFinite(name)


@dataclass(frozen=True)
class Record:
    pk: int
    plan_id: str
    envelope: lf.SummaryEnvelope | None
    status: str
    reason: str | None
    created_at: str
    digests: tuple[tuple[str, bytes], ...] = ()  # the source index: (turn ID, digest)
    kept: tuple[str, ...] = ()  # preserved turns below the slot, for `preserved-missing`


@dataclass(frozen=True)
class Plan:
    plan: lf.CompactionPlan
    policy_version: str
    roles: tuple[str, ...]
    parent_id: str | None
    ended: bool = False


@dataclass
class Conversation:
    turns: dict[str, lf.Turn] = field(default_factory=dict)  # every turn ever written
    state: dict[str, str] = field(default_factory=dict)  # live / retracted / purged
    created: dict[str, datetime] = field(default_factory=dict)
    revision: int = 0
    high: int = 0
    history: list[Record] = field(default_factory=list)
    active: str | None = None
    boundary: lf.HistoryBoundary | None = None

    def live(self) -> list[lf.Turn]:
        turns = (t for i, t in self.turns.items() if self.state[i] == "live")
        return sorted(turns, key=lambda t: t.sequence)

    def load(self, cid: str) -> lf.Conversation:
        return lf.Conversation(cid, self.revision, self.live())

    def current(self) -> Record | None:
        return next((r for r in self.history if r.status == "current"), None)

    def pointed(self) -> Record | None:
        accepted = [r for r in self.history if r.status in ("current", "stale")]
        return accepted[-1] if accepted else None

    def sealed(self, record: Record) -> dict[str, bytes]:
        return {i: d for i, d in record.digests if self.state.get(i) == "purged"}

    def mark(self, record: Record, status: str, reason: str | None) -> None:
        self.history[self.history.index(record)] = replace(record, status=status, reason=reason)
