"""Why a conversation needs its operator's attention in `report` (the rows after the totals):
the reasons as text and the class that orders them, what is broken now first."""

from __future__ import annotations

from ledgerfold.store._rows import DAMAGED
from ledgerfold.store._stats import ConversationState

__all__ = ["FAILED_SINCE", "FALLING_BACK", "SUMMARISED_NOWHERE", "attention", "damaged_why"]

_FALLBACK_WHY = {
    "preserved-missing": "a protected or preserved turn below the summary was retracted",
    "duplicate-id": "a live turn holds the current summary's ID",
    DAMAGED: "its record was changed outside ledgerfold; the next compaction replaces it",
    "conversation-mismatch": "its record names another conversation",
}


#: The classes of attention, in the report's order: what is broken now first.
FALLING_BACK, SUMMARISED_NOWHERE, FAILED_SINCE = range(3)


def damaged_why(damage: str) -> str:
    """The reason of a row changed outside ledgerfold, `damage` saying which (as `list`
    names it)."""
    return f"a row was changed outside ledgerfold: {damage}"


def attention(
    state: ConversationState, failed: int, failure: str | None, accepted: bool, damaged: str | None
) -> tuple[int, tuple[str, ...]]:
    """Why a conversation needs attention (empty: it does not) and its class, the first of
    its reasons': its context falls back now (`FALLING_BACK`: a stale, damaged or unusable
    summary, its `stats()` fallback), purged turns are summarised nowhere
    (`SUMMARISED_NOWHERE`), or summaries failed since the last accepted one
    (`FAILED_SINCE`); a row changed outside ledgerfold (`damaged`, as `list` names it) is
    broken now. A rejected result is no reason (a race such as `superseded-plan` is
    normal): the conversation's summary counts show it. Reasons are data: the caller
    escapes them."""
    why = [(FALLING_BACK, damaged_why(damaged))] if damaged else []
    fallback = state.fallback
    if fallback is not None and fallback.startswith("stale-summary:"):
        reason = fallback.removeprefix("stale-summary:")
        told = f"{reason}: {_FALLBACK_WHY[reason]}" if reason in _FALLBACK_WHY else reason
        why.append(
            (
                FALLING_BACK,
                f"context falls back to raw turns: stale summary ({told or 'no reason'})",
            )
        )
    elif fallback is not None and fallback != "no-summary":
        told = f" ({_FALLBACK_WHY[fallback]})" if fallback in _FALLBACK_WHY else ""
        why.append((FALLING_BACK, f"context falls back to raw turns: {fallback}{told}"))
    if failed:
        newest = f" (newest: {failure})" if failure else ""
        since = " since the last accepted summary" if accepted else ", no summary accepted yet"
        why.append((FAILED_SINCE, f"{failed} failed{since}{newest}"))
    if state.purged and not state.summarised:
        why.append(
            (
                SUMMARISED_NOWHERE,
                "purged turns but no current summary: what was purged is summarised nowhere",
            )
        )
    elif state.purged and not state.covers_purged:
        # `stats().sealed_lost`: rebuilt from the live turns after an edit with no sealed
        # checkpoint left (SPEC §17.5), or compacted only after the purge.
        why.append(
            (
                SUMMARISED_NOWHERE,
                "purged turns the current summary does not cover: what was purged is"
                " summarised nowhere",
            )
        )
    return min((rank for rank, _ in why), default=FAILED_SINCE), tuple(text for _, text in why)
