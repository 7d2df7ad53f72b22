"""A Parquet export of a database whose columns were changed by another tool: a value
that is not its column's (a sequence of 2.5, a flag of 2, a live state of 0.7, a sequence
stored as text) is a `StoreError` naming the table and column, never a value pyarrow
silently cut to fit (2.5 exported as sequence 2, a flag of 2 as true, state 0.7 as live)
nor pyarrow's own error, whose message quotes the stored value. Text that is not UTF-8 (a
summary's text stored as a blob of such bytes) is carried instead: null in its column, its
bytes in the row's `not_utf8` (`test_export_not_utf8.py`)."""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore, StoreError, create_summary_envelope
from ledgerfold.export import export_parquet

importlib.import_module("pyarrow")

SECRET = "card-4111"


def _ledger(path: Path) -> None:
    with SQLiteStore(path) as store:
        for index in range(6):
            store.append("c", "user" if index % 2 == 0 else "assistant", f"turn {index}")
        plan = store.start_plan("c", 2, "v1")
        envelope = create_summary_envelope(plan, store.load("c").turns, "s1", "v1", "summary")
        assert store.commit_summary(envelope).accepted


@pytest.mark.parametrize(
    ("update", "table", "column"),
    [
        ("UPDATE turns SET sequence = sequence + 0.5 WHERE id = ?", "turns", "sequence"),
        ("UPDATE turns SET sequence = 1e30 WHERE id = ?", "turns", "sequence"),
        (f"UPDATE turns SET sequence = '{SECRET}' WHERE id = ?", "turns", "sequence"),
        ("UPDATE turns SET protected = 2 WHERE id = ?", "turns", "protected"),
        ("UPDATE turns SET protected = 0.5 WHERE id = ?", "turns", "protected"),
        ("UPDATE turns SET state = 0.7 WHERE id = ?", "turns", "state"),
        ("UPDATE turns SET state = 1000 WHERE id = ?", "turns", "state"),
        (
            "UPDATE conversations SET revision = revision + 0.25 WHERE ? IS NOT NULL",
            "conversations",
            "revision",
        ),
        (
            "UPDATE summaries SET through_sequence = through_sequence + 0.9"
            " WHERE ? IS NOT NULL AND id = 's1'",
            "summaries",
            "through_sequence",
        ),
    ],
)
def test_a_number_that_is_not_its_columns_is_a_store_error(
    tmp_path: Path, update: str, table: str, column: str
) -> None:
    path = tmp_path / "ledger.db"
    _ledger(path)
    with sqlite3.connect(path) as conn:
        turn_id = conn.execute("SELECT id FROM turns ORDER BY sequence LIMIT 1 OFFSET 1").fetchone()
        assert conn.execute(update, turn_id).rowcount == 1
    conn.close()
    with pytest.raises(StoreError) as caught:
        export_parquet(path, tmp_path / "out")
    message = str(caught.value)
    assert f"column {column!r} of table {table}" in message, message
    assert SECRET not in message and "4111" not in message
    assert caught.value.__cause__ is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]  # nothing left behind
    done = run("export", str(path), "--parquet", str(tmp_path / "out"))
    assert done.exit_code == 2, done.output
    assert f"column {column!r} of table {table}" in done.output
    assert "Traceback" not in done.output and SECRET not in done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]


def test_sound_numbers_export_as_stored(tmp_path: Path) -> None:
    pq = importlib.import_module("pyarrow.parquet")
    path = tmp_path / "ledger.db"
    _ledger(path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE turns SET protected = 1, protection_reason = 'audit-evidence'"
            " WHERE sequence = 6"
        )
        stored = conn.execute(
            "SELECT pk, sequence, protected, state FROM turns ORDER BY pk"
        ).fetchall()
    conn.close()
    export_parquet(path, tmp_path / "out")
    turns = pq.read_table(tmp_path / "out" / "turns").sort_by("pk")
    exported = list(
        zip(
            *(turns.column(name).to_pylist() for name in ("pk", "sequence", "protected", "state")),
            strict=True,
        )
    )
    assert exported == [(pk, seq, bool(flag), state) for pk, seq, flag, state in stored]


def test_a_text_stored_as_a_blob_that_is_not_utf8_is_carried(tmp_path: Path) -> None:
    """It was a `StoreError` ("a value is not string"): the export refused the database."""
    pq = importlib.import_module("pyarrow.parquet")
    path = tmp_path / "ledger.db"
    _ledger(path)
    stored = SECRET.encode() + b"\xff"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE summaries SET text = ? WHERE id = 's1'", (stored,))
    conn.close()
    export_parquet(path, tmp_path / "out")
    (summary,) = pq.read_table(tmp_path / "out" / "summaries").to_pylist()
    assert (summary["id"], summary["text"], summary["not_utf8"]) == ("s1", None, [("text", stored)])
