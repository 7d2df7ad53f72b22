"""`SQLiteStore(durability=...)`: "full" and "normal" are accepted and durable across a reopen
(normal puts the file in WAL mode); any other value is refused before a file is made."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from ledgerfold import InvalidInput, SQLiteStore

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import CONV  # noqa: E402

# -- durability -------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_durability_values_are_accepted_and_durable(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path, durability=durability) as store:
        store.append(CONV, "user", "kept")
    with SQLiteStore(path, durability=durability) as store:
        assert [turn.body for turn in store.load(CONV).turns] == ["kept"]
    if durability == "normal":  # WAL is a property of the file
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("bad", ["off", "FULL ", "", None, 1, True, b"full"])
def test_durability_refuses_other_values(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        SQLiteStore(tmp_path / "ledger.db", durability=bad)  # type: ignore[arg-type]
    assert caught.value.field == "durability"
    assert not (tmp_path / "ledger.db").exists()
