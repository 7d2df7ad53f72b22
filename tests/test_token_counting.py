"""Counting tokens (SPEC §15.2): the default approximate counter (CJK, kana, hangul,
code points), the per-message overhead of a context, and a token counter that returns
garbage."""

from __future__ import annotations

import pytest

from ledgerfold import InvalidInput, SummaryItem, TurnItem
from ledgerfold.tokens import MESSAGE_OVERHEAD_TOKENS, approx_tokens, context_tokens

# -- tokens ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("a" * 400, 100),
        ("你好世界", 4),  # one token per ideograph
        ("こんにちは", 5),  # kana
        ("안녕하세요", 5),  # hangul syllables
        ("。！？", 3),  # CJK punctuation
        ("你好 abcd", 2 + 2),  # 2 ideographs + ceil(5 narrow chars / 4)
        ("é" * 8, 2),  # code points, not UTF-8 bytes
        ("𠀀𠀁", 2),  # supplementary-plane ideographs
    ],
)
def test_approx_tokens(text: str, tokens: int) -> None:
    assert approx_tokens(text) == tokens


def test_context_tokens_adds_overhead_and_meta_per_item() -> None:
    items = (
        TurnItem("a", "user", "abcd", 1),
        TurnItem("b", "assistant", "", 2, {"tool_calls": "abcdabcd"}),
        SummaryItem("s", "abcdabcd", 0, ("x",)),
    )
    assert context_tokens(items) == 3 * MESSAGE_OVERHEAD_TOKENS + 1 + 2 + 2
    assert context_tokens(items, lambda text: 10) == 3 * MESSAGE_OVERHEAD_TOKENS + 40


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_token_counter_returning_garbage_is_invalid_input(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        context_tokens((TurnItem("a", "user", "x", 1),), lambda text: bad)  # type: ignore[arg-type,return-value]
    assert caught.value.field == "token_counter"
