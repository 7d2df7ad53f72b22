"""Folding a backlog in chunks (SPEC §15.2, §15.8): no summarizer request carries more than
`max_input_tokens` of turn text.

A chunk is the longest run of the uncovered turns, in sequence order and cut only between
compaction units (groups and tool calls with their results, SPEC §17.2), whose texts fit the
budget. A single turn or unit larger than the budget goes alone,
each turn's text cut to its share of the budget: head and tail kept, the cut marked.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledgerfold._context import TurnItem
from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import recall_result_ids, stand_in
from ledgerfold._toolcalls import unit_roots
from ledgerfold.tokens import TokenCounter

__all__ = ["cut_text", "fold_chunk"]


def fold_chunk(
    turns: Sequence[Turn], max_input_tokens: int, counter: TokenCounter
) -> tuple[tuple[Turn, ...], tuple[TurnItem, ...]]:
    """The next chunk of `turns` (sequence order) and the items a summarizer gets for it
    (none of none: a re-layout, SPEC §17.3)."""
    if not turns:
        return (), ()
    roots = unit_roots(turns)
    last_of_unit: dict[int, int] = {}
    for index, root in enumerate(roots):
        last_of_unit[root] = index
    # A recall_history result is never a summary source's text (SPEC §17.7): its stand-in is.
    recall_results = recall_result_ids(turns)
    texts = [stand_in(t.body) if t.id in recall_results else t.body for t in turns]
    used = 0
    reach = -1  # the furthest index the turns taken so far pull into the chunk (their groups)
    cut = 0  # the longest prefix that ends between groups and fits
    first_unit = 0  # the end of the first unit (the first prefix that ends between groups)
    for index in range(len(turns)):
        used += counter(texts[index])
        reach = max(reach, last_of_unit[roots[index]])
        if reach == index:  # a cut after this turn splits no group
            if not first_unit:
                first_unit = index + 1
            if used > max_input_tokens:
                break
            cut = index + 1
    if cut:
        chunk = tuple(turns[:cut])
        return chunk, tuple(_item(turn, text) for turn, text in zip(chunk, texts, strict=False))
    # The first turn or group alone is over the budget: each turn gets an equal share, and
    # the shares sum to the budget even when the group has more turns than it has tokens.
    chunk = tuple(turns[:first_unit])
    share, extra = divmod(max_input_tokens, len(chunk))
    return chunk, tuple(
        _item(turn, cut_text(texts[index], share + (index < extra), counter))
        for index, turn in enumerate(chunk)
    )


def _item(turn: Turn, text: str) -> TurnItem:
    return TurnItem(turn.id, turn.role, text, turn.sequence, turn.meta)


def cut_text(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """`text` itself when it fits `max_tokens`, else its head and tail around a marker that
    says how many characters were cut, as long as fits."""
    if counter(text) <= max_tokens:
        return text

    def shortened(keep: int) -> str:
        head, tail = keep - keep // 2, keep // 2
        marker = f"\n[... {len(text) - keep} characters cut ...]\n"
        return text[:head] + marker + (text[len(text) - tail :] if tail else "")

    low, high = 0, len(text) - 1  # characters kept: the largest that fits
    while low < high:
        middle = (low + high + 1) // 2
        if counter(shortened(middle)) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    result = shortened(low)
    if counter(result) <= max_tokens:
        return result
    # Even the marker alone is over a tiny budget: the longest head that fits (maybe none).
    low, high = 0, len(text) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if counter(text[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low]
