"""OpenAI message shapes `from_chat_messages` takes that the API's own types allow or that
developers write by hand, and what `to_chat_messages` sends back for them (SPEC §8,
§15.6): what is sent back must be a message Chat Completions accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledgerfold import (
    Conversation,
    InvalidInput,
    SQLiteStore,
    assemble_context,
    from_chat_messages,
    to_chat_messages,
)

QUESTION = {"role": "user", "content": "Where is reservation ZFA04Y?"}


def _sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns = from_chat_messages(messages)
    context = assemble_context(Conversation("c", len(turns), turns), None, "v")
    sent = to_chat_messages(context)
    json.dumps(sent, allow_nan=False).encode("utf-8")  # strict JSON, sendable as UTF-8
    return sent


def _calling(arguments: object) -> dict[str, Any]:
    function = {"name": "get_reservation", "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": function}],
    }


ANSWER = {"role": "tool", "tool_call_id": "call_1", "content": "Seat 3A"}


# --- tool call arguments -------------------------------------------------------------------


def test_arguments_given_as_a_mapping_are_sent_back_as_json_text() -> None:
    # The API requires `function.arguments` to be a str; a hand-written dict was stored and
    # sent back as a dict, which Chat Completions refuses.
    arguments = {"reservation_id": "ZFA04Y", "city": "Zürich", "legs": [1, 2]}
    sent = _sent([QUESTION, _calling(arguments), ANSWER])
    text = sent[1]["tool_calls"][0]["function"]["arguments"]
    assert text == '{"reservation_id":"ZFA04Y","city":"Zürich","legs":[1,2]}'
    assert json.loads(text) == arguments


def test_arguments_as_a_mapping_are_stored_as_the_text_import_stores() -> None:
    # The same call, written as JSON text or as a mapping, is the same turn (same meta, so
    # the same digest and fingerprint), whichever form the developer used.
    as_text = from_chat_messages([_calling('{"reservation_id":"ZFA04Y"}')])
    as_mapping = from_chat_messages([_calling({"reservation_id": "ZFA04Y"})])
    assert as_mapping == as_text
    assert as_mapping[0].digest == as_text[0].digest


def test_arguments_given_as_a_mapping_are_not_changed_in_the_callers_message() -> None:
    message = _calling({"reservation_id": "ZFA04Y"})
    with SQLiteStore() as store:
        store.append_chat_messages("c", [QUESTION, message, ANSWER])
        stored = json.loads(store.load("c").turns[1].meta["tool_calls"])  # type: ignore[index]
    assert message["tool_calls"][0]["function"]["arguments"] == {"reservation_id": "ZFA04Y"}
    assert stored[0]["function"]["arguments"] == '{"reservation_id":"ZFA04Y"}'


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"limit": float("nan")}, "not-allowed"),
        ({"limit": float("inf")}, "not-allowed"),
        ({"when": {1, 2}}, "wrong-type"),
        ({"city": "\ud800"}, "not-utf8"),
        (["ZFA04Y"], "wrong-type"),
        (5, "wrong-type"),
    ],
    ids=["nan", "infinity", "set", "lone-surrogate", "list", "int"],
)
def test_arguments_that_cannot_be_json_text_are_bad_input(arguments: object, problem: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([QUESTION, _calling(arguments)])
    field = "messages[1].tool_calls[0].function.arguments"
    assert (caught.value.field, caught.value.problem) == (field, problem)
