"""The reference for `LedgerfoldSession._items` (`get_items`' job), as it was before its fast
path (kept here for `test_agents_get_items_fast.py`): every turn of the context restored
anew (no memo), every item paired with its links and served through `sendable`'s walk."""

from __future__ import annotations

from typing import Any

from ledgerfold._context import SummaryItem, with_purge
from ledgerfold.integrations._agents_items import RestoredTurn
from ledgerfold.integrations._agents_served import Linked, sendable
from ledgerfold.integrations.openai_agents import LedgerfoldSession, _leading_system_text


def reference_items(session: LedgerfoldSession, limit: int | None) -> list[Any]:
    context = session.compactor.context(session.session_id)
    items: list[Linked] = []
    for item in context.items:
        if isinstance(item, SummaryItem):
            item = with_purge(item, context.history_boundary)
            content = session._framed(item)
            lead = _leading_system_text([made for made, _, _ in items])
            role = items[0][0]["role"] if lead is not None else "system"
            if lead is not None:
                items.clear()
                content = f"{lead}\n\n{content}"
            items.append(({"role": role, "content": content}, None, None))
            continue
        turn = RestoredTurn(item)
        made = turn.templates if turn.flat else turn.decoded()
        for made_item, (call, output) in zip(made, turn.links, strict=True):
            items.append((dict(made_item) if turn.flat else made_item, call, output))
    served = sendable(items)
    if limit is not None and limit >= 0:
        served = served[-limit:] if limit > 0 else []
    return served
