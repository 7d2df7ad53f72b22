"""The answers index (`turns_by_answer`) under writes: group-commit batches where a
recall_history call and a result of its ID stored before it meet (the (pk, None) marks),
rolled-back jobs, the answers index on old files and racing opens."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ledgerfold import SQLiteStore
from ledgerfold._worker import worker_for
from ledgerfold.store import _ledger

C = "c"


def calls(*ids: str, name: str = "recall_history") -> dict[str, str]:
    return {
        "tool_calls": json.dumps(
            [
                {"id": c, "type": "function", "function": {"name": name, "arguments": "{}"}}
                for c in ids
            ]
        )
    }


def hits(store: SQLiteStore) -> set[str]:
    return {h.turn_id for h in store.search(C, "pelican", scope="all", limit=100)}


def test_early_result_and_recall_call_in_one_batch(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "l.db") as store:
        store.append(C, "user", "hi", id="u")

        async def main() -> None:
            w = worker_for(store)
            await asyncio.gather(
                w.run(store.append, C, "tool", "pelican", id="r", meta={"tool_call_id": "x"}),
                w.run(store.append, C, "user", "pelican two", id="u2"),
                w.run(store.append, C, "assistant", "", id="a", meta=calls("x")),
                w.run(store.append, C, "tool", "pelican", id="r2", meta={"tool_call_id": "y"}),
            )

        asyncio.run(main())
        assert hits(store) == {"r2", "u2"}
    with SQLiteStore(tmp_path / "l.db") as store:
        assert hits(store) == {"r2", "u2"}


def test_a_rolled_back_call_gives_the_result_back(tmp_path: Path, monkeypatch: Any) -> None:
    real = _ledger.insert_turns

    def failing(conn: Any, conversation_id: str, specs: Any, *a: Any, **k: Any) -> Any:
        out = real(conn, conversation_id, specs, *a, **k)
        if any(t.id == "a" for t in out[0]):
            raise sqlite3.OperationalError("disk I/O error")
        return out

    with SQLiteStore(tmp_path / "l.db") as store:
        store.append(C, "user", "hi", id="u")
        store.append(C, "tool", "pelican", id="r0", meta={"tool_call_id": "x"})
        monkeypatch.setattr(_ledger, "insert_turns", failing)

        async def main() -> list[Any]:
            w = worker_for(store)
            return await asyncio.gather(
                w.run(store.append, C, "tool", "pelican", id="r", meta={"tool_call_id": "x"}),
                w.run(store.append, C, "assistant", "", id="a", meta=calls("x")),
                w.run(store.append, C, "assistant", "", id="b", meta=calls("z")),
                return_exceptions=True,
            )

        out = asyncio.run(main())
        assert isinstance(out[1], Exception)
        assert [t.id for t in store.load(C).turns] == ["u", "r0", "r", "b"]
        assert hits(store) == {"r0", "r"}
        monkeypatch.setattr(_ledger, "insert_turns", real)
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        assert hits(store) == set()


def test_old_file_without_the_index(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteStore(path) as store:
        store.append(C, "tool", "pelican", id="r", meta={"tool_call_id": "x"})
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX turns_by_answer")
    with SQLiteStore(path, read_only=True) as store:
        assert hits(store) == {"r"}
    with sqlite3.connect(path) as conn:
        assert not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'turns_by_answer'"
        ).fetchone()
    with SQLiteStore(path) as store:
        store.append(C, "assistant", "", id="a", meta=calls("x"))
        assert hits(store) == set()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'turns_by_answer'").fetchone()
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id, pk, sequence FROM turns WHERE conversation_id = ?"
            " AND role = 'tool' AND json_valid(meta) AND json_extract(meta, '$.tool_call_id') = ?"
            " AND sequence < ? AND state = ? ORDER BY sequence",
            ("c", "x", 5, 0),
        ).fetchall()
        assert "turns_by_answer" in str(plan)


def test_racing_opens_create_the_index_once(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteStore(path) as store:
        for n in range(50):
            store.append(C, "tool", "pelican", id=f"r{n}", meta={"tool_call_id": f"x{n}"})
    errors: list[BaseException] = []
    for _ in range(5):
        with sqlite3.connect(path) as conn:
            conn.execute("DROP INDEX IF EXISTS turns_by_answer")
        barrier = threading.Barrier(4)

        def open_one(barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                with SQLiteStore(path) as s:
                    s.append(C, "user", "hi")
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=open_one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
