"""What `LedgerfoldSession.get_items` serves of the context's turns (`sendable`), and so what
`pop_item` takes (`popped`): the item `get_items` serves last, as the SDK's rewind expects
(`agents.run_internal.session_persistence._rewind_session_tail_suffix` reads the last `n`
items with `get_items(limit=n)`, then pops `n` items and compares each with them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledgerfold._context import SummaryItem
from ledgerfold.integrations._agents_items import RestoredTurns, is_input, kind

__all__ = ["Linked", "Popped", "popped", "sendable", "served_at"]

#: One served item and its links: the item, the call it makes, the call it answers.
Linked = tuple[Any, str | None, str | None]


def sendable(entries: Sequence[Linked]) -> list[Any]:
    """The items to serve (`served_at`)."""
    return [entries[at][0] for at in served_at(entries)]


def served_at(entries: Sequence[Linked]) -> list[int]:
    """The positions of the entries to serve, in the order served: context order but for
    results (SPEC §17.2): a result answers the nearest call of its ID before it and is left
    out when there is none (the API refuses it); a result that came after a message to the
    model (a user interjecting before the tool returned: a user, system or developer
    message) is served before that message, so that a Chat Completions model gets every
    `tool_calls` message answered by the tool messages right after it. The items of the
    model's own response are not reordered. A call nothing answers stays (the SDK leaves it
    out of the model's input). A reasoning item not followed by an item the model wrote with
    it (`pop_item` took its message or call, or a run stopped after it) is left out: the API
    refuses a reasoning item without its following item."""
    maker: dict[str, int] = {}
    first_result: dict[tuple[int, str], int] = {}  # (call's position, call ID) -> result's
    makers: list[int | None] = []
    for at, (_, call, output) in enumerate(entries):
        made = None
        if call is not None:
            maker[call] = at
        elif output is not None:
            made = maker.get(output)
            if made is not None:
                first_result.setdefault((made, output), at)
        makers.append(made)
    served: list[int] = []
    moved: set[int] = set()
    waiting: dict[tuple[int, str], None] = {}  # calls served whose result has not been
    for at, (item, call, output) in enumerate(entries):
        if at in moved:
            continue
        if waiting and output is None and isinstance(item, Mapping) and is_input(item):
            # A message to the model while calls wait: their later results go first.
            for key in waiting:
                later = first_result.get(key)
                if later is not None and later > at:
                    served.append(later)
                    moved.add(later)
            waiting.clear()
        if call is not None:
            waiting[(at, call)] = None
        elif output is not None:
            made = makers[at]
            if made is None:
                continue  # its call is not served: the API refuses it
            waiting.pop((made, output), None)
        served.append(at)
    return _followed(entries, served)


def _followed(entries: Sequence[Linked], served: list[int]) -> list[int]:
    """`served` without the reasoning items that no item the model wrote follows (the next
    item served is one it reads, or none), read from the end, so a run of reasoning items
    before such a place goes as a whole."""
    kept: list[int] = []
    follows = False  # the next item kept is one the model wrote
    for at in reversed(served):
        item = entries[at][0]
        mapping = isinstance(item, Mapping)
        if mapping and kind(item) == "reasoning" and not follows:
            continue
        kept.append(at)
        follows = not (mapping and is_input(item))
    kept.reverse()
    return kept


#: What `pop_item` takes (`popped`): the position of the context item whose item `get_items`
#: serves last, that item (None for the summary), and the positions of the turns after it of
#: which `get_items` serves nothing.
Popped = tuple[int, Any, list[int]]

#: The summary's item, for `served_at`: a message to the model, like the one served.
_SUMMARY = {"role": "system", "content": ""}


def popped(context_items: Sequence[Any], memo: RestoredTurns) -> Popped | None:
    """What `pop_item` takes of the context's items (`SummaryItem`s and `TurnItem`s, their
    turns restored through `memo`): the one whose item `get_items` serves last, so that
    `get_items(limit=n)` is what the next `n` pops give (newest first); and with it the turns
    after it that `get_items` leaves out (a reasoning item that no item the model wrote
    follows, a result whose call is not served: the SDK's `SQLiteSession` would pop them
    first, and a model item appended later would serve that reasoning item with it). None
    when `get_items` serves nothing."""
    entries: list[Linked] = []
    owners: list[int] = []  # per entry: the position of the context item it is of
    for position, item in enumerate(context_items):
        if isinstance(item, SummaryItem):
            entries.append((_SUMMARY, None, None))
            owners.append(position)
            continue
        turn = memo.get(item)
        made = turn.templates if turn.flat else turn.decoded()
        for made_item, (call, output) in zip(made, turn.links, strict=True):
            entries.append((dict(made_item) if turn.flat else made_item, call, output))
            owners.append(position)
    order = served_at(entries)
    if not order:
        return None
    last = order[-1]
    owner = owners[last]
    shown = {owners[at] for at in order}
    left_out = [at for at in range(owner + 1, len(context_items)) if at not in shown]
    item = None if isinstance(context_items[owner], SummaryItem) else entries[last][0]
    return owner, item, left_out
