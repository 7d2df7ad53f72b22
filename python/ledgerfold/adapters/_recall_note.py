"""What the summary slot's framing says of a marker in the summary text that promises what a
purge deleted (SPEC §15.5, §16.5).

The extractive summarizer's marker of omitted turn lines says `recall_history` returns them
(`[57 earlier turn lines omitted: sequences 2–58; recall_history returns them]`). A sealed
summary keeps its text as written, so after a purge its marker may promise originals that
are gone; the framing, built from numbers only, then says for which sequences it holds. A
marker written after a purge says so itself (`...; recall_history returns only those after
sequence 10]`) and needs no note until a later purge goes further.
"""

from __future__ import annotations

import re

from ledgerfold._context import RECALL_PROMISE

__all__ = ["purged_promise_note"]

# A marker's promise: of all its lines, or of those after a sequence (written after a purge).
_PROMISE = re.compile(
    re.escape(RECALL_PROMISE) + r" (?:them|only those after sequence ([0-9]{1,19}))\]"
)
#: What such a marker says, as the framing names it.
_PROMISED = "recall_history returns lines it left out"


def _promises_purged(text: str, purged: int) -> bool:
    """Whether `text` holds a marker saying recall returns lines that a purge through
    `purged` deleted."""
    if RECALL_PROMISE not in text:  # the usual case: no scan
        return False
    return any(
        found.group(1) is None or int(found.group(1)) < purged for found in _PROMISE.finditer(text)
    )


def purged_promise_note(text: str, purged: int, through: int) -> str:
    """The framing's sentence on such a marker in the summary `text` (through sequence
    `through`) after a purge through `purged`: it holds only for the sequences after
    `purged`, or for none; empty when the text holds no such marker."""
    if not _promises_purged(text, purged):
        return ""
    said = f" Where the summary says that {_PROMISED}, that"
    if purged >= through:
        return f"{said} no longer holds."
    return f"{said} holds only for sequences after {purged}."
