"""LangChain's standard content blocks that its OpenAI converter cannot express (a PDF or
audio by URL, an image or audio by file ID, a video, a `text-plain` document: what other
providers take) no longer fail the model call: `convert_to_openai_messages` raises on them,
and the middleware raised `InvalidInput` for the user's message, ending the run. The ledger
keeps each such block as LangChain gave it (`meta["content_parts"]`), the model gets the
message as the state holds it (or, from the ledger, with those blocks), and
`to_chat_messages` sends only parts of Chat Completions' own shape. Real SQLite files, a
real `create_agent` run, a fake model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.adapters import from_langchain_messages, to_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

PDF = {"type": "file", "url": "https://example.com/contract.pdf"}
BLOCKS = [
    PDF,
    {"type": "audio", "file_id": "file-audio-1"},
    {"type": "image", "file_id": "file-image-1"},
    {"type": "video", "url": "https://example.com/clip.mp4"},
    {"type": "text-plain", "text": "clause 7: no refunds", "mime_type": "text/plain"},
]


@pytest.mark.parametrize("block", BLOCKS, ids=[b["type"] for b in BLOCKS])
def test_a_run_with_the_block_goes_on_and_the_ledger_keeps_it(
    tmp_path: Path, block: dict[str, Any]
) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    model = Scripted(default="Read.")
    agent = create_agent(model, tools=[], middleware=[LedgerfoldMiddleware(store, "c")])
    sent = HumanMessage([{"type": "text", "text": "Summarise this."}, block], id="u1")
    state = agent.invoke({"messages": [sent]})
    assert state["messages"][-1].content == "Read."
    assert model.inputs[0][-1] is state["messages"][0]  # as the state holds it
    user = store.load("c").turns[0]
    assert user.body == "Summarise this."
    assert json.loads((user.meta or {})["content_parts"])[1] == block


def test_from_the_ledger_langchain_gets_the_block_chat_completions_does_not(
    tmp_path: Path,
) -> None:
    turns = from_langchain_messages([HumanMessage([{"type": "text", "text": "See:"}, PDF])])
    context = lf.assemble_context(lf.Conversation("c", 0, turns), None, "v1")
    (back,) = to_langchain_messages(context)
    assert back.content == [{"type": "text", "text": "See:"}, PDF]
    assert lf.to_chat_messages(context) == [{"role": "user", "content": "See:"}]


def test_the_summary_names_the_blocks() -> None:
    (turn,) = from_langchain_messages([HumanMessage([BLOCKS[4], PDF])])
    item = lf.TurnItem(turn.id, turn.role, turn.body, 1, turn.meta)
    text = lf.ExtractiveSummarizer()(lf.SummaryRequest("c", "p", "v1", (item,), None))
    assert text == "[seq 1 user] (attached: text-plain, file)"


def test_a_block_that_is_not_json_is_still_refused() -> None:
    odd = {"type": "file", "url": "https://example.com/a.pdf", "pages": {1, 2}}
    with pytest.raises(lf.InvalidInput) as raised:
        from_langchain_messages([HumanMessage([odd])])
    assert raised.value.field == "messages[0]"
