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


# --- an assistant's audio reply -----------------------------------------------------------

TRANSCRIPT = "Your flight leaves at nine."
AUDIO = {"id": "audio_abc", "data": "UklGRiQAAABXQVZF", "expires_at": 1_700_000_000}


def _spoken(**fields: Any) -> dict[str, Any]:
    """The model's audio reply as an OpenAI SDK user appends it (`message.model_dump()`)."""
    from openai.types.chat import ChatCompletionMessage

    return ChatCompletionMessage(role="assistant", content=None, **fields).model_dump()


@pytest.mark.parametrize(
    "reply",
    [
        _spoken(audio={**AUDIO, "transcript": TRANSCRIPT}),
        {"role": "assistant", "audio": {**AUDIO, "transcript": TRANSCRIPT}},
    ],
    ids=["dumped", "exclude-none"],
)
def test_an_audio_reply_is_its_transcript(reply: dict[str, Any]) -> None:
    # It was an empty assistant turn: no summary or search saw what was said, and it went
    # back to the model as an assistant message with empty content.
    (turn,) = from_chat_messages([reply])
    assert turn.body == TRANSCRIPT
    assert turn.meta == {"audio_id": "audio_abc"}  # the audio itself (base64) is not kept
    # Sent back as text: the audio's id expires (`expires_at`), the ledger does not, and a
    # message naming an expired audio is refused; the transcript is what the model said.
    sent = _sent([QUESTION, reply])
    assert sent[1] == {"role": "assistant", "content": TRANSCRIPT}


def test_an_audio_reference_without_transcript_keeps_its_id() -> None:
    # The request form (`audio: {"id": ...}`) an application sends back within the hour.
    (turn,) = from_chat_messages([{"role": "assistant", "audio": {"id": "audio_abc"}}])
    assert (turn.body, turn.meta) == ("", {"audio_id": "audio_abc"})


def test_an_audio_reply_with_text_keeps_both() -> None:
    (turn,) = from_chat_messages(
        [{"role": "assistant", "content": "Done.", "audio": {**AUDIO, "transcript": TRANSCRIPT}}]
    )
    assert turn.body == f"Done.\n{TRANSCRIPT}"


@pytest.mark.parametrize(
    ("audio", "field"),
    [
        ("audio_abc", "messages[0].audio"),
        ({"transcript": TRANSCRIPT}, "messages[0].audio.id"),
        ({"id": "audio_abc", "transcript": 5}, "messages[0].audio.transcript"),
    ],
)
def test_an_audio_reply_that_is_not_one_is_bad_input(audio: object, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([{"role": "assistant", "content": None, "audio": audio}])
    assert (caught.value.field, caught.value.problem) == (field, "wrong-type")


def test_a_lone_surrogate_in_a_transcript_is_named() -> None:
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([{"role": "assistant", "audio": {"id": "a", "transcript": "\ud800"}}])
    assert (caught.value.field, caught.value.problem) == (
        "messages[0].audio.transcript",
        "not-utf8",
    )


# --- what a tool call holds ------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "field"),
    [
        ({"name": "f", "arguments": '{"city":"\ud800"}'}, "tool_calls[0].function.arguments"),
        ({"name": "f\udfff", "arguments": "{}"}, "tool_calls[0].function.name"),
    ],
    ids=["arguments", "name"],
)
def test_a_lone_surrogate_in_a_tool_call_is_bad_input(function: dict[str, Any], field: str) -> None:
    # Stored as ASCII JSON it passed, and every later request carrying the call failed to
    # encode (the ledger could no longer be sent).
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", **_f(function)}]}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([QUESTION, message])
    assert (caught.value.field, caught.value.problem) == (f"messages[1].{field}", "not-utf8")


def test_a_lone_surrogate_in_a_call_id_names_the_id() -> None:
    # It was refused as `messages[0].group`, a field the caller never wrote.
    message = {"role": "assistant", "tool_calls": [{"id": "c\ud800", **_f({"name": "f"})}]}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([message])
    assert (caught.value.field, caught.value.problem) == (
        "messages[0].tool_calls[0].id",
        "not-utf8",
    )


def _f(function: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": function}


# --- the legacy function call -----------------------------------------------------------


@pytest.mark.parametrize(
    "content", [None, "Let me look that up."], ids=["content-none", "with-text"]
)
def test_a_legacy_function_call_is_refused_not_dropped(content: str | None) -> None:
    # It was ignored: the call vanished from the ledger (an empty assistant turn, or its
    # text alone) and from what was sent back, with no word to the caller.
    call = {"name": "get_reservation", "arguments": '{"reservation_id":"ZFA04Y"}'}
    message = {"role": "assistant", "content": content, "function_call": call}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([QUESTION, message])
    assert (caught.value.field, caught.value.problem) == (
        "messages[1].function_call",
        "not-allowed",
    )
    with SQLiteStore() as store:
        with pytest.raises(InvalidInput):
            store.append_chat_messages("c", [QUESTION, message])
        assert store.conversation_ids() == []  # nothing written


def test_a_dumped_sdk_message_without_a_function_call_is_taken() -> None:
    # `model_dump()` writes `function_call: None` (and `audio`, `refusal` None) on every reply.
    (turn,) = from_chat_messages([_spoken(audio=None)])
    assert (turn.role, turn.body, turn.meta) == ("assistant", "", None)


# --- calls the ledger already holds -----------------------------------------------------


def test_stored_arguments_that_are_json_itself_are_sent_as_json_text() -> None:
    # A ledger written before `from_chat_messages` stored a mapping as its text (or by
    # `append_many`) holds the arguments as a JSON object: they went out as an object,
    # which Chat Completions refuses (it takes a str).
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"b": "ü"}}}
    with SQLiteStore() as store:
        store.append_many(
            "c",
            [
                {"role": "user", "body": "Look it up."},
                {"role": "assistant", "body": "", "meta": {"tool_calls": json.dumps([call])}},
                {"role": "tool", "body": "found", "meta": {"tool_call_id": "c1"}},
            ],
        )
        sent = to_chat_messages(store.context("c", "v"))
    assert sent[1]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"b":"ü"}'}}
    ]


def test_a_langchain_audio_reply_is_its_transcript() -> None:
    # langchain-openai keeps the reply's audio in additional_kwargs, its content empty; the
    # converter left it out, so the ledger held an empty assistant turn.
    from langchain_core.messages import AIMessage, HumanMessage

    from ledgerfold.adapters import from_langchain_messages

    reply = AIMessage("", id="a1", additional_kwargs={"audio": {**AUDIO, "transcript": TRANSCRIPT}})
    turns = from_langchain_messages([HumanMessage("When do I leave?", id="u1"), reply])
    assert (turns[1].body, turns[1].meta) == (TRANSCRIPT, {"audio_id": "audio_abc"})


def test_a_lone_surrogate_in_a_key_of_a_tool_call_names_its_mapping() -> None:
    # A key is not named (it could be any text): the mapping holding it is.
    function = {"name": "f", "arguments": "{}", "x\ud800": 1}
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", **_f(function)}]}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([QUESTION, message])
    field = (caught.value.field, caught.value.problem)
    assert field == ("messages[1].tool_calls[0].function", "not-utf8")
