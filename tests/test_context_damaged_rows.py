"""A `turns` row changed outside ledgerfold (a sequence stored as text) read by the store's
context: it is a damaged row, a `StoreError` naming table, column and turn, as `load` says
it (SPEC §12: a database failure raises `StoreError`); the context's read raised
`InvalidInput` ("sequence: must be int, got str"), an error that blames the caller's input."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, InvalidInput, SQLiteStore, StoreError


def _ledger(db: Path, *, summarised: bool) -> None:
    with SQLiteStore(db) as store:
        store.append_many(
            "c", [{"id": f"t{n}", "role": "user", "body": f"turn {n}"} for n in range(1, 9)]
        )
        if summarised:
            policy = CompactionPolicy("v1", keep_tail=3, min_new_turns=1)
            assert Compactor(store, policy).compact("c").accepted
    with sqlite3.connect(db) as conn:  # another tool's write: the newest turn's sequence
        conn.execute("UPDATE turns SET sequence = 'eight' WHERE id = 't8'")
    conn.close()


@pytest.mark.parametrize("summarised", [False, True], ids=["raw", "summarised"])
def test_a_damaged_sequence_in_the_context_is_a_store_error(
    tmp_path: Path, summarised: bool
) -> None:
    db = tmp_path / "agent.db"
    _ledger(db, summarised=summarised)
    with (
        SQLiteStore(db, read_only=True) as store,
        pytest.raises(StoreError, match="damaged row in table turns, column sequence") as caught,
    ):
        store.context("c", "v1")
    assert not isinstance(caught.value, InvalidInput)
    assert "'t8'" in str(caught.value)
