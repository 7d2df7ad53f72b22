"""A purge must get past a row damaged in storage (SPEC §15.5). An assistant turn among
those purged (in a group) whose meta another tool replaced with JSON nested deeper than
Python's parser follows made the purge's reading of the calls it takes (and of the recall
calls among them) raise RecursionError: the purge failed with it, nothing purged. Such
meta names no call, as meta that is not JSON does; the purge takes the turn."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000


@pytest.mark.parametrize("summarised", [False, True])
def test_a_purge_takes_a_turn_whose_meta_is_nested_too_deep(
    tmp_path: Path, summarised: bool
) -> None:
    path = tmp_path / "p.db"
    with lf.SQLiteStore(path) as store:
        store.append_many(
            "c",
            [
                {"id": f"t{n}", "role": "user" if n % 2 else "assistant", "body": f"turn {n}"}
                for n in range(12)
            ],
        )
        if summarised:
            policy = lf.CompactionPolicy("v1", keep_tail=4, min_new_turns=1)
            assert lf.Compactor(store, policy).compact("c").accepted
    with sqlite3.connect(path) as conn:  # another tool's write, on an assistant turn
        conn.execute("UPDATE turns SET meta = ?, grp = 'g1' WHERE id = 't10'", (DEEP,))
    conn.close()
    with lf.SQLiteStore(path) as store:
        boundary = store.purge_through("c", 12, "retention", force=True)
        assert boundary.through_sequence == 12
        assert store.load("c").turns == ()
    with sqlite3.connect(path) as conn:
        (state,) = conn.execute("SELECT state FROM turns WHERE id = 't10'").fetchone()
    conn.close()
    assert state != 0  # purged, not live
