"""The values a compaction is configured with (SPEC §13): `CompactionPolicy` defaults,
freezing and validation, a `SummaryRequest` repr that hides texts, and `Compactor`'s own
arguments and repr."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from ledgerfold import Conversation, InvalidInput, SQLiteStore, SummaryEnvelope, Turn, TurnItem
from ledgerfold._compactor import CompactionPolicy, Compactor, SummaryRequest
from ledgerfold.tokens import approx_tokens

# -- values ----------------------------------------------------------------------------------


def test_policy_defaults_and_frozen() -> None:
    policy = CompactionPolicy("v1")
    assert (policy.keep_tail, policy.trigger_tokens, policy.token_counter) == (8, None, None)
    assert policy.counter is approx_tokens
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.keep_tail = 3  # type: ignore[misc]
    assert CompactionPolicy("v1", 3) == CompactionPolicy("v1", 3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"version": ""}, "version"),
        ({"version": "  "}, "version"),
        ({"version": 1}, "version"),
        ({"version": "v", "keep_tail": 0}, "keep_tail"),
        ({"version": "v", "keep_tail": True}, "keep_tail"),
        ({"version": "v", "keep_tail": 2.0}, "keep_tail"),
        ({"version": "v", "trigger_tokens": 0}, "trigger_tokens"),
        ({"version": "v", "trigger_tokens": False}, "trigger_tokens"),
        ({"version": "v", "token_counter": "len"}, "token_counter"),
    ],
)
def test_policy_validation_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        CompactionPolicy(**kwargs)
    assert caught.value.field == field


def test_summary_request_repr_hides_texts() -> None:
    request = SummaryRequest(
        "c",
        "p",
        "v1",
        [TurnItem("a", "user", "secret body text", 1)],  # type: ignore[arg-type]
        "secret summary text",
    )
    assert isinstance(request.turns, tuple)
    shown = repr(request)
    assert "secret" not in shown
    assert "turns=<1 turn>," in shown  # a count of one is singular
    assert "<19 chars>" in shown


def test_reprs_read_a_count_of_one_as_one() -> None:
    turn = Turn("t", 1, "user", "x")
    conversation = Conversation("c", 0, [turn])
    envelope = SummaryEnvelope("s", "p", "c", 0, ["t"], "f" * 64, "v1", "y")
    shown = [repr(turn), repr(conversation), repr(envelope), repr(TurnItem("t", "user", "x", 1))]
    assert "body=<1 char>" in shown[0]
    assert "turns=<1 turn>" in shown[1]
    assert "source_ids=<1 id>" in shown[2] and "text=<1 char>" in shown[2]
    assert "text=<1 char>" in shown[3]
    assert not any(re.search(r"<1 \w+s>", text) for text in shown), shown


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "v1"}, "policy"),
        ({"summarizer": "not callable"}, "summarizer"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"summary_id_factory": "sum-1"}, "summary_id_factory"),
    ],
)
def test_compactor_validation(store: SQLiteStore, kwargs: dict[str, Any], field: str) -> None:
    arguments: dict[str, Any] = {"policy": CompactionPolicy("v1")} | kwargs
    policy = arguments.pop("policy")
    with pytest.raises(InvalidInput) as caught:
        Compactor(store, policy, **arguments)
    assert caught.value.field == field


def test_is_due_validates_the_conversation_id(store: SQLiteStore) -> None:
    with pytest.raises(InvalidInput) as caught:
        Compactor(store, CompactionPolicy("v1")).is_due("")
    assert caught.value.field == "conversation_id"


def test_compactor_repr_names_parts_only(store: SQLiteStore) -> None:
    shown = repr(Compactor(store, CompactionPolicy("v1"), timeout=2))
    assert shown.startswith("Compactor(store=SQLiteStore, policy=CompactionPolicy(version='v1'")
    assert "summarizer=ExtractiveSummarizer, timeout=2.0)" in shown
