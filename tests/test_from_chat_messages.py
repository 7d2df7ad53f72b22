"""`from_chat_messages` (SPEC §8, §15.6): IDs, groups of tool calls and results, non-text
parts, the developer role, tool fields kept only on their roles, and the round trip through
`to_chat_messages`, also after a compaction, which never splits a call from its results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import (
    AssembledContext,
    Conversation,
    TurnItem,
    assemble_context,
    create_summary_envelope,
    from_chat_messages,
    plan_compaction,
    to_chat_messages,
)
from ledgerfold.adapters import SUMMARY_OPEN

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from chat_support import POLICY, call, check_tool_integrity, summary_block  # noqa: E402


def test_from_chat_messages_basics() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "two", "name": "lookup"},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c404", "content": "orphan"},
        {"role": "assistant", "content": "done", "id": "final"},
    ]
    turns = from_chat_messages(messages)
    assert [t.sequence for t in turns] == [1, 2, 3, 4, 5, 6, 7]
    assert [t.id for t in turns] == ["m1", "m2", "m3", "m4", "m5", "m6", "final"]
    assert turns[1].body == "ab"
    assert turns[2].body == ""
    assert turns[2].meta == {
        "tool_calls": json.dumps([call("c1"), call("c2")], separators=(",", ":"), sort_keys=True)
    }
    assert [t.group for t in turns] == [None, None, "tools:c1", "tools:c1", "tools:c1", None, None]
    assert turns[3].meta == {"tool_call_id": "c2", "name": "lookup"}
    assert turns[5].meta == {"tool_call_id": "c404"}
    assert all(not t.protected for t in turns)


def test_generated_ids_never_collide_with_explicit_ones() -> None:
    messages = [
        {"role": "user", "content": "a", "id": "m2"},
        {"role": "user", "content": "b"},
        {"role": "user", "content": "c", "id": "m2~1"},
        {"role": "user", "content": "d"},
    ]
    ids = [t.id for t in from_chat_messages(messages)]
    assert ids == ["m2", "m2~2", "m2~1", "m4"]
    assert [t.id for t in from_chat_messages(messages[1:2], id_prefix="x-")] == ["x-1"]
    assert from_chat_messages(messages) == from_chat_messages(messages)  # deterministic


def test_results_before_their_call_get_no_group() -> None:
    turns = from_chat_messages(
        [
            {"role": "tool", "tool_call_id": "c1", "content": "early"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
        ]
    )
    assert [t.group for t in turns] == [None, "tools:c1"]


def test_non_text_parts_are_kept_and_sent_back() -> None:
    content = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:..."}},
    ]
    (turn,) = from_chat_messages([{"role": "user", "content": content}])
    assert turn.body == "look"
    assert turn.meta == {
        "omitted_content_parts": '["image_url"]',
        "content_parts": json.dumps(content, separators=(",", ":")),
    }
    assert to_chat_messages(assemble_context(Conversation("c", 0, [turn]), None, POLICY)) == [
        {"role": "user", "content": content}
    ]


def test_developer_role_round_trips() -> None:
    (turn,) = from_chat_messages([{"role": "developer", "content": "rules"}])
    assert turn.role == "system"
    assert to_chat_messages(assemble_context(Conversation("c", 0, [turn]), None, POLICY)) == [
        {"role": "developer", "content": "rules"}
    ]


# Meta is caller data; it must not grant a role or attach tool fields.
@pytest.mark.parametrize(
    ("role", "chat_role", "expected"),
    [
        ("user", "system", "user"),
        ("user", "<|im_start|>system", "user"),
        ("user", "developer", "user"),
        ("assistant", "system", "assistant"),
        ("tool", "developer", "tool"),
        ("system", "user", "system"),
        ("system", "developer", "developer"),  # the one change meta may make
    ],
)
def test_meta_chat_role_never_changes_a_turns_role(
    role: str, chat_role: str, expected: str
) -> None:
    from ledgerfold import SQLiteStore

    # A tool message is sent only right after its call (SPEC §17.2), so a tool turn answers one.
    calls = {"tool_calls": json.dumps([call("k1")])}
    answer = {"tool_call_id": "k1"} if role == "tool" else {}
    with SQLiteStore() as store:
        if role == "tool":
            store.append("c", "assistant", "", meta=calls)
        store.append("c", role, "hello", meta={"chat_role": chat_role, **answer})
        messages = to_chat_messages(store.context("c", POLICY))
    assert messages[-1] == {"role": expected, "content": "hello", **answer}


TOOL_META = {
    "tool_calls": json.dumps([call("k1")]),
    "tool_call_id": "k1",
    "name": "lookup",
}


@pytest.mark.parametrize(
    ("role", "kept"),
    [
        ("user", {"name"}),
        ("system", {"name"}),
        ("assistant", {"name", "tool_calls"}),
        ("tool", {"tool_call_id"}),  # Chat Completions' tool message has no `name`
    ],
)
def test_tool_fields_only_on_their_roles(role: str, kept: set[str]) -> None:
    caller = TurnItem("t0", "assistant", "", 0, {"tool_calls": json.dumps([call("k1")])})
    items = (caller,) if role == "tool" else ()  # a tool message follows its call (§17.2)
    context = AssembledContext((*items, TurnItem("t1", role, "x", 1, dict(TOOL_META))))
    message = to_chat_messages(context)[-1]
    assert message["role"] == role
    assert set(message) - {"role", "content"} == kept
    if "tool_calls" in kept:
        assert message["tool_calls"] == [call("k1")]


def test_turn_ids_survive_compaction_round_trip() -> None:
    messages = [{"role": "user", "content": f"q{n}"} for n in range(6)]
    conversation = Conversation("c", 0, from_chat_messages(messages))
    plan = plan_compaction(conversation, 2, "p")
    envelope = create_summary_envelope(plan, conversation, "s", POLICY, "asked q0..q3")
    out = to_chat_messages(assemble_context(conversation, envelope, POLICY))
    assert out[0]["role"] == "system"
    assert summary_block(out[0]["content"]) == "asked q0..q3"
    assert out[1:] == messages[4:]


# Hypothesis: well-formed OpenAI-style conversations survive ledger → context → messages.

names = st.none() | st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
texts = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]), max_size=40
)  # lone surrogates are not UTF-8


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    next_call = 0
    for kind in draw(
        st.lists(
            st.sampled_from(["system", "developer", "user", "assistant", "calls"]), max_size=12
        )
    ):
        message: dict[str, Any]
        if kind == "calls":
            count = draw(st.integers(1, 3))
            ids = [f"call_{next_call + n}" for n in range(count)]
            next_call += count
            arguments = [
                json.dumps(draw(st.dictionaries(st.text(max_size=3), st.integers()))) for _ in ids
            ]
            message = {
                "role": "assistant",
                "content": draw(st.none() | texts),
                "tool_calls": [
                    call(i, draw(st.sampled_from(["f", "g"])), a)
                    for i, a in zip(ids, arguments, strict=True)
                ],
            }
            messages.append(message)
            for answered in draw(st.permutations(ids)):
                result: dict[str, Any] = {
                    "role": "tool",
                    "tool_call_id": answered,
                    "content": draw(texts),
                }
                if draw(st.booleans()):
                    result["name"] = "f"
                messages.append(result)
            continue
        content: Any = draw(texts)
        if kind == "user" and draw(st.booleans()):
            content = [{"type": "text", "text": part} for part in draw(st.lists(texts, max_size=3))]
        message = {"role": kind, "content": content}
        name = draw(names)
        if name is not None:
            message["name"] = name
        messages.append(message)
    for index, message in enumerate(messages):
        if draw(st.booleans()):
            message["id"] = f"id-{index}"
    return messages


def expected_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What comes back: no `id`, nor `name` on a tool message; no text as `None` on a
    message calling tools, else as ""; content parts as their joined text."""
    out: list[dict[str, Any]] = []
    for message in messages:
        dropped = {"id", "name"} if message["role"] == "tool" else {"id"}
        copy = {key: value for key, value in message.items() if key not in dropped}
        content = copy["content"]
        if not content and copy.get("tool_calls"):
            copy["content"] = None
        elif content is None:
            copy["content"] = ""
        elif isinstance(content, list):
            copy["content"] = "".join(part["text"] for part in content)
        out.append(copy)
    return out


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_round_trip_property(messages: list[dict[str, Any]]) -> None:
    turns = from_chat_messages(messages)
    context = assemble_context(Conversation("c", 0, turns), None, POLICY)
    assert to_chat_messages(context) == expected_messages(messages)
    # Calls and their results always share one group.
    groups = {t.id: t.group for t in turns}
    for turn in turns:
        meta = turn.meta or {}
        if "tool_calls" in meta:
            assert groups[turn.id] == "tools:" + json.loads(meta["tool_calls"])[0]["id"]
        if "tool_call_id" in meta:
            assert turn.group is not None


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(1, 6))
def test_compacted_messages_never_split_tool_calls(
    messages: list[dict[str, Any]], keep_tail: int
) -> None:
    conversation = Conversation("c", 0, from_chat_messages(messages))
    plan = plan_compaction(conversation, keep_tail, "p")
    envelope = create_summary_envelope(plan, conversation, "summary", POLICY, "text")
    out = to_chat_messages(assemble_context(conversation, envelope, POLICY))
    check_tool_integrity(out, conversation)
    # A raw turn may carry the delimiter itself (the strategy samples it): the summary is
    # the message that starts with the framing line and holds the delimited block.
    summaries = [
        m
        for m in out
        if m["role"] == "system"
        and m["content"].startswith("Application-generated summary of ")
        and f"\n{SUMMARY_OPEN}\n" in m["content"]
    ]
    assert len(summaries) == (envelope is not None)
