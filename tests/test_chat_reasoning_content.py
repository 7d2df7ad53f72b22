"""A reasoning model's `reasoning_content` (DeepSeek, vLLM and other OpenAI-compatible
servers return it beside the answer; langchain-deepseek keeps it in `additional_kwargs`) is
kept in the ledger as `meta["reasoning_content"]`: it was dropped. It is never sent back
(those servers refuse it in a request) and not counted as context tokens (it is not in the
context the model gets)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from openai.types.chat import ChatCompletionMessage

import ledgerfold as lf
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.tokens import MESSAGE_OVERHEAD_TOKENS, approx_tokens, context_tokens

THOUGHT = "The user said order 7 must not go to the office, so use the home address. " * 20


def test_a_reply_s_reasoning_is_kept_not_sent_not_counted(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "a.db")
    reply = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": "Shipping home.", "reasoning_content": THOUGHT}
    )
    store.append_chat_messages("c", [reply])
    (turn,) = store.load("c").turns
    assert turn.body == "Shipping home."
    assert (turn.meta or {})["reasoning_content"] == THOUGHT
    context = store.context("c", "v1")
    assert lf.to_chat_messages(context) == [{"role": "assistant", "content": "Shipping home."}]
    assert context_tokens(context.items) == MESSAGE_OVERHEAD_TOKENS + approx_tokens(
        "Shipping home."
    )


def test_reasoning_of_the_wrong_type_is_refused_naming_it() -> None:
    with pytest.raises(lf.InvalidInput) as raised:
        lf.from_chat_messages([{"role": "assistant", "content": "x", "reasoning_content": 5}])
    assert raised.value.field == "messages[0].reasoning_content"


def test_langchain_s_reasoning_content_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lf.SQLiteStore(tmp_path / "b.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    reply = AIMessage("Shipping home.", additional_kwargs={"reasoning_content": THOUGHT}, id="a1")
    assert middleware.append_new([reply]) == 1
    assert (store.load("c").turns[0].meta or {})["reasoning_content"] == THOUGHT
    # A reply stored before (without its reasoning) is not a changed message.
    store.append_many("c", [{"id": "a2", "role": "assistant", "body": "Done."}])
    again = AIMessage("Done.", additional_kwargs={"reasoning_content": THOUGHT}, id="a2")
    with caplog.at_level(logging.WARNING, logger="ledgerfold"):
        assert LedgerfoldMiddleware(store, "c", recall=False).append_new([reply, again]) == 0
    assert "changed" not in caplog.text
