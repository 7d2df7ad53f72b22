"""A web search reply's citations (LangChain keeps them as its text blocks' `annotations`,
or langchain-openai in `additional_kwargs`) are kept in the ledger as `meta["annotations"]`,
as the chat adapter keeps a Chat Completions reply's: LangChain's converter dropped them, so
which page an answer came from was lost. A citation that is not plain JSON never fails the
model's reply: it is left out."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

import ledgerfold as lf
from ledgerfold.adapters import from_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CITATION = {
    "type": "citation",
    "url": "https://example.com/fares",
    "title": "Fares",
    "start_index": 0,
    "end_index": 9,
}
URL_CITATION = {"type": "url_citation", "url_citation": {"url": "https://example.com/bags"}}


def test_text_block_and_kwargs_citations_are_kept(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    reply = AIMessage(
        [{"type": "text", "text": "Fares rose 4%.", "annotations": [CITATION]}],
        additional_kwargs={"annotations": [URL_CITATION]},
        id="a1",
    )
    assert middleware.append_new([reply]) == 1
    (turn,) = store.load("c").turns
    assert turn.body == "Fares rose 4%."
    assert json.loads((turn.meta or {})["annotations"]) == [URL_CITATION, CITATION]
    # Not sent back: a request's message has no annotations.
    assert "annotations" not in lf.to_chat_messages(store.context("c", "v1"))[0]


def test_citations_that_are_not_json_are_left_out() -> None:
    for odd in (
        {"type": "citation", "url": "https://example.com/\ud800"},  # not UTF-8
        {"type": "citation", "pages": {3, 4}},  # not JSON
    ):
        reply = AIMessage([{"type": "text", "text": "Ok.", "annotations": [odd]}], id="a2")
        (turn,) = from_langchain_messages([reply])
        assert turn.body == "Ok." and turn.meta is None


def test_a_reply_stored_before_is_not_a_changed_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lf.SQLiteStore(tmp_path / "b.db")
    store.append_many("c", [{"id": "a1", "role": "assistant", "body": "Fares rose 4%."}])
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    reply = AIMessage(
        [{"type": "text", "text": "Fares rose 4%.", "annotations": [CITATION]}], id="a1"
    )
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        assert middleware.append_new([reply]) == 0
    assert "changed" not in caplog.text
