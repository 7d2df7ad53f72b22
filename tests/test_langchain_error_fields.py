"""Bad LangChain input is named by the message's own place (`messages[<i>]` of the list the
caller gave: the graph state, for the middleware), never by its place among the
OpenAI-style messages it converts to, of which a message LangChain splits (Anthropic
`tool_result` blocks) makes several, nor among the messages new to the ledger."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ledgerfold import DuplicateId, InvalidInput, SQLiteStore
from ledgerfold.adapters import from_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

TWICE = AIMessage(
    "",
    id="a2",
    tool_calls=[
        {"name": "lookup", "args": {}, "id": "c2"},
        {"name": "book", "args": {}, "id": "c2"},
    ],
)


def _split_state() -> list[Any]:
    """A call, then a user message holding its result as a `tool_result` block (LangChain
    converts it to a tool message and the user's text: two messages)."""
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "found"}
    return [
        AIMessage("", id="a1", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}]),
        HumanMessage([result, {"type": "text", "text": "Book it."}], id="h1"),
    ]


def test_from_langchain_messages_names_the_message_after_a_split_one() -> None:
    with pytest.raises(InvalidInput) as caught:
        from_langchain_messages([*_split_state(), TWICE])
    assert caught.value.field == "messages[2].tool_calls[1].id"
    assert caught.value.problem == "duplicate"
    assert str(caught.value).startswith("messages[2].tool_calls[1].id: ")


def test_a_duplicate_id_names_both_messages_by_their_place() -> None:
    with pytest.raises(DuplicateId) as caught:
        from_langchain_messages([*_split_state(), HumanMessage("Again.", id="h1")])
    error = caught.value
    assert (error.field, error.id) == ("messages[2].id", "h1")
    assert str(error) == "messages[2].id: 'h1' is also the id of messages[1]"


def test_the_middleware_names_the_state_message() -> None:
    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c")
    seen = [HumanMessage("Find my booking.", id="u0"), HumanMessage("Paris.", id="u1")]
    assert middleware.append_new(seen) == 2
    state = [*seen, *_split_state(), HumanMessage("And the hotel?", id="u2"), TWICE]
    with pytest.raises(InvalidInput) as caught:
        middleware.append_new(state)
    # Not messages[4] (among the converted new ones: a1, its result, h1, u2, a2).
    assert caught.value.field == "messages[5].tool_calls[1].id"
    assert [turn.id for turn in store.load("c").turns] == ["u0", "u1"]  # nothing of the batch
