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
        st.tuples(
            st.sampled_from(["extend", "fresh", "shorter", "pop"]), st.lists(st.text(), max_size=4)
        ),
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
        elif kind == "pop":  # the newest few retracted, then (maybe) an append
            items = items[: max(len(items) - len(texts) - 1, 0)] + tuple(new[:1])
        else:
            items = items[: len(items) // 2] + tuple(new)
        assert memo.count("c", items, approx_tokens) == context_tokens(items, approx_tokens)


def test_a_context_after_a_pop_costs_its_new_items_only() -> None:
    """`pop_item` retracts the newest turn (the store's context loses its last item), then
    an append adds others: only those are counted, the popped one's count is taken off."""
    seen: list[str] = []

    def counter(text: str) -> int:
        seen.append(text)
        return len(text)

    memo = ContextTokens()
    first = tuple(_item(n, "x" * n) for n in range(1, 40))
    memo.count("c", first, counter)
    seen.clear()
    popped = first[:-2]
    assert memo.count("c", popped, counter) == context_tokens(popped, len)
    after = (*popped, _item(99, "new"))
    assert memo.count("c", after, counter) == context_tokens(after, len)
    assert seen == ["x" * 38, "x" * 39, "new"]  # the popped ones' count, taken off; the new


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
