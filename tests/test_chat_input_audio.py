"""An `input_audio` content part without its audio is refused on the way in, by the chat
adapter as by the Agents SDK session, with one check (`adapters/_input_audio.py`) naming the
same key under each path's own name for the part (`messages[i].content[j]...`,
`items[i].content[j]...`); a part of Chat Completions' shape
(`ChatCompletionContentPartInputAudioParam`, the installed `openai` package's type) goes
in and back out as it came. A part an older ledgerfold stored without its audio is not sent
by `to_chat_messages` (Chat Completions refuses it at every request), nor by
`to_langchain_messages`."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionContentPartInputAudioParam, ChatCompletionMessageParam
from pydantic import TypeAdapter, ValidationError

import ledgerfold as lf
from ledgerfold.adapters import to_langchain_messages
from ledgerfold.integrations.openai_agents import LedgerfoldSession

DATA = "UklGRg=="
AUDIO = {"type": "input_audio", "input_audio": {"data": DATA, "format": "wav"}}
TEXT = {"type": "text", "text": "hear"}
PART = TypeAdapter(ChatCompletionContentPartInputAudioParam)
SENDABLE = TypeAdapter(list[ChatCompletionMessageParam])

#: Each malformed part, the key named under the part, and the problem.
MALFORMED: list[tuple[dict[str, Any], str, str]] = [
    ({"type": "input_audio"}, "input_audio", "wrong-type"),
    ({"type": "input_audio", "input_audio": DATA}, "input_audio", "wrong-type"),
    ({"type": "input_audio", "input_audio": [DATA, "wav"]}, "input_audio", "wrong-type"),
    (
        {"type": "input_audio", "input_audio": {"url": "https://a/b.wav"}},
        "input_audio.data",
        "wrong-type",
    ),
    ({"type": "input_audio", "input_audio": {"data": DATA}}, "input_audio.format", "wrong-type"),
    ({"type": "input_audio", "input_audio": {"format": "wav"}}, "input_audio.data", "wrong-type"),
    (
        {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
        "input_audio.data",
        "empty",
    ),
    (
        {"type": "input_audio", "input_audio": {"data": DATA, "format": ""}},
        "input_audio.format",
        "empty",
    ),
    (
        {"type": "input_audio", "input_audio": {"data": 7, "format": "wav"}},
        "input_audio.data",
        "wrong-type",
    ),
    (
        {"type": "input_audio", "input_audio": {"data": DATA, "format": None}},
        "input_audio.format",
        "wrong-type",
    ),
]
IDS = [f"{n}-{key}-{problem}" for n, (_, key, problem) in enumerate(MALFORMED)]


def _messages(part: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "first"}, {"role": "user", "content": [TEXT, part]}]


def test_every_malformed_part_is_one_the_openai_type_refuses() -> None:
    """The table is the installed SDK's truth: each of its parts fails the SDK's own type
    (but empty data, a str to the type, and no audio to send), and the well-formed one
    passes it."""
    PART.validate_python(AUDIO)
    for part, _, problem in MALFORMED:
        if problem == "empty" and part["input_audio"]["data"] == "":
            continue
        with pytest.raises(ValidationError):
            PART.validate_python(part)


@pytest.mark.parametrize(("part", "key", "problem"), MALFORMED, ids=IDS)
def test_from_chat_messages_refuses_a_part_without_its_audio(
    part: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(lf.InvalidInput) as raised:
        lf.from_chat_messages(_messages(part))
    assert (raised.value.field, raised.value.problem) == (f"messages[1].content[1].{key}", problem)
    assert DATA not in str(raised.value)


@pytest.mark.parametrize(("part", "key", "problem"), MALFORMED, ids=IDS)
def test_append_chat_messages_refuses_it_and_stores_nothing(
    tmp_path: Path, part: dict[str, Any], key: str, problem: str
) -> None:
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        store.append_chat_messages("c", [{"role": "user", "content": "kept"}])
        before = store.load("c")
        with pytest.raises(lf.InvalidInput) as raised:
            store.append_chat_messages("c", _messages(part))
        assert (raised.value.field, raised.value.problem) == (
            f"messages[1].content[1].{key}",
            problem,
        )
        assert store.load("c") == before  # none of the batch, the same revision


@pytest.mark.parametrize(("part", "key", "problem"), MALFORMED, ids=IDS)
def test_the_agents_session_refuses_the_same_with_the_same_key(
    tmp_path: Path, part: dict[str, Any], key: str, problem: str
) -> None:
    item = {"role": "user", "content": [{"type": "input_text", "text": "hear"}, part]}
    for field, items in (
        ("content", [{"role": "user", "content": "first"}, item]),
        ("output", [{"role": "user", "content": "first"}, _result(part)]),
    ):
        session = LedgerfoldSession("s", tmp_path / f"{field}.db")
        with pytest.raises(lf.InvalidInput) as raised:
            asyncio.run(session.add_items(items))
        named = f"items[1].{field}[1].{key}"
        assert (raised.value.field, raised.value.problem) == (named, problem)
        assert asyncio.run(session.get_items()) == []
        session.close()


def _result(part: Any) -> dict[str, Any]:
    output = [{"type": "input_text", "text": "heard"}, part]
    return {"type": "function_call_output", "call_id": "c1", "output": output}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["", DATA, "wav", "mp3"]),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2)
    ),
    max_leaves=4,
)
_AUDIO = st.dictionaries(st.sampled_from(["data", "format", "url"]), _JSON, max_size=3)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(audio=st.one_of(_JSON, _AUDIO))
def test_both_paths_take_and_refuse_the_same_parts(tmp_path: Path, audio: Any) -> None:
    """One check: whatever the part holds, the chat adapter and the session agree on it,
    and what they take is a part the OpenAI SDK's type takes too (its format aside: the
    ledger does not hold it to OpenAI's two)."""
    part = {"type": "input_audio", "input_audio": audio}
    try:
        lf.from_chat_messages(_messages(part))
        chat = None
    except lf.InvalidInput as error:
        chat = ((error.field or "").removeprefix("messages[1].content[1]"), error.problem)
    item = {"role": "user", "content": [{"type": "input_text", "text": "hear"}, part]}
    path = tmp_path / f"p{uuid.uuid4().hex}.db"
    session = LedgerfoldSession("s", path)
    try:
        asyncio.run(session.add_items([{"role": "user", "content": "first"}, item]))
        agents = None
    except lf.InvalidInput as error:
        agents = ((error.field or "").removeprefix("items[1].content[1]"), error.problem)
    finally:
        session.close()
    path.unlink(missing_ok=True)
    assert chat == agents
    if chat is None:
        PART.validate_python({**part, "input_audio": {**audio, "format": "wav"}})


def test_a_well_formed_part_goes_in_and_back_as_it_came(tmp_path: Path) -> None:
    cached = {**AUDIO, "prompt_cache_breakpoint": {"mode": "explicit"}}
    PART.validate_python(cached)
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        store.append_chat_messages("c", [{"role": "user", "content": [TEXT, cached]}])
        messages = lf.to_chat_messages(store.context("c", "v1"))
    SENDABLE.validate_python(messages)
    assert messages == [{"role": "user", "content": [TEXT, cached]}]


def test_a_stored_part_without_its_audio_is_not_sent(tmp_path: Path) -> None:
    """A turn an older ledgerfold stored with such a part (`meta["content_parts"]`): its
    text goes, not a part Chat Completions refuses at every request."""
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        for n, (part, _, _) in enumerate(MALFORMED):
            parts = json.dumps([TEXT, part, AUDIO])
            meta = {"content_parts": parts, "omitted_content_parts": '["input_audio"]'}
            store.append(f"c{n}", "user", "hear", meta=meta)
            messages = lf.to_chat_messages(store.context(f"c{n}", "v1"))
            SENDABLE.validate_python(messages)
            assert messages == [{"role": "user", "content": [TEXT, AUDIO]}], part


def test_nor_to_langchain(tmp_path: Path) -> None:
    """LangChain's converters take every part of a turn, but not that one: its OpenAI
    integration would send it, and the provider refuse it."""
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        part = MALFORMED[4][0]
        meta = {"content_parts": json.dumps([TEXT, part, AUDIO])}
        store.append("c", "user", "hear", meta={**meta, "omitted_content_parts": "[]"})
        (message,) = to_langchain_messages(store.context("c", "v1"))
    assert message.content == [TEXT, AUDIO]
