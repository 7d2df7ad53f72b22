"""`LedgerfoldSession.pop_item` retracts the newest turn: the ledger keeps its text, as any
retraction's. `pop_item(erase=True)` erases it (a user taking back a message they should not
have sent), as `clear_session` erases the whole session (SPEC §15.5, §16.5)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession

SECRET = "wombatpin2718"


def in_files(path: Path) -> bool:
    return any(
        file.exists() and SECRET.encode() in file.read_bytes()
        for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
    )


def popped(path: Path, **keywords: bool) -> object:
    async def run() -> object:
        session = LedgerfoldSession("s", path)
        await session.add_items([{"role": "user", "content": "hello"}])
        await session.add_items([{"role": "user", "content": f"my pin is {SECRET}"}])
        item = await session.pop_item(**keywords)
        assert [i["content"] for i in await session.get_items()] == ["hello"]
        session.close()
        return item

    return asyncio.run(run())


def test_pop_item_with_erase_leaves_nothing_of_the_item(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    item = popped(path, erase=True)
    assert isinstance(item, dict) and SECRET in item["content"]  # the caller gets it back
    assert not in_files(path)
    with lf.SQLiteStore(path) as store:
        assert store.search("s", SECRET, scope="all") == []


def test_pop_item_keeps_the_retracted_text_by_default(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    popped(path)
    assert in_files(path)  # a retraction: the ledger is the record


def test_pop_item_erase_must_be_a_bool(tmp_path: Path) -> None:
    async def run() -> None:
        session = LedgerfoldSession("s", tmp_path / "s.db")
        with pytest.raises(lf.InvalidInput, match="erase"):
            await session.pop_item(erase="yes")  # type: ignore[arg-type]
        session.close()

    asyncio.run(run())
