"""`clear_session` is one transaction (SPEC §15.5's `delete_conversation`): a process killed
at any point of it leaves the session either whole or gone — its turns, earlier versions,
summaries (the sealed one too) and purge boundary together — and another session of the
same file untouched. The kill points are SQLite virtual-machine steps, not times."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession

#: Seals each summary: the turns it covers are purged beyond the newest 2.
SEALING = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2, retain_turns=2)

#: Opens the file, counts SQLite's steps (in tens) from `clear_session` on, and exits
#: the process at once at step `argv[2]` (0: never; the count is printed at the end).
_CLEAR = """
import asyncio, os, sys
from ledgerfold import SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession
store = SQLiteStore(sys.argv[1])
session = LedgerfoldSession("s", store=store)
kill_at, steps = int(sys.argv[2]), [0]
def step():
    steps[0] += 1
    if steps[0] == kill_at:
        os._exit(9)
    return 0
store._connection().set_progress_handler(step, 10)
asyncio.run(session.clear_session())
print(steps[0])
"""


def _seed(path: Path) -> None:
    store = SQLiteStore(path)
    session = LedgerfoldSession("s", store=store, policy=SEALING)
    other = LedgerfoldSession("o", store=store, policy=SEALING)

    async def scenario() -> None:
        for n in range(8):
            await session.add_items(
                [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]
            )
            await other.add_items([{"role": "user", "content": f"Q{n}"}])
        await session.pop_item()  # an earlier version of a turn: a retraction

    asyncio.run(scenario())
    store.close()


def _snapshot(path: Path) -> tuple[Any, ...]:
    store = SQLiteStore(path)
    try:
        return (
            [turn.id for turn in store.load("s").turns],
            [record.envelope.id for record in store.summary_history("s")],
            store.history_boundary("s"),
            [turn.body for turn in store.load("o").turns],
            [record.envelope.id for record in store.summary_history("o")],
        )
    finally:
        store.close()


def _clear(path: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CLEAR, str(path), str(kill_at)],
        capture_output=True,
        text=True,
        timeout=300,  # a safety net for a hung child, not a timing
    )


def test_a_clear_session_killed_anywhere_leaves_the_session_whole_or_gone(
    tmp_path: Path,
) -> None:
    seed = tmp_path / "seed.db"
    _seed(seed)
    before = _snapshot(seed)
    assert before[1] and before[2] is not None  # summaries, and a purge boundary

    whole = tmp_path / "whole.db"
    shutil.copy(seed, whole)
    done = _clear(whole, 0)
    assert done.returncode == 0, done.stderr
    steps = int(done.stdout.split()[-1])
    gone = _snapshot(whole)
    assert gone[:3] == ([], [], None) and gone[3:] == before[3:]

    outcomes = set()
    for kill_at in sorted({1, *range(steps // 8, steps, max(1, steps // 8)), steps - 1} - {0}):
        path = tmp_path / f"killed-{kill_at}.db"
        shutil.copy(seed, path)
        killed = _clear(path, kill_at)
        assert killed.returncode == 9, (kill_at, killed.stderr)
        after = _snapshot(path)
        assert after in (before, gone), kill_at
        outcomes.add(after == before)
    assert True in outcomes  # killed before the commit at least once
