"""A `ToolMessage`'s `artifact` (a tool with `response_format="content_and_artifact"`: the
raw rows behind the model's summary of them) is kept in the ledger when it is plain JSON
(`meta["artifact"]`, compact JSON text) and comes back on the `ToolMessage` when the model's
input is the ledger's rendering (a restart, `to_langchain_messages`). It is never sent to a
Chat Completions model nor counted as context tokens. An artifact that is not plain JSON (an
object, NaN) is left out of the ledger and logged by message ID and type: the run goes on,
and the state's own message (with it) still reaches the model while the state holds it.
Real SQLite files and a real `create_agent` run with a fake model."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.adapters import from_langchain_messages, to_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.tokens import context_tokens

CALL = {"name": "lookup", "args": {"sku": "A-1"}, "id": "call-1"}
ROWS = {"rows": [{"sku": "A-1", "stock": 3}, {"sku": "A-2", "stock": 0}]}


class Opaque:
    """An artifact that is not JSON (a DataFrame, a client object)."""


def _agent_run(tmp_path: Path, artifact: Any) -> tuple[Any, LedgerfoldMiddleware, Scripted]:
    @tool(response_format="content_and_artifact")
    def lookup(sku: str) -> tuple[str, Any]:
        """Look a product up."""
        return "2 rows", artifact

    store = lf.SQLiteStore(tmp_path / "a.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    model = Scripted(replies=[AIMessage("", tool_calls=[CALL]), AIMessage("In stock.")])
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    state = agent.invoke({"messages": [{"role": "user", "content": "Is A-1 in stock?"}]})
    return state, middleware, model


def test_a_json_artifact_is_kept_and_comes_back(tmp_path: Path) -> None:
    state, middleware, _ = _agent_run(tmp_path, ROWS)
    result = state["messages"][2]
    assert isinstance(result, ToolMessage) and result.artifact == ROWS
    (turn,) = [t for t in middleware.store.load("c").turns if t.role == "tool"]
    assert json.loads((turn.meta or {})["artifact"]) == ROWS
    assert turn.body == "2 rows"
    # The state is gone (a restart): the ledger's rendering carries the artifact.
    restarted = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "a.db"), "c", recall=False)
    (back,) = [m for m in restarted.model_messages() if isinstance(m, ToolMessage)]
    assert back.artifact == ROWS and back.content == "2 rows"
    # Chat Completions gets the text only.
    context = restarted.compactor.context("c")
    (sent,) = [m for m in lf.to_chat_messages(context) if m["role"] == "tool"]
    assert sent == {"role": "tool", "content": "2 rows", "tool_call_id": "call-1"}


def test_the_artifact_is_not_counted_as_context_tokens() -> None:
    def tokens(artifact: Any) -> int:
        messages = [
            AIMessage("", tool_calls=[CALL], id="a"),
            ToolMessage("2 rows", tool_call_id="call-1", id="t", artifact=artifact),
        ]
        store = lf.SQLiteStore()
        store.append_many("c", [_spec(turn) for turn in from_langchain_messages(messages)])
        return context_tokens(store.context("c", "v1").items)

    big = {"rows": [{"sku": f"A-{n}", "stock": n} for n in range(500)]}
    assert tokens(big) == tokens(None)


@pytest.mark.parametrize("artifact", [Opaque(), {"ratio": math.nan}], ids=["object", "nan"])
def test_an_artifact_that_is_not_json_is_left_out_and_logged(
    tmp_path: Path, artifact: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        state, middleware, model = _agent_run(tmp_path, artifact)
    result = state["messages"][2]
    assert result.artifact is artifact and state["messages"][-1].content == "In stock."
    (turn,) = [t for t in middleware.store.load("c").turns if t.role == "tool"]
    assert turn.body == "2 rows" and "artifact" not in (turn.meta or {})
    (record,) = [r for r in caplog.records if "artifact" in r.getMessage()]
    assert f"message_id={result.id}" in record.getMessage()
    assert type(artifact).__name__ in record.getMessage()
    # While the state holds it, the model's input is the state's message, artifact and all.
    (sent,) = [m for m in model.inputs[1] if isinstance(m, ToolMessage)]
    assert sent.artifact is artifact


def test_a_turn_stored_before_artifacts_were_kept_is_not_changed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lf.SQLiteStore(tmp_path / "b.db")
    state = [
        HumanMessage("Is A-1 in stock?", id="u"),
        AIMessage("", tool_calls=[CALL], id="a"),
        ToolMessage("2 rows", tool_call_id="call-1", id="t", artifact=ROWS),
    ]
    old = [_spec(turn) for turn in from_langchain_messages(state)]
    del old[2]["meta"]["artifact"]  # as an earlier version wrote it
    store.append_many("c", old)
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        assert middleware.append_new(state) == 0
        sent = middleware.model_messages()
    assert "changed" not in caplog.text
    assert sent[2] is state[2]  # the state's own message, with its artifact


def test_round_trip_and_a_chat_dict_s_artifact() -> None:
    messages = [
        AIMessage("", tool_calls=[CALL], id="a"),
        ToolMessage("2 rows", tool_call_id="call-1", id="t", artifact=ROWS),
    ]
    store = lf.SQLiteStore()
    store.append_many("c", [_spec(turn) for turn in from_langchain_messages(messages)])
    back = to_langchain_messages(store.context("c", "v1"))
    assert back[1].artifact == ROWS
    # A chat dict's artifact must be JSON, as any field the adapter keeps.
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    bad = {"role": "tool", "tool_call_id": "c1", "content": "x", "artifact": Opaque()}
    with pytest.raises(lf.InvalidInput) as raised:
        lf.from_chat_messages([{"role": "assistant", "tool_calls": [call]}, bad])
    assert raised.value.field == "messages[1].artifact"


def _spec(turn: lf.Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "role": turn.role,
        "body": turn.body,
        "group": turn.group,
        "meta": dict(turn.meta) if turn.meta else None,
    }
