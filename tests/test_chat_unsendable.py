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
    to_chat_messages,
)
from ledgerfold.adapters import to_langchain_messages

CALLS = ["a", "b", "c"]


def _calls(item: Any) -> list[str]:
    meta = (item.meta or {}) if isinstance(item, TurnItem) else {}
    if not isinstance(item, TurnItem) or item.role != "assistant" or "tool_calls" not in meta:
        return []
    try:
        return [call["id"] for call in json.loads(meta["tool_calls"])]
    except (ValueError, TypeError, KeyError):
        return []


def reference_order(items: list[Any]) -> tuple[list[int], list[int]]:
    """(sent, dropped): a tool message answers the nearest earlier call of its ID, once, and
    is sent right after that call's message; an assistant message with a call left
    unanswered goes with the answers it got, unless it is the last message that is not a
    tool message (its results may be on their way); a tool message answering nothing goes."""
    maker: dict[str, int] = {}
    answers: dict[int, dict[str, int]] = {}
    last_other: int | None = None
    orphans: list[int] = []
    for at, item in enumerate(items):
        if isinstance(item, TurnItem) and item.role == "tool":
            call = (item.meta or {}).get("tool_call_id")
            block = maker.get(call) if call is not None else None
            if block is None or call in answers[block]:
                orphans.append(at)
            else:
                answers[block][call] = at
            continue
        last_other = at
        calls = _calls(item)
        if calls:
            answers[at] = {}
            maker.update(dict.fromkeys(calls, at))
    dropped = list(orphans)
    for block, got in answers.items():
        if set(got) != set(_calls(items[block])) and block != last_other:
            dropped += [block, *got.values()]
    moved = {at for block, got in answers.items() for at in got.values()}
    sent: list[int] = []
    for at in range(len(items)):
        if at in dropped or at in moved:
            continue
        sent.append(at)
        if at in answers:
            sent += sorted(answers[at].values())
    return sent, sorted(dropped)


def reference_unsendable(items: list[Any]) -> list[int]:
    return reference_order(items)[1]


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
    sent, expected = reference_order(items)
    order = _native.chat_order(tuple(items))
    assert (list(range(len(items))) if order is None else order) == sent
    assert _native.chat_order(items) == order
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


def _call(turn_id: str, sequence: int, *call_ids: str) -> Turn:
    calls = [
        {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for c in call_ids
    ]
    return Turn(turn_id, sequence, "assistant", "", meta={"tool_calls": json.dumps(calls)})


def _result(turn_id: str, sequence: int, call_id: str) -> Turn:
    return Turn(turn_id, sequence, "tool", f"result of {call_id}", meta={"tool_call_id": call_id})


def test_a_user_interjecting_before_the_result_loses_nothing() -> None:
    """A user speaks while the tool runs (call, user, result): the call and its result
    both reach the model, the result right after its call (OpenAI answers a `tool_calls`
    message only with the tool messages right after it), the user's message after them."""
    conversation = Conversation(
        "c",
        1,
        [
            Turn("t1", 1, "user", "book a flight"),
            _call("t2", 2, "c1", "c2"),
            _result("t3", 3, "c1"),
            Turn("t4", 4, "user", "and a hotel, please"),
            _result("t5", 5, "c2"),
            Turn("t6", 6, "assistant", "done"),
        ],
    )
    context = assemble_context(conversation, None, "v")
    assert context.dropped == 0
    messages = to_chat_messages(context)
    assert [(m["role"], m.get("tool_call_id")) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
        ("assistant", None),
    ]
    assert [m["content"] for m in messages][4] == "and a hotel, please"
    # The LangChain converter sends the same order.
    langchain = to_langchain_messages(context)
    assert [type(m).__name__ for m in langchain] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "HumanMessage",
        "AIMessage",
    ]


def test_results_that_never_came_still_drop_the_call() -> None:
    """SPEC §17.2: a call whose result is missing while later messages follow is left out
    (counted in `dropped`); the one result it got goes with it."""
    conversation = Conversation(
        "c",
        1,
        [_call("t1", 1, "c1", "c2"), Turn("t2", 2, "user", "hello"), _result("t3", 3, "c1")],
    )
    context = assemble_context(conversation, None, "v")
    assert context.dropped == 2
    assert to_chat_messages(context) == [{"role": "user", "content": "hello"}]
