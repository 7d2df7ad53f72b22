"""A live turn another tool damaged (body not UTF-8, meta not JSON): `context()` raises
`StoreError` naming the row (turn ID, sequence, column), never its body, on every path (no
summary, a summary's kept turns and tail, a stale summary); a body that is not UTF-8 made
it say only "cannot read column 'body'" with no row. The Agents SDK session and the
LangChain middleware surface that same error (no other exception, no hang)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from langchain_support import Scripted
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, StoreError
from ledgerfold.integrations.langchain import LedgerfoldMiddleware
from ledgerfold.integrations.openai_agents import LedgerfoldSession

PV = "v1"
CID = "c"
SECRET = "card 4111111111111111"
POLICY = CompactionPolicy(PV, keep_tail=3, min_new_turns=1, preserve_roles=("system",))
DAMAGE = {
    "body": "body = CAST(CAST(body AS BLOB) || X'FF' AS TEXT)",
    "meta": "meta = '{not json'",
}
#: Where the damaged turn lies: no summary; kept raw below the summary (the system prompt);
#: in the tail after it; a source of a summary gone stale.
WHERE = {"no-summary": "t3", "kept": "t0", "tail": "t8", "stale": "t3"}


def _ledger(path: Path, column: str, where: str) -> tuple[str, int]:
    with SQLiteStore(path) as store:
        store.append(CID, "system", f"{SECRET} prompt", id="t0")
        for n in range(1, 10):
            store.append(CID, "user" if n % 2 else "assistant", f"{SECRET} turn {n}", id=f"t{n}")
        if where != "no-summary":
            assert Compactor(store, POLICY).compact(CID, force=True).accepted
            assert store.context(CID, PV).fallback is None
        if where == "stale":
            store.edit(CID, "t2", body="edited")
        turn_id = WHERE[where]
        sequence = next(t.sequence for t in store.load(CID).turns if t.id == turn_id)
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE turns SET {DAMAGE[column]} WHERE id = ?", (turn_id,))
    conn.close()
    return turn_id, sequence


def _named(error: BaseException, column: str, turn_id: str, sequence: int) -> None:
    assert isinstance(error, StoreError)
    message = str(error)
    assert f"column {column}: turn {turn_id!r} (sequence {sequence})" in message, message
    assert SECRET not in message and SECRET not in repr(error)


@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("column", sorted(DAMAGE))
def test_context_names_the_damaged_row(tmp_path: Path, column: str, where: str) -> None:
    db = tmp_path / "agent.db"
    turn_id, sequence = _ledger(db, column, where)
    with SQLiteStore(db) as store:
        with pytest.raises(StoreError) as raised:
            store.context(CID, PV)
        _named(raised.value, column, turn_id, sequence)
        with pytest.raises(StoreError) as raised:
            Compactor(store, POLICY).context(CID)
        _named(raised.value, column, turn_id, sequence)
        store.append(CID, "user", "one more", id="t10")
        with pytest.raises(StoreError) as raised:
            Compactor(store, POLICY).compact(CID, force=True)
        _named(raised.value, column, turn_id, sequence)


@pytest.mark.parametrize("column", sorted(DAMAGE))
def test_the_agents_session_raises_the_same_error(tmp_path: Path, column: str) -> None:
    db = tmp_path / "agent.db"
    turn_id, sequence = _ledger(db, column, "tail")
    with SQLiteStore(db) as store:
        session = LedgerfoldSession(CID, store=store, policy=POLICY)  # type: ignore[arg-type]
        with pytest.raises(StoreError) as raised:
            asyncio.run(asyncio.wait_for(session.get_items(), 60))
        _named(raised.value, column, turn_id, sequence)


@pytest.mark.parametrize("column", sorted(DAMAGE))
def test_the_langchain_middleware_raises_the_same_error(tmp_path: Path, column: str) -> None:
    db = tmp_path / "agent.db"
    turn_id, sequence = _ledger(db, column, "tail")
    with SQLiteStore(db) as store:
        middleware = LedgerfoldMiddleware(store, CID, policy=POLICY)
        model = Scripted()
        agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
        message: dict[str, Any] = {"messages": [{"role": "user", "content": "hello"}]}
        with pytest.raises(StoreError) as raised:
            agent.invoke(message, {"configurable": {"thread_id": "sync"}})
        _named(raised.value, column, turn_id, sequence)
        with pytest.raises(StoreError) as raised:
            asyncio.run(
                asyncio.wait_for(agent.ainvoke(message, {"configurable": {"thread_id": "a"}}), 60)
            )
        _named(raised.value, column, turn_id, sequence)
        assert model.inputs == []  # the model never got a context without that turn
