"""The summary message an integration served, kept while its summary item lives.

An agent reads its context on every model call, and the store hands back the same
`SummaryItem` object while nothing the context depends on changed (`store/_context_cache.py`),
so the framed, escaped message of that item can be made once. It is kept by the object that
serves the context (a session, a middleware), never by the module, and only as long as the
item is alive: the store drops its items at any erasure (`retract(erase=True)`, a purge,
`delete_conversation`), and the message made from one goes with it. A summary's text, and
its escaped form, do not outlive the summary in memory.
"""

from __future__ import annotations

import weakref

from ledgerfold._context import SummaryItem
from ledgerfold.adapters._chat import summary_content

__all__ = ["SummaryContents"]


class SummaryContents:
    """`summary_content(item, recall)` of each summary item still alive, by item (its
    identity: an equal item read again is another entry, and the first one goes when it
    does). Safe to share between threads: an entry is one dict item, written whole."""

    __slots__ = ("__weakref__", "_entries")

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[SummaryItem], bool, str]] = {}

    def content(self, item: SummaryItem, recall: bool) -> str:
        key = id(item)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is item and entry[1] is recall:
            return entry[2]
        made = summary_content(item, recall)
        # The callback holds this object weakly (it owns the entries, not the other way).
        owner = weakref.ref(self)

        def forget(_: object) -> None:
            contents = owner()
            if contents is not None:
                contents._entries.pop(key, None)

        self._entries[key] = (weakref.ref(item, forget), recall, made)
        return made

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
