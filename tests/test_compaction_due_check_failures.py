"""A database failure in the reads a compaction makes before registering its plan (the
back-off's `consecutive_failures`, the trigger's `context()`) is a `failed`/`store-error`
outcome with its event, as a failure registering the plan or saving the summary is (SPEC
§13: `failed` when the save failed; a failed compaction changed nothing), not the store's
`StoreError` raised from `compact()`. A row changed outside ledgerfold is still raised.
Real SQLite files, made to fail: a page overwritten, a table renamed by another tool."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

CID = "c"
#: The first read of a compaction: `context()` with a trigger, else `consecutive_failures`.
POLICIES = {
    "trigger": lf.CompactionPolicy("v1", keep_tail=2, trigger_tokens=10, min_new_turns=2),
    "no-trigger": lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=2),
}
#: What each first read reads and nothing before it does: the page overwritten.
READ_BY = {"trigger": ("turns", 3), "no-trigger": ("summaries_by_conversation", 0)}


def _ledger(path: Path) -> Path:
    with lf.SQLiteStore(path) as store:
        store.append_many(
            CID,
            [
                {"role": "user" if n % 2 else "assistant", "body": f"turn {n} " + "x" * 600}
                for n in range(40)
            ],
        )
    return path


def _overwrite_a_page(path: Path, name: str, leaf: int) -> None:
    """Overwrite a page of table or index `name` (its `leaf`-th leaf page) with garbage:
    a read of it fails as `database disk image is malformed`."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [
            row[0]
            for row in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
                (name,),
            )
        ]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    at = (pages[leaf] - 1) * size
    data[at : at + size] = b"\xee" * size
    path.write_bytes(bytes(data))


def _files(path: Path) -> tuple[bytes, ...]:
    return tuple(p.read_bytes() if p.exists() else b"" for p in (path, Path(f"{path}-wal")))


@pytest.mark.parametrize("run", ["compact", "acompact"])
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_failed_read_before_the_plan_is_a_failed_compaction(
    tmp_path: Path, policy: str, run: str
) -> None:
    path = _ledger(tmp_path / "f.db")
    _overwrite_a_page(path, *READ_BY[policy])
    events: list[lf.Event] = []
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(store, POLICIES[policy], on_event=events.append)
        before = _files(path)
        outcome = (
            compactor.compact(CID) if run == "compact" else asyncio.run(compactor.acompact(CID))
        )
        assert _files(path) == before  # nothing written
    assert outcome == lf.CompactionOutcome("failed", None, "store-error")
    assert [(event.name, event.reason) for event in events] == [
        ("compaction.failed", "store-error")
    ]


def test_add_items_stores_its_items_when_the_trigger_check_fails(tmp_path: Path) -> None:
    """The Agents session's deferred compaction asks the trigger in the job that appends:
    a failed read there raised from `add_items`, whose items were stored all the same."""
    path = tmp_path / "s.db"
    with lf.SQLiteStore(path) as store:
        store.append_many("s", [{"role": "user", "body": f"turn {n}"} for n in range(10)])
    with sqlite3.connect(path) as conn:  # another tool: the context's boundary read fails
        conn.execute("ALTER TABLE history_boundaries RENAME TO elsewhere")
    conn.close()
    session = LedgerfoldSession("s", path, policy=POLICIES["trigger"])

    async def scenario() -> Any:
        await session.add_items([{"role": "user", "content": "q"}])
        return await session.wait_compaction()

    try:
        outcome = asyncio.run(scenario())
    finally:
        session.close()
    assert outcome == lf.CompactionOutcome("failed", None, "store-error")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 11
    conn.close()


@pytest.mark.parametrize("run", ["compact", "acompact"])
def test_a_damaged_row_read_by_the_trigger_check_is_still_raised(tmp_path: Path, run: str) -> None:
    """As when the plan's registration reads it: the ledger cannot be read, which no retry
    mends (`compact()` raises the store's error naming the row)."""
    path = _ledger(tmp_path / "d.db")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE turns SET meta = 'not json' WHERE sequence = 1")
    conn.close()
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(store, POLICIES["trigger"])
        with pytest.raises(lf.StoreError, match="damaged row in table turns"):
            compactor.compact(CID) if run == "compact" else asyncio.run(compactor.acompact(CID))
