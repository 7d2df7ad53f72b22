"""Erasing a tool call retracted earlier (SPEC §15.5, §17.2), on a real SQLite file:
`retract` of a call takes the results answering it along, and `retract(..., erase=True)`
of that call later erases those results too, as erasing it at once does (a result quotes
what its call fetched). It used to blank the call alone: the results' text stayed in the
database file. A result of a later call made with the same ID is that call's and stays."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ledgerfold import SQLiteStore

CONV = "c"


def calls(*ids: str) -> dict[str, str]:
    return {"tool_calls": json.dumps([{"id": i, "type": "function"} for i in ids])}


def file_bytes(path: Path) -> bytes:
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_erasing_a_retracted_call_erases_the_results_retracted_with_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        store.append(CONV, "user", "look it up", id="u1")
        store.append(CONV, "assistant", "calling", id="a1", meta=calls("k1", "k2"))
        store.append(CONV, "tool", "sentinelresultone", id="r1", meta={"tool_call_id": "k1"})
        store.append(CONV, "tool", "sentinelresulttwo", id="r2", meta={"tool_call_id": "k2"})
        store.retract(CONV, "a1")  # takes r1 and r2 along
        store.append(CONV, "assistant", "calling again", id="a2", meta=calls("k1"))
        store.append(CONV, "tool", "sentinelresultlater", id="r3", meta={"tool_call_id": "k1"})
        store.retract(CONV, "a1", erase=True)
        assert [t.id for t in store.load(CONV).turns] == ["u1", "a2", "r3"]
    with sqlite3.connect(path) as db:
        bodies = dict(db.execute("SELECT id, body FROM turns"))
    assert bodies["a1"] == bodies["r1"] == bodies["r2"] == ""
    assert bodies["r3"] == "sentinelresultlater"  # the later call's result stays
    data = file_bytes(path)
    assert b"sentinelresultone" not in data and b"sentinelresulttwo" not in data


def test_erasing_a_call_erases_a_result_retracted_on_its_own(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        store.append(CONV, "assistant", "calling", id="a1", meta=calls("k1"))
        store.append(CONV, "tool", "sentinelresultold", id="r1", meta={"tool_call_id": "k1"})
        store.retract(CONV, "r1")  # the call is open again
        store.append(CONV, "tool", "sentinelresultnew", id="r2", meta={"tool_call_id": "k1"})
        store.retract(CONV, "a1", erase=True)  # takes r2 along, and r1 retracted before
        assert store.load(CONV).turns == ()
    data = file_bytes(path)
    assert b"sentinelresultold" not in data and b"sentinelresultnew" not in data
