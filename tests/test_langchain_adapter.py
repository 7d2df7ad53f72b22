"""The LangChain adapter over `langchain_core`'s own converters: real transcripts round-trip,
and each case the converters lose (kept by hand in `ledgerfold.adapters._langchain`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from ledgerfold import Conversation, InvalidInput, Turn, assemble_context, from_chat_messages
from ledgerfold._transcripts import load_transcripts
from ledgerfold.adapters import from_langchain_messages, to_langchain_messages
from ledgerfold.adapters._langchain import chat_messages

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
SECRET = "the launch code is 0000"


def context_of(turns: list[Turn]) -> Any:
    return assemble_context(Conversation("c", 0, turns), None, "v1")


def calls_of(turn: Turn) -> list[dict[str, Any]] | None:
    """A turn's tool calls with parsed arguments: LangChain keeps `args` as a dict, so the
    arguments text comes back in `json.dumps` spacing (the same JSON value)."""
    raw = (turn.meta or {}).get("tool_calls")
    if raw is None:
        return None
    calls: list[dict[str, Any]] = json.loads(raw)
    for call in calls:
        call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return calls


def fields(turn: Turn) -> tuple[Any, ...]:
    meta = turn.meta or {}
    return (turn.role, turn.body, turn.group, calls_of(turn), meta.get("tool_call_id"))


@pytest.mark.parametrize("name", ["tau_bench", "openhands", "docent_inspect", "swe_agent"])
def test_real_transcripts_round_trip_through_langchain(name: str) -> None:
    transcripts = load_transcripts(SHARED / "transcripts" / f"{name}.jsonl")
    tool_turns = 0
    for transcript in transcripts:
        turns = list(transcript.turns)
        back = from_langchain_messages(to_langchain_messages(context_of(turns)))
        assert [fields(turn) for turn in back] == [fields(turn) for turn in turns]
        tool_turns += sum(1 for turn in turns if turn.role == "tool")
        # And once more: the ledger's own form is a fixed point.
        again = from_langchain_messages(to_langchain_messages(context_of(back)))
        assert [(t.meta, t.group) for t in again] == [(t.meta, t.group) for t in back]
    assert tool_turns > 0


def test_a_stored_call_langchain_cannot_parse_becomes_an_invalid_tool_call() -> None:
    # convert_to_messages raises on each of these; the context must still convert.
    def call(call_id: str, function: Any) -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": function}

    calls = [
        call("c1", {"name": "ok", "arguments": '{"q": 1}'}),
        call("c2", {"name": "f", "arguments": "{not json"}),
        call("c3", {"name": "f", "arguments": "[1, 2]"}),  # JSON, not an object
        call("c4", {"arguments": "{}"}),  # no name
        call("c5", "not a mapping"),
    ]
    # As a store may hold them: `append` asks a call for its id only (the chat adapter
    # refuses a `function` that is not a mapping).
    turns = [Turn("a1", 1, "assistant", "", meta={"tool_calls": json.dumps(calls)})]
    (ai,) = to_langchain_messages(context_of(turns))
    assert isinstance(ai, AIMessage)
    assert [(c["id"], c["args"]) for c in ai.tool_calls] == [("c1", {"q": 1})]
    assert [(c["id"], c["name"], c["args"]) for c in ai.invalid_tool_calls] == [
        ("c2", "f", "{not json"),
        ("c3", "f", "[1, 2]"),
        ("c4", None, "{}"),
        ("c5", None, None),
    ]
    # Back in the ledger every call keeps its id, so the group and results stay together.
    (turn,) = from_langchain_messages([ai])
    assert [c["id"] for c in json.loads((turn.meta or {})["tool_calls"])] == [
        "c1",
        "c2",
        "c3",
        "c4",
        "c5",
    ]
    assert turn.group == "tools:c1"


def test_invalid_tool_calls_come_back_with_their_raw_text() -> None:
    # convert_to_openai_messages drops invalid_tool_calls.
    bad = {"type": "invalid_tool_call", "id": "c9", "name": "f", "args": "{no", "error": "x"}
    good = {"type": "tool_call", "id": "c1", "name": "g", "args": {"a": "ü"}}
    (turn,) = from_langchain_messages(
        [AIMessage(content="", tool_calls=[good], invalid_tool_calls=[bad])]
    )
    assert json.loads((turn.meta or {})["tool_calls"]) == [
        {"id": "c1", "type": "function", "function": {"name": "g", "arguments": '{"a": "ü"}'}},
        {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{no"}},
    ]


def test_a_tool_turn_answering_no_call_round_trips() -> None:
    # LangChain's ToolMessage needs a tool_call_id (convert_to_messages raises KeyError
    # without one); the ledger does not, and refuses an empty one.
    turns = from_chat_messages([{"role": "tool", "content": "orphan output"}])
    # Sent, it would be a tool message without its call: it stays in the ledger and the
    # context, but not in the messages (SPEC §17.2).
    context = context_of(turns)
    assert to_langchain_messages(context) == [] and context.dropped == 1
    tool = ToolMessage(content="orphan output", tool_call_id="")
    (back,) = from_langchain_messages([tool])
    assert (back.role, back.body, back.meta, back.group) == ("tool", "orphan output", None, None)


def test_a_message_langchain_splits_keeps_its_id_on_the_first_part() -> None:
    # An Anthropic-style tool_result block becomes a tool message without the message's id;
    # the id is what lets the middleware append a message once.
    block = {"type": "tool_result", "tool_use_id": "c1", "content": "42"}
    human = HumanMessage(content=[block], id="h1")
    (turn,) = from_langchain_messages([human])
    assert (turn.id, turn.role, turn.body) == ("h1", "tool", "42")
    assert (turn.meta or {})["tool_call_id"] == "c1"


def test_text_blocks_ids_and_the_developer_role() -> None:
    # text_format="string" would join text blocks with newlines; convert_to_messages makes a
    # developer message a SystemMessage marked `__openai_role__` (it was a ChatMessage).
    messages = [
        HumanMessage(content=["a", {"type": "text", "text": "b"}], id="h1"),
        SystemMessage(content="rules", additional_kwargs={"__openai_role__": "developer"}),
    ]
    human, developer = from_langchain_messages(messages)
    assert (human.id, human.body) == ("h1", "ab")
    assert (developer.role, (developer.meta or {})["chat_role"]) == ("system", "developer")
    (back,) = to_langchain_messages(context_of([developer]))
    assert isinstance(back, SystemMessage)
    assert chat_messages([back]) == [
        {"role": "developer", "content": [{"type": "text", "text": "rules"}]}
    ]


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage(content=[{"type": "text", "secret": SECRET}]),  # LangChain quotes the block
        AIMessage(content=SECRET, tool_calls=[{"id": "c1", "name": "f", "args": {"d": object()}}]),
        RemoveMessage(id="r1"),
    ],
    ids=["bad-block", "args-not-json", "unknown-kind"],
)
def test_what_langchain_cannot_convert_is_invalid_input_naming_the_message(message: Any) -> None:
    with pytest.raises(
        InvalidInput, match=r"^messages\[1\]: langchain_core cannot convert"
    ) as error:
        chat_messages([HumanMessage(content="fine"), message])
    assert error.value.field == "messages[1]"
    assert SECRET not in str(error.value)
    assert "0000" not in str(error.value)
