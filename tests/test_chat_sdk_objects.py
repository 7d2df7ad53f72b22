"""The OpenAI SDK's own message objects as chat input (`from_chat_messages`,
`SQLiteStore.append_chat_messages`, SPEC §8, §15.6): `response.choices[0].message` (a
`ChatCompletionMessage`), alone or among dicts, is read as its `model_dump(mode="json",
exclude_none=True)` under the rules of a dict, so it gives the ledger, and the messages sent
back, that the response's JSON gives. Real SDK objects, real file databases."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ParsedChatCompletion,
    ParsedChatCompletionMessage,
)
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage

from ledgerfold import InvalidInput, SQLiteStore, from_chat_messages, to_chat_messages
from ledgerfold._transcripts import load_transcripts

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from chat_support import POLICY, SECRET  # noqa: E402

TAU_BENCH = _HERE / "data" / "transcripts" / "tau_bench.jsonl"


def _response(message: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions response's JSON, as the API sends it, around one message."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": message}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }


def _api_message(**fields: Any) -> dict[str, Any]:
    """An assistant message's JSON as the API returns it: every key, null when unused."""
    message = {"role": "assistant", "content": None, "refusal": None, "annotations": []}
    return {**message, **fields}


def _sdk(message: dict[str, Any]) -> ChatCompletionMessage:
    """`response.choices[0].message` of the response holding `message`."""
    return ChatCompletion.model_validate(_response(message)).choices[0].message


def _sent(path: Path, messages: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """The ledger's turns (all but their fresh IDs) and what `to_chat_messages` sends, after
    `append_chat_messages` into a new file database (read back by a second connection)."""
    with SQLiteStore(path) as store:
        store.append_chat_messages("c", messages)
    with SQLiteStore(path) as store:
        turns = [(t.sequence, t.role, t.body, t.group, t.meta) for t in store.load("c").turns]
        return turns, to_chat_messages(store.context("c", POLICY))


CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_order", "arguments": '{"order_id": 7}'},
    },
    {"id": "call_2", "type": "function", "function": {"name": "get_user", "arguments": "{}"}},
]


def test_a_response_message_with_tool_calls_is_the_dict_path(tmp_path: Path) -> None:
    api = _api_message(tool_calls=CALLS)
    message = _sdk(api)
    assert isinstance(message, ChatCompletionMessage)
    dicts = [
        {"role": "user", "content": "Where is order 7?"},
        api,  # the response's JSON
        {"role": "tool", "tool_call_id": "call_2", "content": "user 3"},
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
    ]
    mixed = [dicts[0], message, *dicts[2:]]
    assert from_chat_messages(mixed) == from_chat_messages(dicts)
    turns, sent = _sent(tmp_path / "objects.db", mixed)
    assert (turns, sent) == _sent(tmp_path / "dicts.db", dicts)
    assert turns[1][2] == "" and json.loads(turns[1][4]["tool_calls"]) == CALLS
    assert [t[3] for t in turns] == [None, "tools:call_1", "tools:call_1", "tools:call_1"]
    assert sent[1] == {"role": "assistant", "content": None, "tool_calls": CALLS}


def test_audio_and_refusal_replies_are_the_dict_path(tmp_path: Path) -> None:
    audio = {"id": "audio_1", "data": "UklGRg==", "expires_at": 1_700_003_600, "transcript": "Hi."}
    dicts = [
        {"role": "user", "content": "Say hi, then tell me the code."},
        _api_message(audio=audio),
        {"role": "user", "content": "The code?"},
        _api_message(refusal="I can't share that."),
        {"role": "user", "content": "Fine."},
        _api_message(content="Bye.", refusal=None),
    ]
    objects = [_sdk(m) if m["role"] == "assistant" else m for m in dicts]
    assert from_chat_messages(objects) == from_chat_messages(dicts)
    turns, sent = _sent(tmp_path / "objects.db", objects)
    assert (turns, sent) == _sent(tmp_path / "dicts.db", dicts)
    assert [t[2] for t in turns[1::2]] == ["Hi.", "I can't share that.", "Bye."]
    assert turns[1][4] == {"audio_id": "audio_1"}  # the audio itself is not kept
    assert [m["content"] for m in sent[1::2]] == ["Hi.", "I can't share that.", "Bye."]


def test_a_real_transcript_as_sdk_messages(tmp_path: Path) -> None:
    """Every assistant message of a real tau-bench transcript as the SDK returns it."""
    transcript = load_transcripts(TAU_BENCH)[0]
    dicts: list[dict[str, Any]] = []
    for turn in transcript.turns:
        meta = turn.meta or {}
        message: dict[str, Any] = {"role": turn.role, "content": turn.body}
        if "tool_calls" in meta:
            message["tool_calls"] = json.loads(meta["tool_calls"])
        if "tool_call_id" in meta:
            message["tool_call_id"] = meta["tool_call_id"]
        dicts.append(message)
    objects = [_sdk(_api_message(**m)) if m["role"] == "assistant" else m for m in dicts]
    assert sum(isinstance(m, ChatCompletionMessage) for m in objects) >= 3
    assert any(isinstance(m, ChatCompletionMessage) and m.tool_calls for m in objects)
    assert _sent(tmp_path / "objects.db", objects) == _sent(tmp_path / "dicts.db", dicts)


def test_an_sdk_message_is_checked_as_a_dict() -> None:
    """What the dump gives meets the dict's rules, named the same way."""
    twice = [CALLS[0], {**CALLS[1], "id": "call_1"}]
    for bad in (_api_message(tool_calls=twice), _api_message(content="a\ud800")):
        with pytest.raises(InvalidInput) as from_dict:
            from_chat_messages([{"role": "user", "content": "q"}, bad])
        with pytest.raises(InvalidInput) as from_object:
            from_chat_messages([{"role": "user", "content": "q"}, _sdk(bad)])
        assert from_object.value.field == from_dict.value.field
        assert from_object.value.problem == from_dict.value.problem
        assert from_object.value.field in ("messages[1].tool_calls[1].id", "messages[1].content")


class _Raising:
    def model_dump(self, **_: Any) -> Any:
        raise ValueError(f"cannot serialise {SECRET}")


class _NotAMapping:
    def model_dump(self, **_: Any) -> Any:
        return [("role", "user"), ("content", SECRET)]


class _Positional:
    def model_dump(self) -> Any:  # takes no mode nor exclude_none
        return {"role": "user", "content": SECRET}


@pytest.mark.parametrize("message", [_Raising(), _NotAMapping(), _Positional()])
def test_a_model_dump_without_a_mapping_is_named(tmp_path: Path, message: Any) -> None:
    messages = [{"role": "user", "content": "q"}, message]
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages(messages)
    assert caught.value.field == "messages[1]"
    assert caught.value.problem == "wrong-type"
    assert f"{type(message).__name__}.model_dump" in str(caught.value)  # not "not a mapping"
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        with pytest.raises(InvalidInput) as appended:
            store.append_chat_messages("c", messages)
        assert appended.value.field == "messages[1]"
        assert store.conversation_ids() == []  # all or nothing


def test_one_message_object_not_in_a_list_is_refused() -> None:
    """A pydantic model iterates as its fields: one message must go in a list."""
    message = _sdk(_api_message(content=SECRET))
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages(message)  # type: ignore[arg-type]
    assert caught.value.field == "messages"
    assert SECRET not in str(caught.value)
    with SQLiteStore() as store, pytest.raises(InvalidInput) as appended:
        store.append_chat_messages("c", message)  # type: ignore[arg-type]
    assert appended.value.field == "messages"
    assert [t.body for t in from_chat_messages([message])] == [SECRET]


def test_a_parsed_message_is_sent_back_without_parsed_arguments(tmp_path: Path) -> None:
    """`client.chat.completions.parse()` gives calls a `function.parsed_arguments` (the
    client's parse of `arguments`); the API refuses it in a request, so it is not kept."""
    response = _response(_api_message(tool_calls=CALLS[:1], parsed=None))
    parsed = ParsedChatCompletion[None].model_validate(response).choices[0].message
    assert isinstance(parsed, ParsedChatCompletionMessage)
    call = parsed.tool_calls[0]  # type: ignore[index]
    call.function.parsed_arguments = {"order_id": 7}  # as parse() sets it with strict tools
    assert "parsed_arguments" in parsed.model_dump(mode="json")["tool_calls"][0]["function"]
    dicts = [{"role": "user", "content": "Where is order 7?"}, _api_message(tool_calls=CALLS[:1])]
    objects = [dicts[0], parsed]
    assert from_chat_messages(objects) == from_chat_messages(dicts)
    turns, sent = _sent(tmp_path / "objects.db", objects)
    assert (turns, sent) == _sent(tmp_path / "dicts.db", dicts)
    assert sent[1]["tool_calls"] == CALLS[:1]


def test_pydantic_warnings_never_quote_the_message() -> None:
    """A message built with `model_construct` (no validation) holding content parts where
    the model declares a str: pydantic's serializer warns, quoting the value; the dump is
    read without its warnings, and what it gives is read as a dict's."""
    parts = ChatCompletionMessage.model_construct(
        role="assistant", content=[{"type": "text", "text": SECRET}]
    )
    wrong = ChatCompletionMessage.model_construct(role="assistant", content=[SECRET])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [t.body for t in from_chat_messages([parts])] == [SECRET]
        with pytest.raises(InvalidInput) as refused:
            from_chat_messages([{"role": "user", "content": "q"}, wrong])
    assert refused.value.field == "messages[1].content[0]"
    assert SECRET not in str(refused.value)
    assert [str(w.message) for w in caught if SECRET in str(w.message)] == []


class _NoWarningsKeyword:
    def model_dump(self, *, mode: str = "python", exclude_none: bool = False) -> Any:
        return {"role": "user", "content": SECRET}


def test_a_model_dump_without_a_warnings_keyword_is_read() -> None:
    assert [t.body for t in from_chat_messages([_NoWarningsKeyword()])] == [SECRET]


def test_a_langchain_message_is_sent_to_its_converter(tmp_path: Path) -> None:
    """A LangChain message is a pydantic model too, but its dump has `type` ("human"),
    not a role: the error names the converter that takes it."""
    from langchain_core.messages import HumanMessage

    messages = [{"role": "user", "content": "q"}, HumanMessage(SECRET, id="h1")]
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages(messages)
    assert caught.value.field == "messages[1]"
    assert "HumanMessage" in str(caught.value)
    assert "ledgerfold.adapters.from_langchain_messages" in str(caught.value)
    assert SECRET not in str(caught.value)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        with pytest.raises(InvalidInput, match="from_langchain_messages"):
            store.append_chat_messages("c", messages)
        assert store.conversation_ids() == []


def test_a_responses_api_item_is_named_as_one(tmp_path: Path) -> None:
    """`response.output` of the Responses API (or the Agents SDK's items) given by mistake:
    an item without a role is refused as not a chat message, its `type` named (an item's
    other text never: a `type` that is not a name is not quoted)."""
    call = ResponseFunctionToolCall.model_validate(
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": SECRET}
    )
    for item, named in (
        (call, "'function_call'"),
        ({"type": "function_call_output", "call_id": "call_1", "output": SECRET}, "output'"),
        ({"type": SECRET, "content": SECRET}, "item with a type,"),
    ):
        with pytest.raises(InvalidInput) as caught:
            from_chat_messages([{"role": "user", "content": "q"}, item])
        assert caught.value.field == "messages[1].role"
        assert named in str(caught.value) and "Responses API" in str(caught.value)
        assert SECRET not in str(caught.value)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        with pytest.raises(InvalidInput, match="LedgerfoldSession"):
            store.append_chat_messages("c", [call])
        assert store.conversation_ids() == []


def test_a_responses_message_item_keeps_its_text(tmp_path: Path) -> None:
    """A Responses API message (an output item, or an input message with `input_text`
    parts) is a role and text parts: its text is the turn's body, sent back as the
    message's content (it was left out as a non-text part, the body "")."""
    output = ResponseOutputMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Shipped.", "annotations": []}],
        }
    )
    question = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "?"}]}
    turns, sent = _sent(tmp_path / "ledger.db", [question, output])
    assert [(t[1], t[2], t[4]) for t in turns] == [
        ("user", "?", None),
        ("assistant", "Shipped.", None),
    ]
    assert sent == [{"role": "user", "content": "?"}, {"role": "assistant", "content": "Shipped."}]
    assert [t.id for t in from_chat_messages([question, output])] == ["m1", "msg_1"]


def test_a_web_search_reply_keeps_its_citations(tmp_path: Path) -> None:
    """`annotations` (a web search reply's URL citations) are kept in meta, as their JSON
    text, and not sent back (a request's message has none); none gives no meta key."""
    cited = [
        {
            "type": "url_citation",
            "url_citation": {
                "start_index": 0,
                "end_index": 7,
                "url": "https://a.example",
                "title": "A",
            },
        }
    ]
    dicts = [
        {"role": "user", "content": "News?"},
        _api_message(content="Shipped today.", annotations=cited),
        {"role": "user", "content": "More?"},
        _api_message(content="No."),  # "annotations": [], as the API sends it
    ]
    objects = [_sdk(m) if m["role"] == "assistant" else m for m in dicts]
    turns, sent = _sent(tmp_path / "objects.db", objects)
    assert (turns, sent) == _sent(tmp_path / "dicts.db", dicts)
    assert json.loads(turns[1][4]["annotations"]) == cited
    assert turns[3][4] is None
    assert sent[1] == {"role": "assistant", "content": "Shipped today."}
