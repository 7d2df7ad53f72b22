"""A tool's image (a screenshot in a `ToolMessage`'s content) goes to a LangChain model as an
image: `langchain_core`'s converters keep it in the tool message, and no line names it. The
middleware's due check counted it as `to_chat_messages` sends it (Chat Completions' tool
message takes text only): its image, and the line `[image_url not shown: ...]` too, which
LangChain never sends. It now counts what the model gets; a turn whose parts cannot go to
LangChain (none kept to send) still goes as its text and that line, and counts it. Real
LangChain agent, real SQLite file, a scripted model."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.adapters import to_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.tokens import IMAGE_TOKENS, context_tokens

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
NOTE = "[image_url not shown: this tool result is sent as text only]"
CONFIG = {"configurable": {"thread_id": "t"}}


@tool
def screenshot() -> list[dict[str, Any]]:
    """Take a screenshot."""
    return [{"type": "text", "text": "The screen."}, IMAGE]


def _due_checks(caplog: pytest.LogCaptureFixture) -> list[int]:
    found = (re.search(r"due check .* tokens=(\d+)", r.getMessage()) for r in caplog.records)
    return [int(match.group(1)) for match in found if match]


def test_a_tool_s_image_counts_as_the_model_gets_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lf.SQLiteStore(tmp_path / "i.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    call = {"name": "screenshot", "args": {}, "id": "c1"}
    model = Scripted(replies=[AIMessage("", tool_calls=[call]), AIMessage("A login form.")])
    agent = create_agent(model, [screenshot], middleware=[middleware], checkpointer=InMemorySaver())
    caplog.set_level(logging.DEBUG, logger="ledgerfold.compactor")
    agent.invoke({"messages": [{"role": "user", "content": "What is on screen?"}]}, CONFIG)
    sent = model.inputs[-1]
    assert isinstance(sent[-1], ToolMessage) and IMAGE in sent[-1].content
    (converted,) = convert_to_openai_messages([sent[-1]])  # LangChain's own form: the image
    assert converted["role"] == "tool" and IMAGE in converted["content"]
    assert "not shown" not in str(sent) and "not shown" not in str(converted)
    items = middleware.compactor.context("c").items[:3]  # as at the second model call
    assert [item.role for item in items] == ["user", "assistant", "tool"]
    tool = items[2]
    assert tool.meta is not None
    other = {
        k: v for k, v in tool.meta.items() if k not in ("content_parts", "omitted_content_parts")
    }
    text_only = lf.TurnItem(tool.id, "tool", tool.text, 3, other)
    # Its text, other meta and image counted, not the line.
    as_sent = context_tokens(items[:2]) + context_tokens([text_only]) + IMAGE_TOKENS
    assert _due_checks(caplog)[-1] == as_sent
    assert context_tokens(items, middleware.compactor.policy.counter) == as_sent
    # To Chat Completions: the text and the line, not the image.
    with_line = lf.TurnItem(tool.id, "tool", f"{tool.text}\n{NOTE}", 3, other)
    assert context_tokens([tool]) == context_tokens([with_line])


def test_a_tool_turn_without_parts_to_send_still_counts_its_line(tmp_path: Path) -> None:
    """A turn whose parts were not kept (only their types): LangChain gets its text and the
    line naming them, and the line is counted."""
    function = {"name": "screenshot", "arguments": "{}"}
    calls = json.dumps([{"id": "c1", "type": "function", "function": function}])
    meta = {"tool_call_id": "c1", "omitted_content_parts": '["image_url"]'}
    with lf.SQLiteStore(tmp_path / "n.db") as store:
        middleware = LedgerfoldMiddleware(store, "c", recall=False)
        store.append_many(
            "c",
            [
                {"id": "u", "role": "user", "body": "Look."},
                {"id": "a", "role": "assistant", "body": "", "meta": {"tool_calls": calls}},
                {"id": "t", "role": "tool", "body": "The screen.", "meta": meta},
            ],
        )
        context = middleware.compactor.context("c")
        assert to_langchain_messages(context)[-1].content == f"The screen.\n{NOTE}"
        counter = middleware.compactor.policy.counter
        assert context_tokens(context.items, counter) == context_tokens(context.items)
