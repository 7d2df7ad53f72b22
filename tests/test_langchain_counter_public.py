"""`LangChainCounter` is public, from `ledgerfold.tokens` only (SPEC §17.9): a loop of your
own that sends a `Compactor`'s context with `to_langchain_messages` needs it to count that
context as sent (a tool's image goes to LangChain, the line naming it does not), as
`LedgerfoldMiddleware` counts. Bad input raises `InvalidInput` naming `counter`. Real SQLite
file."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import ledgerfold as lf
import ledgerfold.tokens
from ledgerfold.adapters import to_langchain_messages
from ledgerfold.tokens import IMAGE_TOKENS, LangChainCounter, approx_tokens, context_tokens

SHOT = {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}}
CALL = {"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
LINE = "[image_url not shown: this tool result is sent as text only]"


def test_it_is_exported_by_ledgerfold_tokens_only() -> None:
    assert "LangChainCounter" in ledgerfold.tokens.__all__
    for name in ("ledgerfold", "ledgerfold.adapters", "ledgerfold.integrations.langchain"):
        assert "LangChainCounter" not in getattr(importlib.import_module(name), "__all__", ())


def test_a_compactor_of_your_own_counts_as_to_langchain_messages_sends(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "c.db") as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "What is on screen?"},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {
                    "role": "tool",
                    "tool_call_id": "c1",
                    "content": [{"type": "text", "text": "A form."}, SHOT],
                },
            ],
        )
        counter = LangChainCounter(approx_tokens)
        policy = lf.CompactionPolicy("v1", token_counter=counter, trigger_tokens=4000)
        context = lf.Compactor(store, policy).context("c")
    tool = to_langchain_messages(context)[-1]
    assert tool.content == [{"type": "text", "text": "A form."}, SHOT]  # no line
    as_chat = context_tokens(context.items)  # to_chat_messages: the text and the line
    assert context_tokens(context.items, policy.counter) == (
        as_chat - approx_tokens(f"A form.\n{LINE}") + approx_tokens("A form.") + IMAGE_TOKENS
    )
    assert counter("four") == approx_tokens("four") and LangChainCounter()("four") == 1
    assert repr(counter) == f"LangChainCounter({approx_tokens!r})"


@pytest.mark.parametrize("bad", [None, "approx", 3])
def test_a_counter_that_is_not_callable_is_refused(bad: object) -> None:
    with pytest.raises(lf.InvalidInput) as raised:
        LangChainCounter(bad)  # type: ignore[arg-type]
    assert (raised.value.field, raised.value.problem) == ("counter", "wrong-type")
