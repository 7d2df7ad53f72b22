"""Bad input to the chat adapter (SPEC §10): each bad message is `InvalidInput` naming its
index and field, without its text; non-iterables, a bad ID prefix, NaN and infinity or
nesting too deep in tool calls are refused; the output is strict JSON; generators and empty
input are accepted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import (
    AssembledContext,
    DuplicateId,
    InvalidInput,
    Turn,
    TurnItem,
    from_chat_messages,
    to_chat_messages,
)

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from chat_support import SECRET, call  # noqa: E402

# --- bad input --------------------------------------------------------------------------------

BAD_MESSAGES: list[tuple[str, Any, str, str]] = [
    # (case, message, field, problem); each case puts the bad message at index 1
    ("not-a-mapping", SECRET, "messages[1]", "wrong-type"),
    ("role-missing", {"content": SECRET}, "messages[1].role", "wrong-type"),
    ("role-not-str", {"role": 1, "content": SECRET}, "messages[1].role", "wrong-type"),
    ("role-unknown", {"role": "admin", "content": SECRET}, "messages[1].role", "unknown-value"),
    ("role-capitalised", {"role": "User", "content": SECRET}, "messages[1].role", "unknown-value"),
    ("content-int", {"role": "user", "content": 7}, "messages[1].content", "wrong-type"),
    (
        "content-dict",
        {"role": "user", "content": {"text": SECRET}},
        "messages[1].content",
        "wrong-type",
    ),
    (
        "content-bytes",
        {"role": "user", "content": SECRET.encode()},
        "messages[1].content",
        "wrong-type",
    ),
    (
        "content-surrogate",
        {"role": "user", "content": "\ud800" + SECRET},
        "messages[1].content",
        "not-utf8",
    ),
    (
        "part-not-mapping",
        {"role": "user", "content": [SECRET]},
        "messages[1].content[0]",
        "wrong-type",
    ),
    (
        "part-no-type",
        {"role": "user", "content": [{"text": SECRET}]},
        "messages[1].content[0].type",
        "wrong-type",
    ),
    (
        "part-text-int",
        {"role": "user", "content": [{"type": "text", "text": 3}]},
        "messages[1].content[0].text",
        "wrong-type",
    ),
    ("id-int", {"role": "user", "content": SECRET, "id": 3}, "messages[1].id", "wrong-type"),
    ("id-blank", {"role": "user", "content": SECRET, "id": " "}, "messages[1].id", "empty"),
    (
        "id-duplicate",
        {"role": "user", "content": SECRET, "id": "first"},
        "messages[1].id",
        "duplicate",
    ),
    ("name-int", {"role": "user", "content": SECRET, "name": 3}, "messages[1].name", "wrong-type"),
    ("name-empty", {"role": "user", "content": SECRET, "name": ""}, "messages[1].name", "empty"),
    (
        "tool-calls-not-list",
        {"role": "assistant", "content": SECRET, "tool_calls": call("c9")},
        "messages[1].tool_calls",
        "wrong-type",
    ),
    (
        "tool-call-not-mapping",
        {"role": "assistant", "content": SECRET, "tool_calls": ["c9"]},
        "messages[1].tool_calls[0]",
        "wrong-type",
    ),
    (
        "tool-call-no-id",
        {"role": "assistant", "content": SECRET, "tool_calls": [{"type": "function"}]},
        "messages[1].tool_calls[0].id",
        "wrong-type",
    ),
    (
        "tool-call-not-json",
        {"role": "assistant", "content": SECRET, "tool_calls": [{"id": "c9", "x": {1, 2}}]},
        "messages[1].tool_calls",
        "wrong-type",
    ),
    (
        "tool-call-id-twice-in-one-message",
        {"role": "assistant", "content": SECRET, "tool_calls": [call("c9"), call("c9")]},
        "messages[1].tool_calls[1].id",
        "duplicate",
    ),
    (
        "tool-calls-on-user",
        {"role": "user", "content": SECRET, "tool_calls": [call("c9")]},
        "messages[1].tool_calls",
        "not-allowed",
    ),
    (
        "tool-call-id-on-assistant",
        {"role": "assistant", "content": SECRET, "tool_call_id": "c0"},
        "messages[1].tool_call_id",
        "not-allowed",
    ),
    (
        "tool-call-id-int",
        {"role": "tool", "content": SECRET, "tool_call_id": 3},
        "messages[1].tool_call_id",
        "wrong-type",
    ),
    (
        "tool-call-id-empty",
        {"role": "tool", "content": SECRET, "tool_call_id": ""},
        "messages[1].tool_call_id",
        "empty",
    ),
]


@pytest.mark.parametrize(
    ("message", "field", "problem"),
    [case[1:] for case in BAD_MESSAGES],
    ids=[case[0] for case in BAD_MESSAGES],
)
def test_bad_message_names_index_and_field(message: Any, field: str, problem: str) -> None:
    first = {"role": "assistant", "content": SECRET, "id": "first", "tool_calls": [call("c0")]}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([first, message])
    error = caught.value
    assert error.field == field
    assert error.problem == problem
    assert str(error).startswith(field + ":")
    assert SECRET not in str(error)
    assert "0000" not in str(error)
    if problem == "duplicate" and field.endswith(".id") and "tool_calls" not in field:
        assert isinstance(error, DuplicateId)


@pytest.mark.parametrize("messages", [SECRET, {"role": "user"}, 7, None, b"x"])
def test_messages_must_be_an_iterable_of_mappings(messages: Any) -> None:
    with pytest.raises(InvalidInput, match=r"^messages:"):
        from_chat_messages(messages)


def test_id_prefix_must_be_str() -> None:
    with pytest.raises(InvalidInput, match="id_prefix"):
        from_chat_messages([], id_prefix=3)  # type: ignore[arg-type]


def test_to_chat_messages_rejects_bad_input() -> None:
    with pytest.raises(InvalidInput, match=r"^context:"):
        to_chat_messages([])  # type: ignore[arg-type]
    bad = AssembledContext((TurnItem("t1", "assistant", SECRET, 1, {"tool_calls": "{oops"}),))
    with pytest.raises(InvalidInput, match="t1") as caught:
        to_chat_messages(bad)
    assert caught.value.field == "meta.tool_calls"
    assert SECRET not in str(caught.value)


def strict_loads(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_from_chat_messages_refuses_nan_and_infinity_in_tool_calls(value: float) -> None:
    # Regression: a NaN kept in meta made every later `context --json` invalid JSON.
    tool_call = {**call("k1"), "extra": {"score": value}}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([{"role": "assistant", "content": SECRET, "tool_calls": [tool_call]}])
    assert (caught.value.field, caught.value.problem) == ("messages[0].tool_calls", "not-allowed")
    assert SECRET not in str(caught.value)


def test_from_chat_messages_refuses_tool_calls_nested_too_deeply() -> None:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    tool_call = {**call("k1"), "extra": nested}
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([{"role": "assistant", "content": "x", "tool_calls": [tool_call]}])
    assert caught.value.field == "messages[0].tool_calls"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_to_chat_messages_output_is_strict_json(constant: str) -> None:
    # A stored NaN (written before writes refused it, or by another tool) is refused, never
    # passed on: the output of to_chat_messages always dumps as strict JSON.
    stored = f'[{{"id":"k1","type":"function","x":{constant}}}]'
    bad = AssembledContext((TurnItem("t1", "assistant", SECRET, 1, {"tool_calls": stored}),))
    with pytest.raises(InvalidInput) as caught:
        to_chat_messages(bad)
    assert caught.value.field == "meta.tool_calls"
    good = AssembledContext(
        (TurnItem("t1", "assistant", SECRET, 1, {"tool_calls": json.dumps([call("k1")])}),)
    )
    assert strict_loads(json.dumps(to_chat_messages(good), allow_nan=False))


def test_accepts_generators_and_empty_input() -> None:
    assert from_chat_messages([]) == []
    turns = from_chat_messages({"role": "user", "content": str(n)} for n in range(3))
    assert [t.id for t in turns] == ["m1", "m2", "m3"]
    assert all(isinstance(t, Turn) for t in turns)
