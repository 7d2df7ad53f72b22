"""The calls index (`turns_by_call`, `_schema.CALLS_INDEX`): the nearest call of an ID
before or after a sequence (SPEC §17.2) is found without reading the ledger, so an edit that
takes a call made once away from its turn costs the edit, not the ledger; the answer is the
same as a read of every assistant turn, turns making several calls included; a file written
before the index gets it at its next writing open."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.store._call_pairs import nearest_call
from steps_support import vm_steps

C = "c"


def calls(*ids: str) -> dict[str, str]:
    return {
        "tool_calls": json.dumps(
            [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ]
        )
    }


def _edit_steps(path: Path, exchanges: int) -> int:
    """SQLite VM steps (in tens) of an edit taking a call made once away from its turn, the
    call and its result in the raw tail below `exchanges` covered call-and-result pairs."""
    rows: list[dict[str, object]] = [{"role": "user", "body": "q"}]
    for n in range(exchanges):
        rows += [
            {"role": "assistant", "body": f"call {n}", "meta": calls(f"k{n}")},
            {"role": "tool", "body": f"result {n}", "meta": {"tool_call_id": f"k{n}"}},
        ]
    with SQLiteStore(path, durability="normal") as store:
        store.append_many(C, rows)
        Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1)).compact(C)
        store.append(C, "assistant", "calling", id="one", meta=calls("once"))
        store.append(C, "tool", "answer", id="r-one", meta={"tool_call_id": "once"})
        steps, _ = vm_steps(store, lambda: store.edit(C, "one", meta={}))
        assert store.current_summary(C) is not None
        return steps


def test_an_edit_taking_a_call_made_once_away_does_not_walk_the_ledger(tmp_path: Path) -> None:
    small = _edit_steps(tmp_path / "small.db", 100)
    large = _edit_steps(tmp_path / "large.db", 3000)
    assert large <= 2 * small


def _brute(
    conn: sqlite3.Connection, call_id: str, sequence: int, before: bool
) -> tuple[int, str] | None:
    found = [
        (int(seq), json.dumps(call, separators=(",", ":")))
        for seq, meta in conn.execute(
            "SELECT sequence, meta FROM turns WHERE conversation_id = ? AND role = 'assistant'"
            " AND state = 0 AND meta IS NOT NULL ORDER BY sequence",
            (C,),
        )
        for call in json.loads(json.loads(meta).get("tool_calls", "[]"))
        if call["id"] == call_id and (seq < sequence if before else seq > sequence)
    ]
    if not found:
        return None
    return found[-1] if before else found[0]


def test_the_nearest_call_is_the_one_every_assistant_turn_names(tmp_path: Path) -> None:
    rng = random.Random(7)
    ids = ["a", "b", "c", "d/e", "é"]
    with SQLiteStore(tmp_path / "s.db") as store:
        for n in range(300):
            kind = rng.random()
            if kind < 0.4:
                made = rng.sample(ids, rng.choice([1, 1, 2, 3]))
                store.append(C, "assistant", "", id=f"t{n}", meta=calls(*made))
            elif kind < 0.6:
                store.append(C, "tool", "r", id=f"t{n}", meta={"tool_call_id": rng.choice(ids)})
            else:
                store.append(C, "user", "u", id=f"t{n}")
        live = {turn.id for turn in store.load(C).turns}
        for n in range(0, 300, 7):
            if f"t{n}" in live:
                store.retract(C, f"t{n}")
                live = {turn.id for turn in store.load(C).turns}
        conn = store._connection()
        for call_id in [*ids, "never"]:
            for sequence in range(0, 302, 5):
                for before in (True, False):
                    got = nearest_call(conn, C, call_id, sequence, before=before)
                    want = _brute(conn, call_id, sequence, before)
                    assert (got and (got[0], json.loads(got[1]))) == (
                        want and (want[0], json.loads(want[1]))
                    )


def test_old_file_without_the_index(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteStore(path) as store:
        store.append(C, "assistant", "", id="a", meta=calls("x"))
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX turns_by_call")
    with SQLiteStore(path, read_only=True) as store:
        found = nearest_call(store._connection(), C, "x", 5, before=True)
        assert found is not None and found[0] == 1
    with SQLiteStore(path) as store:
        store.append(C, "tool", "r", id="r", meta={"tool_call_id": "x"})
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'turns_by_call'").fetchone()
