"""The calls indexes (`turns_by_call`, `_schema.CALLS_INDEX`, and by position for turns
making several calls, `calls_at_index`): the nearest call of an ID before or after a
sequence (SPEC §17.2) is found without reading the ledger, so an edit that takes a call made
once away from its turn, or a result whose call was never made, costs the write, not the
ledger, parallel calls included; the answer is the same as a read of every assistant turn
(turns making more calls than the indexes key, and a file read before they were added,
included); a file written before the index gets it at its next writing open."""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.store._call_pairs import nearest_call
from ledgerfold.store._schema import ADDED_INDEXES, INDEXED_CALLS
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


def _edit_steps(path: Path, exchanges: int, parallel: int = 1) -> int:
    """SQLite VM steps (in tens) of an edit taking a call made once away from its turn, the
    call and its result in the raw tail below `exchanges` covered exchanges of `parallel`
    calls made by one turn and their results."""
    rows: list[dict[str, object]] = [{"role": "user", "body": "q"}]
    for n in range(exchanges):
        made = [f"k{n}-{p}" for p in range(parallel)]
        rows.append({"role": "assistant", "body": f"call {n}", "meta": calls(*made)})
        rows += [{"role": "tool", "body": "result", "meta": {"tool_call_id": i}} for i in made]
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


def test_turns_making_several_calls_are_not_walked(tmp_path: Path) -> None:
    # Parallel calls: each turn makes two, or as many as the indexes key by position (a turn
    # making more is walked: rare, and only between the probes' find and the sequence).
    for parallel in (2, INDEXED_CALLS):
        small = _edit_steps(tmp_path / f"small{parallel}.db", 100, parallel)
        large = _edit_steps(tmp_path / f"large{parallel}.db", 2000, parallel)
        assert large <= 2 * small, parallel


def test_a_result_whose_call_was_never_made_does_not_walk_the_parallel_calls(
    tmp_path: Path,
) -> None:
    def steps(path: Path, exchanges: int) -> int:
        rows: list[dict[str, object]] = []
        for n in range(exchanges):
            rows.append({"role": "assistant", "body": "", "meta": calls(f"a{n}", f"b{n}")})
            rows += [
                {"role": "tool", "body": "r", "meta": {"tool_call_id": f"{x}{n}"}} for x in "ab"
            ]
        with SQLiteStore(path, durability="normal") as store:
            store.append_many(C, rows)
            found, _ = vm_steps(
                store, lambda: store.append(C, "tool", "r", meta={"tool_call_id": "never"})
            )
            return found

    assert steps(tmp_path / "large.db", 3000) <= 2 * steps(tmp_path / "small.db", 100)


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


@pytest.mark.parametrize(("many", "unindexed"), [(False, False), (True, False), (True, True)])
def test_the_nearest_call_is_the_one_every_assistant_turn_names(
    tmp_path: Path, many: bool, unindexed: bool
) -> None:
    rng = random.Random(7)
    ids = ["a", "b", "c", "d/e", "é"]
    # Turns making up to 12 calls: IDs at every indexed position and beyond them.
    fillers = [f"f{n}" for n in range(12)] if many else []
    with SQLiteStore(tmp_path / "s.db") as store:
        for n in range(300):
            kind = rng.random()
            if kind < 0.4:
                made = rng.sample(ids, rng.choice([1, 1, 2, 3]))
                if many:
                    made = rng.sample(fillers, rng.randrange(12)) + made
                    rng.shuffle(made)
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
    if unindexed:  # a file written before the indexes by position, opened read-only
        with sqlite3.connect(tmp_path / "s.db") as raw:
            for k in range(INDEXED_CALLS):
                raw.execute(f"DROP INDEX turns_by_call_at_{k}")
            raw.execute("DROP INDEX turns_by_many_calls")
    with SQLiteStore(tmp_path / "s.db", read_only=unindexed) as store:
        conn = store._connection()
        for call_id in [*ids, "never"]:
            for sequence in range(0, 302, 5):
                for before in (True, False):
                    got = nearest_call(conn, C, call_id, sequence, before=before)
                    want = _brute(conn, call_id, sequence, before)
                    assert (got and (got[0], json.loads(got[1]))) == (
                        want and (want[0], json.loads(want[1]))
                    )
        assert getattr(conn, "calls_indexed", None) is not unindexed  # the path taken


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


def test_a_writing_open_builds_each_missing_index_in_its_own_transaction(tmp_path: Path) -> None:
    path = tmp_path / "o.db"
    with SQLiteStore(path) as store:
        store.append(C, "assistant", "", id="a", meta=calls("x", "y"))
    names = [name for name, _ in ADDED_INDEXES]
    with sqlite3.connect(path) as conn:
        for name in names:
            conn.execute(f"DROP INDEX {name}")
    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(statements.append)
        return conn

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", traced)
        SQLiteStore(path).close()
    # Each build reads every turn: the write lock is held for one index at a time.
    builds = [n for n, s in enumerate(statements) if s.startswith("CREATE INDEX IF NOT EXISTS")]
    assert len(builds) == len(names)
    for first, second in itertools.pairwise(builds):
        assert "COMMIT" in statements[first:second]
