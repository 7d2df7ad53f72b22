"""Slow, deliberately simple pure-Python reference of SPEC v1 §3–§8.

This module is a differential oracle for the real ``ledgerfold`` package and must
never import it. Every function works on duck-typed turns (anything with ``id``,
``sequence``, ``role``, ``body``, ``protected``, ``protection_reason``, ``group``
and ``meta``) so the package's native ``Turn`` objects can be fed in directly.
Nothing is cached: every digest is recomputed from a fresh encoding, so a stale
cache in the package cannot hide behind the oracle.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import blake3

TURN_CONTEXT = "ledgerfold v1 turn"
FINGERPRINT_CONTEXT = "ledgerfold v1 fingerprint"
FINGERPRINT_PREFIX = "lf1:"

ROLE_CODES: dict[str, int] = {"system": 1, "user": 2, "assistant": 3, "tool": 4}
REASON_CODES: dict[str | None, int] = {
    None: 0,
    "pending-confirmation": 1,
    "active-constraint": 2,
    "audit-evidence": 3,
    "unverified-provenance": 4,
}


class TurnLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def sequence(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def protected(self) -> bool: ...
    @property
    def protection_reason(self) -> str | None: ...
    @property
    def group(self) -> str | None: ...
    @property
    def meta(self) -> Mapping[str, str] | None: ...


class SummaryLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def plan_id(self) -> str: ...
    @property
    def conversation_id(self) -> str: ...
    @property
    def source_revision(self) -> int: ...
    @property
    def source_ids(self) -> Sequence[str]: ...
    @property
    def source_fingerprint(self) -> str: ...
    @property
    def policy_version(self) -> str: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class RefTurn:
    """The reference's own turn value; no validation (the oracle trusts its inputs)."""

    id: str
    sequence: int
    role: str
    body: str
    protected: bool = False
    protection_reason: str | None = None
    group: str | None = None
    meta: Mapping[str, str] | None = None


# ("turn", id, role, body, sequence, meta) or ("summary", id, text, through_sequence, source_ids)
ContextItem = tuple[Any, ...]


# ---------------------------------------------------------------- §3 encoding


def _lp(text: str) -> bytes:
    raw = text.encode("utf-8")  # lone surrogates raise, as the spec makes them invalid
    return struct.pack("<Q", len(raw)) + raw


def encode_turn(t: TurnLike) -> bytes:
    """Canonical v1 encoding, field by field exactly as SPEC §3 lists them."""
    meta = dict(t.meta) if t.meta is not None else {}
    out = bytearray()
    out += _lp(t.id)
    out += struct.pack("<q", t.sequence)
    out += struct.pack("<B", ROLE_CODES[t.role])
    out += struct.pack("<B", 1 if t.protected else 0)
    out += struct.pack("<B", REASON_CODES[t.protection_reason])
    out += _lp(t.group if t.group is not None else "")
    out += struct.pack("<Q", len(meta))
    # Sorted by the UTF-8 bytes of the key (as the spec says); note this is not
    # UTF-16 order, which differs for astral vs. high-BMP characters.
    for key in sorted(meta, key=lambda k: k.encode("utf-8")):
        out += _lp(key)
        out += _lp(meta[key])
    out += _lp(t.body)
    return bytes(out)


def turn_digest(t: TurnLike) -> bytes:
    return blake3.blake3(encode_turn(t), derive_key_context=TURN_CONTEXT).digest()


def fingerprint_turns(turns: Iterable[TurnLike]) -> str:
    """Fingerprint over the turns in the order given (no sorting here)."""
    digests = [turn_digest(t) for t in turns]
    material = struct.pack("<Q", len(digests)) + b"".join(digests)
    return (
        FINGERPRINT_PREFIX
        + blake3.blake3(material, derive_key_context=FINGERPRINT_CONTEXT).hexdigest()
    )


def fingerprint_digests(digests: bytes) -> str:
    """Fingerprint over turn digests given back to back (32 bytes each)."""
    material = struct.pack("<Q", len(digests) // 32) + digests
    return (
        FINGERPRINT_PREFIX
        + blake3.blake3(material, derive_key_context=FINGERPRINT_CONTEXT).hexdigest()
    )


def same_ordered_ids(a: Sequence[str], b: Sequence[str]) -> bool:
    if len(a) != len(b):
        return False
    return all(x == y for x, y in zip(a, b, strict=True))


def _by_sequence(turns: Iterable[TurnLike]) -> list[TurnLike]:
    return sorted(turns, key=lambda t: t.sequence)


# ---------------------------------------------------------------- §4 planning


def _not_json(name: str) -> Any:
    raise ValueError(name)


def _parsed_calls(t: Any) -> list[str | None] | None:
    """The call IDs an assistant turn's `tool_calls` names; `[None]` when it is malformed
    (not an array of objects with a string id, NaN); None when it has none."""
    raw = (t.meta or {}).get("tool_calls") if t.role == "assistant" else None
    if raw is None:
        return None
    try:
        calls = json.loads(raw, parse_constant=_not_json)
        ids = [call["id"] for call in calls]
    except (ValueError, TypeError, KeyError, RecursionError):
        return [None]
    if not all(isinstance(call_id, str) and call_id for call_id in ids):
        return [None]
    return ids


def _maker_of(ordered: Sequence[Any], at: int) -> int | None:
    """§17.2's pairing, written out: the index of the call a tool turn answers, the last
    assistant turn before it naming its `tool_call_id`, else the first one after it."""
    t = ordered[at]
    call_id = (t.meta or {}).get("tool_call_id") if t.role == "tool" else None
    if call_id is None:
        return None
    before = [i for i in range(at) if call_id in _call_ids(ordered[i])]
    if before:
        return before[-1]
    after = [i for i in range(at + 1, len(ordered)) if call_id in _call_ids(ordered[i])]
    return after[0] if after else None


def _open_calls(ordered: list[Any]) -> set[str]:
    """§15.3: assistant turns whose `tool_calls` name a call no tool turn answers (a tool
    turn answers the call it is paired with); malformed `tool_calls` stays raw."""
    answered = {
        (maker, ordered[at].meta["tool_call_id"])
        for at in range(len(ordered))
        if (maker := _maker_of(ordered, at)) is not None
    }
    open_ids: set[str] = set()
    for at, t in enumerate(ordered):
        ids = _parsed_calls(t)
        if ids and any(call_id is None or (at, call_id) not in answered for call_id in ids):
            open_ids.add(t.id)
    return open_ids


def _call_ids(t: Any) -> set[str]:
    """The calls an assistant turn's `tool_calls` names (none when malformed)."""
    raw = (t.meta or {}).get("tool_calls") if t.role == "assistant" else None
    if raw is None:
        return set()
    try:
        calls = json.loads(raw)
        ids = [call["id"] for call in calls]
    except (ValueError, TypeError, KeyError, RecursionError):
        return set()
    if not all(isinstance(call_id, str) and call_id for call_id in ids):
        return set()
    return set(ids)


def units(ordered: Sequence[Any]) -> list[frozenset[str]]:
    """§17.2's compaction units, by brute force: start with one set per turn and merge any
    two sets holding turns that share a group, or a call and a tool turn answering it (the
    last assistant turn before the tool turn naming its `tool_call_id`, else the first
    after it), until nothing changes."""
    sets = [{t.id} for t in ordered]
    index = {t.id: at for at, t in enumerate(ordered)}
    makers = [_maker_of(ordered, at) for at in range(len(ordered))]

    def linked(a: int, b: int) -> bool:
        group = ordered[a].group
        return (
            (group is not None and group == ordered[b].group)
            or b in (makers[a],)
            or (a == makers[b])
        )

    merged = True
    while merged:
        merged = False
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                if any(linked(index[a], index[b]) for a in sets[i] for b in sets[j]):
                    sets[i] |= sets.pop(j)
                    merged = True
                    break
            if merged:
                break
    return [frozenset(unit) for unit in sets]


def unit_of(ordered: Sequence[Any]) -> dict[str, frozenset[str]]:
    return {turn_id: unit for unit in units(ordered) for turn_id in unit}


def plan_compaction(
    conv_id: str,
    revision: int,
    turns: Iterable[TurnLike],
    keep_tail: int,
    plan_id: str,
    preserve_roles: Iterable[str] = (),
) -> dict[str, Any]:
    ordered = _by_sequence(turns)
    split = max(len(ordered) - keep_tail, 0)
    prefix, tail = ordered[:split], ordered[split:]
    tail_ids = {t.id for t in tail}
    roles = set(preserve_roles)
    open_calls = _open_calls(ordered)

    def pinned(t: Any) -> bool:
        return bool(t.protected) or t.role in roles or t.id in open_calls

    # A unit (§17.2) is "pinned" when any member (anywhere in the ledger) is pinned or in
    # the tail.
    unit = unit_of(ordered)
    pinned_units = {unit[t.id] for t in ordered if pinned(t) or t.id in tail_ids}

    compacted: list[str] = []
    preserved: list[str] = []
    through = 0
    for t in prefix:
        if unit[t.id] not in pinned_units:
            compacted.append(t.id)
            through = t.sequence
        else:
            preserved.append(t.id)
    preserved.extend(t.id for t in tail)  # tail follows the prefix, so sequence order holds
    return {
        "plan_id": plan_id,
        "conversation_id": conv_id,
        "source_revision": revision,
        "compacted_ids": tuple(compacted),
        "preserved_ids": tuple(preserved),
        "through_sequence": through,
    }


# ---------------------------------------------------------------- §5 envelope


def create_summary_envelope(
    plan: Mapping[str, Any],
    turns: Iterable[TurnLike],
    summary_id: str,
    policy_version: str,
    text: str,
) -> dict[str, Any] | None:
    compacted: tuple[str, ...] = tuple(plan["compacted_ids"])
    if not compacted:
        return None
    stripped = text.strip()
    if not stripped:
        return None
    by_id = {t.id: t for t in turns}
    if any(cid not in by_id for cid in compacted):
        return None
    sources = _by_sequence(by_id[cid] for cid in compacted)
    return {
        "id": summary_id,
        "plan_id": plan["plan_id"],
        "conversation_id": plan["conversation_id"],
        "source_revision": plan["source_revision"],
        "source_ids": compacted,
        "source_fingerprint": fingerprint_turns(sources),
        "policy_version": policy_version,
        "text": stripped,
    }


# ---------------------------------------------------------------- §6 validity


def check_summary(
    summary: SummaryLike,
    conv_id: str,
    turns: Iterable[TurnLike],
    policy_version: str,
    sealed: Sequence[TurnLike] = (),
) -> tuple[bool, str | None, str | None]:
    """`sealed`: purged sources as they were (SPEC §15.5), checked like ledger turns but left
    out of the group-split test, which looks at the live ledger only. Sealed sources come
    first, then the live ones in sequence order: a turn kept raw below the purge boundary (a
    protected one) may join a sealed summary later, after its sealed sources (SPEC §17.5)."""
    live = list(turns)
    turn_list = [*sealed, *live]
    if summary.conversation_id != conv_id:
        return (False, "conversation-mismatch", None)
    if summary.policy_version != policy_version:
        return (False, "policy-mismatch", None)
    source_ids = list(summary.source_ids)
    if not source_ids:
        return (False, "empty-source", None)
    present = {t.id for t in turn_list}
    for sid in source_ids:
        if sid not in present:
            return (False, "source-missing", sid)
    wanted = set(source_ids)
    sealed_ids = {t.id for t in sealed}
    live_found = _by_sequence(t for t in live if t.id in wanted and t.id not in sealed_ids)
    by_sealed = {t.id: t for t in sealed}
    sealed_found = [by_sealed[sid] for sid in dict.fromkeys(source_ids) if sid in by_sealed]
    found = [*sealed_found, *live_found]
    found_ids = [t.id for t in found]
    if not same_ordered_ids(found_ids, source_ids):
        p = 0
        while p < min(len(found_ids), len(source_ids)) and found_ids[p] == source_ids[p]:
            p += 1
        # When one list is a prefix of the other, found_ids is the shorter one
        # (source_ids has a duplicate), so source_ids[p] exists.
        return (False, "source-reordered", source_ids[p])
    if fingerprint_turns(found) != summary.source_fingerprint:
        return (False, "source-modified", None)
    # §15.4, §17.2: a turn that is not a source shares a unit with a source (units of the
    # live ledger).
    ordered_live = _by_sequence(live)
    unit = unit_of(ordered_live)
    source_units = {unit[t.id] for t in ordered_live if t.id in wanted}
    for t in ordered_live:
        if t.id not in wanted and unit[t.id] in source_units:
            return (False, "group-split", t.id)
    return (True, None, None)


# ---------------------------------------------------------------- §7 accept


def accept_summary_result(
    candidate: SummaryLike | None,
    conv_id: str,
    turns: Iterable[TurnLike],
    policy_version: str,
    active_plan_id: str,
) -> tuple[bool, str | None, str | None]:
    if candidate is None:
        return (False, "invalid-summary", None)
    if candidate.plan_id != active_plan_id:
        return (False, "stale-source", "superseded-plan")
    current, reason, _ = check_summary(candidate, conv_id, turns, policy_version)
    if not current:
        return (False, "stale-source", reason)
    return (True, None, None)


# ---------------------------------------------------------------- §8 assemble


def turn_item(t: TurnLike) -> ContextItem:
    meta = dict(t.meta) if t.meta is not None else None
    return ("turn", t.id, t.role, t.body, t.sequence, meta)


def assemble_context(
    conv_id: str,
    turns: Iterable[TurnLike],
    summary: SummaryLike | None,
    policy_version: str,
    preserved_ids: Sequence[str] | None = None,
    sealed: Sequence[TurnLike] = (),
) -> tuple[list[ContextItem], str | None, str | None]:
    ordered = _by_sequence(turns)
    raw = [turn_item(t) for t in ordered]
    if summary is None:
        return (raw, "no-summary", None)
    current, reason, bad_id = check_summary(summary, conv_id, ordered, policy_version, sealed)
    if not current:
        return (raw, f"stale-summary:{reason}", bad_id)
    ids = {t.id for t in ordered}
    if preserved_ids is not None:
        for pid in preserved_ids:
            if pid not in ids:
                return (raw, "preserved-missing", pid)
    if summary.id in ids:
        return (raw, "duplicate-id", summary.id)

    sources = set(summary.source_ids)
    through = max(t.sequence for t in [*sealed, *ordered] if t.id in sources)
    summary_tuple: ContextItem = (
        "summary",
        summary.id,
        summary.text,
        through,
        tuple(summary.source_ids),
    )
    items: list[ContextItem] = [
        turn_item(t) for t in ordered if t.id not in sources and t.sequence < through
    ]
    items.append(summary_tuple)
    items.extend(turn_item(t) for t in ordered if t.id not in sources and t.sequence > through)
    return (items, None, None)


# ---------------------------------------------------------------- §17.2 chat sequences


def valid_tool_sequence(messages: Sequence[Mapping[str, Any]]) -> bool:
    """What a chat-completions provider accepts of tool calls: every tool message answers,
    once, a call of the assistant message that opened its block (only tool messages between
    them), and every assistant message with `tool_calls` but the last has all its results
    before the next message that is not one of them."""
    calls: set[str] | None = None
    answered: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if calls is None or call_id not in calls or call_id in answered:
                return False
            answered.add(call_id)
            continue
        if calls is not None and answered != calls:
            return False
        calls, answered = None, set()
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = {call["id"] for call in message["tool_calls"]}
    return True
