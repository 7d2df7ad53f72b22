"""Evidence in summaries (SPEC §16.3, §16.5): the source turns a summary's text cites.

A citation is `[seq N` anywhere in the text (case-sensitive, N in ASCII digits, at most
the largest sequence); only the first number in a bracket counts (`[seq 12, 15]` cites 12),
since summarizers are asked for one bracket per turn. A cited sequence that is not one of
the summary's sources is not evidence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ledgerfold import _validate
from ledgerfold._context import SummaryItem
from ledgerfold._model import Conversation, Turn
from ledgerfold._summary import SummaryEnvelope

__all__ = ["citations", "cited_sequences", "cited_turns"]

# ASCII digits: `[seq ٣]` is not `[seq 3]`.
_CITATION = re.compile(r"\[seq ([0-9]+)(?![0-9])")
#: A sequence fits in an i64 (SPEC §2): a number of more digits cites no turn.
_SEQUENCE_DIGITS = 19
_MAX_SEQUENCE = 2**63 - 1


def _sequence(digits: str) -> int | None:
    """The sequence `digits` names, or None when no sequence is that large (and Python
    refuses to read a number of more than 4,300 digits as an int)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _SEQUENCE_DIGITS:
        return None
    value = int(significant)
    return value if value <= _MAX_SEQUENCE else None


def cited_sequences(text: str) -> set[int]:
    """The sequences `text` cites (a summarizer's text may hold any number after `[seq `)."""
    found = (_sequence(match.group(1)) for match in _CITATION.finditer(text))
    return {sequence for sequence in found if sequence is not None}


def cited_turns(text: str, source_ids: Iterable[str], turns: Iterable[Turn]) -> list[Turn]:
    """The turns among `turns` that are sources and whose sequence `text` cites, each once,
    in ascending sequence."""
    cited = cited_sequences(text)
    if not cited:
        return []
    sources = set(source_ids)
    found = {turn.id: turn for turn in turns if turn.sequence in cited and turn.id in sources}
    return sorted(found.values(), key=lambda turn: turn.sequence)


def citations(
    summary: SummaryEnvelope | SummaryItem, conversation: Conversation
) -> tuple[str, ...]:
    """The IDs of the summary's sources present in `conversation` whose sequence its text
    cites (`[seq N`), each once, in ascending sequence. Purged or retracted sources are not
    in a conversation and so left out; whether the summary is current is not checked."""
    _validate.instance("summary", summary, (SummaryEnvelope, SummaryItem))
    conversation = _validate.conversation(conversation)
    cited = cited_sequences(summary.text)
    if not cited:
        return ()
    present = (
        turn
        for turn_id in summary.source_ids
        if (turn := conversation.get(turn_id)) is not None and turn.sequence in cited
    )
    return tuple(turn.id for turn in cited_turns(summary.text, summary.source_ids, present))
