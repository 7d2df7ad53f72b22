"""`LedgerfoldSession.add_items`' deferred compaction (the built-in summarizer's, run as the
store's next job) under what an agent developer does around it: calls that add nothing,
calls on one conversation at once, a batch whose commit fails. Real SQLite files; nothing
is timed."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import CompactionPolicy, InvalidInput
from ledgerfold.integrations.openai_agents import LedgerfoldSession

#: Due at once: every add_items of two or more new turns compacts.
EVERY_CALL = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)


def _exchange(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]


@pytest.mark.parametrize("added", [[], "not a list"])
def test_wait_compaction_after_an_add_items_adding_nothing_is_none(
    tmp_path: Path, added: Any
) -> None:
    # As documented: None when the latest add_items added nothing or raised, not the
    # outcome of the call before it.
    session = LedgerfoldSession("s", tmp_path / "n.db", policy=EVERY_CALL)

    async def scenario() -> tuple[Any, Any]:
        await session.add_items(_exchange(0) + _exchange(1))
        first = await session.wait_compaction()
        with contextlib.suppress(InvalidInput):
            await session.add_items(added)
        return first, await session.wait_compaction()

    try:
        first, latest = asyncio.run(scenario())
    finally:
        session.close()
    assert first is not None and first.accepted
    assert latest is None
