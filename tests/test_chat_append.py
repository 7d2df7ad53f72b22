"""`SQLiteStore.append_chat_messages` (SPEC §15.6, §15.8) and the five-line chat loop over a
real tau-bench transcript, with tool results arriving in a later call than their calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    DuplicateId,
    InvalidInput,
    SQLiteStore,
    from_chat_messages,
    to_chat_messages,
)
from ledgerfold._context import SummaryItem
from ledgerfold._toolcalls import unit_roots
from ledgerfold._transcripts import load_transcripts

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA = SHARED / "transcripts"


def _messages_of(conversation_id: str) -> list[dict[str, Any]]:
    """OpenAI-style messages (with IDs) of one real transcript."""
    (transcript,) = [
        t
        for t in load_transcripts(DATA / "tau_bench.jsonl")
        if t.conversation_id == conversation_id
    ]
    messages: list[dict[str, Any]] = []
    for turn in transcript.turns:
        message: dict[str, Any] = {"id": turn.id, "role": turn.role, "content": turn.body}
        meta = turn.meta or {}
        if "tool_calls" in meta:
            message["tool_calls"] = json.loads(meta["tool_calls"])
        if "tool_call_id" in meta:
            message["tool_call_id"] = meta["tool_call_id"]
        messages.append(message)
    return messages


def _batches(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Cut after every assistant message that calls tools: each result comes a call later."""
    batches: list[list[dict[str, Any]]] = [[]]
    for message in messages:
        batches[-1].append(message)
        if message.get("tool_calls"):
            batches.append([])
    return [batch for batch in batches if batch]


def _check_pairs(messages: list[dict[str, Any]]) -> None:
    """Every tool message answers a call made by an earlier assistant message."""
    made: set[str] = set()
    for message in messages:
        for call in message.get("tool_calls", []):
            made.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in made


TAU = "tau-bench/gpt-4o-airline/task2/trial1"


def test_five_line_loop_over_a_real_transcript() -> None:
    messages = _messages_of(TAU)
    batches = _batches(messages)
    late = sum(1 for batch in batches if batch[0]["role"] == "tool")
    assert late >= 3  # the transcript really has results arriving a call later
    store = SQLiteStore()
    policy = CompactionPolicy("v1", keep_tail=4, trigger_tokens=1500, min_new_turns=4)
    compactor = Compactor(store, policy)
    outcomes = []
    sent: list[dict[str, Any]] = []
    for new in batches:
        # The loop an agent runs: append the new messages, compact when due, send.
        store.append_chat_messages("c", new)
        if compactor.is_due("c"):
            outcomes.append(compactor.compact("c"))
        sent = to_chat_messages(compactor.context("c"))
        _check_pairs(sent)
        json.dumps(sent, allow_nan=False)
    assert any(outcome.accepted for outcome in outcomes)
    assert sent[0]["role"] == "system"  # the system prompt stays raw
    assert any(isinstance(item, SummaryItem) for item in compactor.context("c").items)

    turns = {turn.id: turn for turn in store.load("c").turns}
    assert [turn.id for turn in store.load("c").turns] == [m["id"] for m in messages]
    for message in messages:
        if message["role"] == "tool":
            call_id = message["tool_call_id"]
            (caller,) = [
                m for m in messages if call_id in {c["id"] for c in m.get("tool_calls", [])}
            ]
            group = turns[message["id"]].group
            assert group is not None
            assert group == turns[caller["id"]].group


def test_late_tool_result_joins_the_stored_call_group() -> None:
    store = SQLiteStore()
    call = {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    (assistant,) = store.append_chat_messages(
        "c", [{"role": "assistant", "content": None, "tool_calls": [call]}]
    )
    assert assistant.group == "tools:call-1"
    (result,) = store.append_chat_messages(
        "c", [{"role": "tool", "tool_call_id": "call-1", "content": "42"}]
    )
    assert result.group == "tools:call-1"
    assert result.meta == {"tool_call_id": "call-1"}
    # A result answering no call made anywhere gets no group, as in `from_chat_messages`.
    (orphan,) = store.append_chat_messages(
        "c", [{"role": "tool", "tool_call_id": "nope", "content": "x"}]
    )
    assert orphan.group is None


def test_ids_are_the_messages_own_or_fresh_and_unique() -> None:
    store = SQLiteStore()
    turns = store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "a", "id": "u1"},
            {"role": "assistant", "content": "b"},
            {"role": "developer", "content": "c"},
        ],
    )
    assert turns[0].id == "u1"
    assert turns[1].id != turns[2].id
    assert [turn.sequence for turn in turns] == [1, 2, 3]
    assert turns[2].role == "system" and turns[2].meta == {"chat_role": "developer"}
    more = store.append_chat_messages("c", [{"role": "user", "content": "d"}])
    assert more[0].id not in {turn.id for turn in turns}
    assert more[0].sequence == 4
    with pytest.raises(DuplicateId):
        store.append_chat_messages("c", [{"role": "user", "content": "e", "id": "u1"}])


def test_a_reused_call_id_is_a_new_call_with_its_own_results() -> None:
    # A model numbering its calls in every response (`call_0` each time): each result
    # joins the call just before it, never the first exchange's group.
    store = SQLiteStore()
    call = {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = store.append_chat_messages(
        "c",
        [
            {"role": "assistant", "content": "", "tool_calls": [call], "id": "a1"},
            {"role": "tool", "content": "one", "tool_call_id": "call_0", "id": "r1"},
        ],
    )
    again = store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": "", "tool_calls": [call], "id": "a2"},
        ],
    )
    late = store.append_chat_messages(
        "c", [{"role": "tool", "content": "two", "tool_call_id": "call_0", "id": "r2"}]
    )
    assert first[0].group == first[1].group == "tools:call_0"
    assert again[1].group == late[0].group == "tools:call_0@a2"
    turns = store.load("c").turns
    roots = dict(zip([t.id for t in turns], unit_roots(turns), strict=True))
    assert roots["a1"] == roots["r1"] != roots["a2"] == roots["r2"]


def test_a_call_id_named_twice_by_one_message_is_refused_and_nothing_is_written() -> None:
    store = SQLiteStore()
    call = {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with pytest.raises(InvalidInput) as caught:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "again"},
                {"role": "assistant", "content": "", "tool_calls": [call, call]},
            ],
        )
    assert caught.value.field == "messages[1].tool_calls[1].id"
    assert store.load("c").turns == ()


def test_bad_messages_name_the_index_and_field() -> None:
    store = SQLiteStore()
    with pytest.raises(InvalidInput) as caught:
        store.append_chat_messages("c", [{"role": "user", "content": "ok"}, {"role": "robot"}])
    assert caught.value.field == "messages[1].role"
    with pytest.raises(InvalidInput) as caught:
        store.append_chat_messages("c", "not messages")  # type: ignore[arg-type]
    assert caught.value.field == "messages"
    assert store.conversation_ids() == []
    assert store.append_chat_messages("c", []) == []


def test_append_many_takes_turns_from_from_chat_messages() -> None:
    store = SQLiteStore()
    store.append("c", "user", "first")
    turns = from_chat_messages(
        [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "k", "type": "function"}]},
            {"role": "tool", "tool_call_id": "k", "content": "r"},
        ]
    )
    stored = store.append_many("c", turns)
    # Fields taken as they are; sequences are the ledger's next ones.
    assert [turn.id for turn in stored] == ["m1", "m2"]
    assert [turn.sequence for turn in stored] == [2, 3]
    assert [turn.group for turn in stored] == ["tools:k", "tools:k"]
    assert stored[0].meta == turns[0].meta
    with pytest.raises(InvalidInput) as caught:
        store.append_many("c", [object()])  # type: ignore[list-item]
    assert caught.value.field == "turns[0]"
