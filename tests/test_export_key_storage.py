"""A Parquet export of a database where another tool stored a conversation key as a blob or
as a number (in a `conversations` table it made again without text affinity). A blob whose
bytes are UTF-8 was exported as text: the same `id` as the real conversation whose key is
that text, so the two were one to a reader (`ledgerfold.dask` checked their rows as one
conversation); an integer or real key failed the whole export. Such a value is now carried
as text that is not UTF-8 is (null in its column, its bytes in `not_utf8`), its storage
class in the row's `stored_as` map (format version 4), and `ledgerfold.dask` reads it back
as the command reads the database: its verdicts are the command's."""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.export import FORMAT_VERSION, TABLES, export_parquet
from ledgerfold.revalidate import revalidate_database

dask = importlib.import_module("dask")
ldask = importlib.import_module("ledgerfold.dask")
pq = importlib.import_module("pyarrow.parquet")

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
SAME = ("conversations", "summaries_checked", "current", "stale", "turns_hashed", "stale_summaries")
#: The table as another tool may make it again: the same columns, none of them typed.
_UNTYPED = """
PRAGMA foreign_keys = OFF;
CREATE TABLE conversations_copy (
    id PRIMARY KEY, revision, last_sequence, current_summary, pruned_count DEFAULT 0
);
INSERT INTO conversations_copy
    SELECT id, revision, last_sequence, current_summary, pruned_count FROM conversations;
DROP TABLE conversations;
ALTER TABLE conversations_copy RENAME TO conversations;
"""
#: Each key conversation c2 is given: the stored value, and the text conversation of the
#: same characters beside it.
KEYS: dict[str, tuple[Any, str]] = {
    "blob": (b"c3", "c3"),
    "integer": (42, "42"),
    "real": (4.5, "4.5"),
}


def _ledger(path: Path, kind: str) -> Path:
    """Conversations c1, c2 and one whose key is the text `KEYS[kind][1]`, each summarised,
    a cited turn of c1 changed behind the store's back; then c2's key made the blob or
    number (a blob in every table that holds it; a number in `conversations`, the table
    made again, as typed tables store a number as text)."""
    stored, text = KEYS[kind]
    with SQLiteStore(path) as store:
        for c in ("c1", "c2", text):
            store.append(c, "system", "sys prompt")
            for n in range(5):
                store.append(c, "user", f"turn {n} of {c}", id=f"t{n}")  # IDs shared
            assert Compactor(store, POLICY).compact(c, force=True).accepted
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE turns SET body = 'changed' WHERE conversation_id = 'c1' AND id = 't1'")
        conn.commit()
        tables = ["conversations"]
        if kind == "blob":
            tables += ["turns", "source_runs", "summaries"]
        else:
            conn.executescript(_UNTYPED)
        conn.execute("PRAGMA foreign_keys = OFF")
        for table in tables:
            column = "id" if table == "conversations" else "conversation_id"
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = 'c2'", (stored,))
        conn.commit()
        assert conn.execute(
            "SELECT typeof(id) FROM conversations WHERE id = ?", (stored,)
        ).fetchall() == [(kind,)]
    finally:
        conn.close()
    return path


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_a_key_stored_as_no_text_is_carried_with_its_storage(tmp_path: Path, kind: str) -> None:
    stored, text = KEYS[kind]
    db = _ledger(tmp_path / "ledger.db", kind)
    out = tmp_path / "parquet"
    report = export_parquet(db, out)
    assert report.conversations == 3
    assert FORMAT_VERSION == 4
    rows = pq.read_table(out / "conversations").to_pylist()
    assert [row["id"] for row in rows].count(text) == 1  # the text key alone
    carried = [row for row in rows if row["not_utf8"]]
    assert len(carried) == 1
    (row,) = carried
    raw = stored if isinstance(stored, bytes) else str(stored).encode()
    assert row["id"] is None and row["not_utf8"] == [("id", raw)]
    assert row["stored_as"] == [("id", kind)]
    assert all(row["stored_as"] is None for row in rows if row is not carried[0])
    if kind == "blob":  # the conversation's rows in the other tables say so too
        turns = pq.read_table(out / "turns").to_pylist()
        assert sum(row["stored_as"] == [("conversation_id", "blob")] for row in turns) == 6
        assert sum(row["conversation_id"] == text for row in turns) == 6
    for table in TABLES:
        assert "stored_as" in pq.read_table(out / table).schema.names


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_dask_gives_the_commands_verdicts(tmp_path: Path, kind: str) -> None:
    db = _ledger(tmp_path / "ledger.db", kind)
    out = tmp_path / "parquet"
    export_parquet(db, out)  # one part: the two keys side by side
    expected = revalidate_database(db, mark_stale=False).as_json()
    with dask.config.set(scheduler="sync"):
        frame, aggregate = ldask.revalidate_parquet(out)
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    # c1's changed source, and c2's summary, unchecked: no command can name its key (a
    # number in `conversations` alone: its record names the old key).
    unchecked = "damaged-record" if kind == "blob" else "conversation-mismatch"
    reasons = sorted(row["reason"] for row in expected["stale_summaries"])
    assert reasons == sorted([unchecked, "source-modified"])
    assert len(frame.compute()) == expected["summaries_checked"] == 3


#: Conversation keys another tool stored as no text: text that is not UTF-8, a blob of the
#: same bytes, and a blob that sorts before every text key by its bytes (`a0`).
_RAW_KEYS = {"c2": "CAST(X'6332FF' AS TEXT)", "c3": "X'6332FF'", "c4": "X'6130'"}


@pytest.mark.parametrize("turns_per_file", [1, 1000])
def test_dask_keeps_text_that_is_not_utf8_apart_from_a_blob(
    tmp_path: Path, turns_per_file: int
) -> None:
    """The command orders text keys (those that are not UTF-8 too) before every blob, as
    SQLite does; `ledgerfold.dask` read text that is not UTF-8 and a blob alike, as bytes,
    and put the blob `a0` first, its verdicts in another order than the command's."""
    db = tmp_path / "ledger.db"
    with SQLiteStore(db) as store:
        for c in ("c1", *_RAW_KEYS):
            store.append(c, "system", "sys prompt")
            for n in range(5):
                store.append(c, "user", f"turn {n} of {c}", id=f"t{n}")
            assert Compactor(store, POLICY).compact(c, force=True).accepted
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("UPDATE turns SET body = 'changed' WHERE conversation_id = 'c1' AND id = 't1'")
        for old, stored in _RAW_KEYS.items():
            for table in ("conversations", "turns", "source_runs", "summaries"):
                column = "id" if table == "conversations" else "conversation_id"
                conn.execute(f"UPDATE {table} SET {column} = {stored} WHERE {column} = '{old}'")
        conn.commit()
        kinds = conn.execute("SELECT typeof(id), hex(id) FROM conversations ORDER BY id").fetchall()
        assert kinds == [("text", "6331"), ("text", "6332FF"), ("blob", "6130"), ("blob", "6332FF")]
    finally:
        conn.close()
    out = tmp_path / "parquet"
    export_parquet(db, out, turns_per_file=turns_per_file)
    expected = revalidate_database(db, mark_stale=False).as_json()
    names = ["c2\ufffd", "a0", "c2\ufffd"]
    assert [row["conversation"] for row in expected["stale_summaries"]][:3] == names
    with dask.config.set(scheduler="sync"):
        frame, aggregate = ldask.revalidate_parquet(out)
    assert aggregate["stale_summaries"] == expected["stale_summaries"]
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    if turns_per_file > 5:  # one part: its rows in the command's order
        rows = frame.compute()
        assert list(rows["conversation"]) == ["c1", *names]
