"""The due check's token count (`ledgerfold._context_tokens`): always `context_tokens` of the
context, counting only the items after the ones it counted last time when the context
extends them (the same objects, as the store serves them after an append)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold._context import TurnItem
from ledgerfold._context_tokens import ContextTokens
from ledgerfold.tokens import approx_tokens, context_tokens


def _item(n: int, text: str) -> TurnItem:
    return TurnItem(f"t{n}", "user", text, n, None)


@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["extend", "fresh", "shorter"]), st.lists(st.text(), max_size=4)),
        max_size=12,
    )
)
def test_the_count_is_always_the_contexts(steps: list[tuple[str, list[str]]]) -> None:
    memo = ContextTokens()
    items: tuple[TurnItem, ...] = ()
    serial = 0
    for kind, texts in steps:
        new = []
        for text in texts:
            serial += 1
            new.append(_item(serial, text))
        if kind == "extend":
            items = items + tuple(new)
        elif kind == "fresh":  # equal values, other objects: counted again
            items = tuple(_item(i.sequence, i.text) for i in items) + tuple(new)
        else:
            items = items[: len(items) // 2] + tuple(new)
        assert memo.count("c", items, approx_tokens) == context_tokens(items, approx_tokens)


def test_an_extended_context_costs_its_new_items_only() -> None:
    seen: list[str] = []

    def counter(text: str) -> int:
        seen.append(text)
        return len(text)

    memo = ContextTokens()
    first = (_item(1, "aaaa"), _item(2, "bb"))
    assert memo.count("c", first, counter) == context_tokens(first, counter)
    seen.clear()
    second = (*first, _item(3, "cccccc"))
    counted = memo.count("c", second, counter)
    assert seen == ["cccccc"]
    assert counted == context_tokens(second, counter)


def test_another_counter_is_counted_afresh() -> None:
    memo = ContextTokens()
    items = (_item(1, "four words here ok"),)
    assert memo.count("c", items, approx_tokens) == context_tokens(items, approx_tokens)
    assert memo.count("c", items, len) == context_tokens(items, len)


def test_the_compactors_due_check_counts_the_served_context(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        compactor = Compactor(store, CompactionPolicy("v", trigger_tokens=60, keep_tail=2))
        for n in range(30):
            store.append("c", "user", f"message number {n} with a few words")
            expected = context_tokens(store.context("c", "v").items) > 60
            assert compactor.is_due("c") == expected
            if expected:
                compactor.compact("c")
