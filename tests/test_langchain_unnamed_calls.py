"""Tool calls LangChain gives no ID (`ToolCall.id` is `Optional[str]`: `None`, or `""` from
some providers; an unparsable call's `InvalidToolCall.id` too): the ledger keeps each such
call under `unnamed_call_id(<message id>, <index>)`, and a `tool_call_id=""` result right
after it (LangGraph's `ToolNode` answers a `""` call so) answers it."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ledgerfold.adapters import from_langchain_messages
from ledgerfold.adapters._langchain import unnamed_call_id


@pytest.mark.parametrize("call_id", [None, ""])
def test_the_adapter_converts_calls_without_id(call_id: str | None) -> None:
    call = {"name": "f", "args": {}, "id": call_id}
    bad = {"type": "invalid_tool_call", "id": call_id, "name": "g", "args": "{no", "error": None}
    turns = from_langchain_messages(
        [
            AIMessage(
                "", tool_calls=[call, {**call, "id": "c2"}], invalid_tool_calls=[bad], id="a1"
            ),
            ToolMessage("r", tool_call_id="", id="t1"),
            ToolMessage("r2", tool_call_id="c2", id="t2"),
            HumanMessage("next", id="h1"),
            ToolMessage("orphan", tool_call_id="", id="t3"),  # after no call: answers none
        ]
    )
    ids = [unnamed_call_id("a1", 0), "c2", unnamed_call_id("a1", 2)]
    assert all(call_id in (turns[0].meta or {})["tool_calls"] for call_id in ids)
    answered = [(t.meta or {}).get("tool_call_id") for t in turns[1:]]
    assert answered == [ids[0], "c2", None, None]
    # Without a message ID, a message is known by its place in the list.
    (turn,) = from_langchain_messages([AIMessage("", tool_calls=[call])])
    assert unnamed_call_id("#0", 0) in (turn.meta or {})["tool_calls"]
