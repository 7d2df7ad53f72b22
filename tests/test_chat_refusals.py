"""A model's refusal is what the assistant said (SPEC §8: the ledger keeps what was said).
Chat Completions returns it as `refusal` with `content` None (or as `refusal` content
parts); `from_chat_messages` dropped it, so the ledger held an empty assistant turn: the
summarizer and search never saw the refusal, and every later request carried an assistant
message with empty content, which several providers refuse."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from openai.types.chat import ChatCompletionMessage

from ledgerfold import (
    Conversation,
    InvalidInput,
    SQLiteStore,
    assemble_context,
    from_chat_messages,
    to_chat_messages,
)
from ledgerfold.adapters import from_langchain_messages

REFUSAL = "I can't help with that request."
QUESTION = {"role": "user", "content": "Write the exploit."}


def _reply(**fields: Any) -> dict[str, Any]:
    """The model's reply as an OpenAI SDK user appends it (`message.model_dump()`)."""
    return ChatCompletionMessage(role="assistant", **fields).model_dump()


@pytest.mark.parametrize(
    "reply",
    [
        _reply(content=None, refusal=REFUSAL),
        {"role": "assistant", "refusal": REFUSAL},  # model_dump(exclude_none=True)
        {"role": "assistant", "content": [{"type": "refusal", "refusal": REFUSAL}]},
    ],
    ids=["dumped", "exclude-none", "content-part"],
)
def test_a_refusal_is_the_assistant_turns_text(reply: dict[str, Any]) -> None:
    turns = from_chat_messages([QUESTION, reply])
    assert turns[1].body == REFUSAL
    assert turns[1].meta is None  # nothing left out
    context = assemble_context(Conversation("c", 2, turns), None, "v")
    assert to_chat_messages(context)[1] == {"role": "assistant", "content": REFUSAL}


def test_append_chat_messages_keeps_the_refusal() -> None:
    with SQLiteStore() as store:
        store.append_chat_messages("c", [QUESTION, _reply(content=None, refusal=REFUSAL)])
        assert [hit.turn_id for hit in store.search("c", "help request", scope="all")] != []
        assert store.load("c").turns[1].body == REFUSAL


def test_text_and_a_refusal_are_both_kept() -> None:
    reply = _reply(content="Here is what I can say.", refusal=REFUSAL)
    assert from_chat_messages([reply])[0].body == f"Here is what I can say.\n{REFUSAL}"


def test_a_langchain_refusal_is_kept() -> None:
    # langchain-openai keeps a refusal in additional_kwargs, its content empty.
    message = AIMessage("", id="a1", additional_kwargs={"refusal": REFUSAL})
    turns = from_langchain_messages([HumanMessage("Write the exploit.", id="u1"), message])
    assert turns[1].body == REFUSAL


@pytest.mark.parametrize(
    ("reply", "field"),
    [
        ({"role": "assistant", "refusal": 5}, "messages[0].refusal"),
        ({"role": "assistant", "content": [{"type": "refusal"}]}, "messages[0].content[0].refusal"),
    ],
)
def test_a_refusal_that_is_not_text_is_bad_input(reply: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        from_chat_messages([reply])
    assert (caught.value.field, caught.value.problem) == (field, "wrong-type")


def test_an_agents_sdk_refusal_item_is_the_turns_text() -> None:
    import asyncio

    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    item = {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": REFUSAL}],
    }
    with SQLiteStore() as store:
        session = LedgerfoldSession("c", store=store)
        asyncio.run(session.add_items([{"role": "user", "content": "Write the exploit."}, item]))
        assert store.load("c").turns[1].body == REFUSAL
        assert asyncio.run(session.get_items())[1] == item  # served as it came
