"""SPEC §17.2's chat rule as `AssembledContext.dropped` and the chat adapter apply it: the
native rule (`_native.unsendable`, `unsendable_count`) against a plain Python statement of
it, on random contexts of calls, results, orphans and summaries, as tuples and as lists."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, note, settings
from hypothesis import strategies as st

from ledgerfold import (
    AssembledContext,
    Conversation,
    SummaryItem,
    Turn,
    TurnItem,
    _native,
    assemble_context,
    create_summary_envelope,
    plan_compaction,
)

CALLS = ["a", "b", "c"]


def reference_unsendable(items: list[Any]) -> list[int]:
    """A tool message not answering, once, a call of the open block goes; an assistant
    message whose calls are not all answered before the next other message goes with the
    answers it got (a block still open at the end stays)."""
    dropped: list[int] = []
    block: tuple[int, set[str], list[int], set[str]] | None = None
    for at, item in enumerate(items):
        role = item.role if isinstance(item, TurnItem) else "summary"
        meta = (item.meta or {}) if isinstance(item, TurnItem) else {}
        if role == "tool":
            call = meta.get("tool_call_id")
            if block is not None and call in block[1] and call not in block[3]:
                block[3].add(call)
                block[2].append(at)
            else:
                dropped.append(at)
            continue
        if block is not None and block[3] != block[1]:
            dropped += [block[0], *block[2]]
        block = None
        calls: set[str] = set()
        if role == "assistant" and "tool_calls" in meta:
            try:
                parsed = json.loads(meta["tool_calls"])
                calls = {call["id"] for call in parsed}
            except (ValueError, TypeError, KeyError):
                calls = set()
        if calls:
            block = (at, calls, [], set())
    return sorted(dropped)


def _role_and_meta(draw: st.DrawFn, kind: str) -> tuple[str, dict[str, str] | None]:
    """A call (zero to two call IDs), a result answering one, an orphan tool turn naming
    none, a plain assistant turn or a user turn."""
    if kind == "call":
        ids = draw(st.lists(st.sampled_from(CALLS), min_size=0, max_size=2, unique=True))
        return "assistant", {"tool_calls": json.dumps([{"id": i, "type": "function"} for i in ids])}
    if kind == "result":
        return "tool", {"tool_call_id": draw(st.sampled_from(CALLS))}
    return {"plain": "assistant", "orphan": "tool"}.get(kind, "user"), None


@st.composite
def contexts(draw: st.DrawFn) -> list[Any]:
    items: list[Any] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "call", "result", "orphan", "plain", "summary"]))
        if kind == "summary":
            items.append(SummaryItem(f"s{n}", "summary", n, ()))
            continue
        role, meta = _role_and_meta(draw, kind)
        items.append(TurnItem(f"t{n}", role, f"body {n}", n + 1, meta))
    return items


@settings(max_examples=300, deadline=None)
@given(contexts())
def test_the_native_rule_is_the_reference(items: list[Any]) -> None:
    expected = reference_unsendable(items)
    assert _native.unsendable(tuple(items)) == expected
    assert _native.unsendable(items) == expected
    assert _native.unsendable_count(tuple(items)) == len(expected)
    assert AssembledContext(tuple(items)).dropped == len(expected)


@st.composite
def ledgers(draw: st.DrawFn) -> Conversation:
    turns: list[Turn] = []
    for n in range(draw(st.integers(0, 16))):
        kind = draw(st.sampled_from(["user", "call", "result", "orphan", "plain"]))
        role, meta = _role_and_meta(draw, kind)
        # A protected turn stays raw below the summary's slot, so the slot falls between
        # turns (where it closes an open block).
        protected = kind == "user" and draw(st.booleans())
        turns.append(
            Turn(
                f"t{n}",
                n + 1,
                role,
                f"body {n}",
                protected=protected,
                protection_reason="active-constraint" if protected else None,
                meta=meta,
            )
        )
    return Conversation("c", 1, turns)


@settings(max_examples=300, deadline=None)
@given(ledgers(), st.integers(1, 6), st.booleans())
def test_assembly_counts_dropped_by_the_same_rule(
    conversation: Conversation, keep_tail: int, summarised: bool
) -> None:
    """`assemble_context` counts `dropped` while it builds the items (from the ledger's
    turns, the summary a plain item at its slot): the count the items themselves give."""
    envelope = None
    if summarised:
        plan = plan_compaction(conversation, keep_tail, "p1")
        envelope = create_summary_envelope(plan, conversation, "s1", "v", "summary")
    context = assemble_context(conversation, envelope, "v")
    note(f"fallback={context.fallback} ids={context.ids}")
    expected = reference_unsendable(list(context.items))
    assert context.dropped == len(expected) == AssembledContext(context.items).dropped
