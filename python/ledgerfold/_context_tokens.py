"""The token count of the due check (SPEC §15.8 `trigger_tokens`), kept per conversation so
that it costs the new turns, not the whole context.

`Compactor` counts the tokens of a conversation's context before each compaction check. The
store's context cache (`store/_context_cache.py`) hands back the same item objects after an
append, followed by the new turns; `ContextTokens` remembers the last items it counted per
conversation and, when a context starts with exactly those objects (identity, checked at C
speed), counts only the rest. Items are immutable, so the same objects have the same count;
and when it starts with all but its last few (a `pop_item` retracted the newest turns),
the count of those is taken off. Anything else (a compaction, an edit, another process's
write) is counted in full.
"""

from __future__ import annotations

import operator
import os
import threading
import weakref
from collections import OrderedDict

from ledgerfold._context import ContextItem
from ledgerfold.tokens import TokenCounter, context_tokens

__all__ = ["ContextTokens"]


class ContextTokens:
    """`context_tokens` with a memory of the last count per conversation (at most `size`)."""

    __slots__ = ("__weakref__", "_last", "_lock", "_size")

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._last: OrderedDict[str, tuple[TokenCounter, tuple[ContextItem, ...], int]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        _counters.add(self)

    def count(
        self, conversation_id: str, items: tuple[ContextItem, ...], counter: TokenCounter
    ) -> int:
        """`context_tokens(items, counter)`."""
        with self._lock:
            last = self._last.get(conversation_id)
        used, counted, tokens = last if last is not None else (counter, (), 0)
        known = _shared(items, counted) if used is counter else 0
        if known:
            # The items counted last time beyond the shared ones left the context (a pop).
            tokens -= context_tokens(counted[known:], counter)
        else:
            tokens = 0
        tokens += context_tokens(items[known:], counter)
        with self._lock:
            self._last[conversation_id] = (counter, items, tokens)
            self._last.move_to_end(conversation_id)
            while len(self._last) > self._size:
                self._last.popitem(last=False)
        return tokens


#: How many of the items counted last may have left the end of a context that is still
#: counted from them (`pop_item` retracts the newest turn, then an append follows).
DROPPED_KEPT = 8


def _shared(items: tuple[ContextItem, ...], counted: tuple[ContextItem, ...]) -> int:
    """How many leading items `items` shares with `counted` (the same objects): all of
    `counted`, or all but up to `DROPPED_KEPT` of its last; else 0 (counted again)."""
    known = len(counted)
    for shared in range(known, max(known - DROPPED_KEPT, 0), -1):
        # `map` stops at the shorter: `counted` first, the leading `shared` of each (no
        # copy of `items`, the whole context, made for the comparison).
        if len(items) >= shared and all(
            map(operator.is_, counted if shared == known else counted[:shared], items)
        ):
            return shared
    return 0


#: Every `ContextTokens` (one per `Compactor`), for `_forked`.
_counters: weakref.WeakSet[ContextTokens] = weakref.WeakSet()


def _forked() -> None:
    """In a child process after `fork`: a lock another thread held at the fork (a compaction
    check on a store's worker) would never be released there; each counter gets a new one
    (its memory is a cache: a count the thread was making is made again when asked)."""
    for counter in list(_counters):
        counter._lock = threading.Lock()
        counter._last.clear()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_forked)
