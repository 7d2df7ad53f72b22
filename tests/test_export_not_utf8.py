"""A Parquet export of a database holding text that is not UTF-8 (another tool's write: a
turn's ID, role, group or meta, a summary record's text or plan, a cited source ID, a
conversation key). The export failed with `StoreError` (or, for a conversation key, with
SQLite's own error, which quotes the stored bytes); it now carries such a value: null in its
column, its stored bytes in the row's `not_utf8` map, and `ledgerfold.dask` reads them back
as the command reads them, so that the cluster's verdicts are the command's on the same
database, in a UTF-8 file and in a UTF-16 one (where the text is a lone surrogate), with
every conversation a part of its own (a damaged key is then a part's bound)."""

from __future__ import annotations

import importlib
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.export import TABLES, export_parquet
from ledgerfold.revalidate import revalidate_database

dask = importlib.import_module("dask")
ldask = importlib.import_module("ledgerfold.dask")
pq = importlib.import_module("pyarrow.parquet")

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from revalidate_support import DASK_SAME as SAME  # noqa: E402
from revalidate_support import encoded_file  # noqa: E402

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
#: Stored text that is not valid in the file's encoding: a byte that is not UTF-8, a lone
#: surrogate in UTF-16 (SQLite converts it to bytes that are not UTF-8 either).
NOT_TEXT = {"UTF-8": "X'ff'", "UTF-16le": "X'00d8'"}
_CURRENT = "(SELECT current_summary FROM conversations WHERE id = 'c1')"
_RUN = f"(SELECT source_run FROM summaries WHERE pk = {_CURRENT})"
#: Each damage, `{}` the stored text that is not text, and the table and column it lands in.
DAMAGE = {
    "tail-id": ("UPDATE turns SET id = {} WHERE id = 'c1-tail2'", "turns", "id"),
    "cited-id": ("UPDATE turns SET id = {} WHERE id = 'c1-u2'", "turns", "id"),
    "tail-role": ("UPDATE turns SET role = {} WHERE id = 'c1-tail2'", "turns", "role"),
    "cited-meta": ("UPDATE turns SET meta = {} WHERE id = 'c1-u1'", "turns", "meta"),
    "cited-group": ("UPDATE turns SET grp = {} WHERE id = 'c1-u1'", "turns", "group"),
    "cited-body": ("UPDATE turns SET body = {} WHERE id = 'c1-u2'", None, None),
    "turn-key": (
        "UPDATE turns SET conversation_id = {} WHERE conversation_id = 'c2'",
        "turns",
        "conversation_id",
    ),
    "conversation-key": (
        "UPDATE conversations SET id = {} WHERE id = 'c2'",
        "conversations",
        "id",
    ),
    "key-everywhere": (
        "UPDATE turns SET conversation_id = {0} WHERE conversation_id = 'c2';"
        " UPDATE conversations SET id = {0} WHERE id = 'c2';"
        " UPDATE source_runs SET conversation_id = {0} WHERE conversation_id = 'c2';"
        " UPDATE summaries SET conversation_id = {0} WHERE conversation_id = 'c2'",
        "summaries",
        "conversation_id",
    ),
    "summary-text": (
        f"UPDATE summaries SET text = {{}} WHERE pk = {_CURRENT}",
        "summaries",
        "text",
    ),
    "summary-plan": (
        f"UPDATE summaries SET plan_id = {{}} WHERE pk = {_CURRENT}",
        "summaries",
        "plan_id",
    ),
    "summary-id": (f"UPDATE summaries SET id = {{}} WHERE pk = {_CURRENT}", "summaries", "id"),
    "older-summary-text": (
        f"UPDATE summaries SET text = {{}} WHERE conversation_id = 'c1' AND pk <> {_CURRENT}",
        "summaries",
        "text",
    ),
    "source-id": (
        f"UPDATE run_sources SET turn_id = {{}} WHERE run_pk = {_RUN} AND position = 1",
        "summary_sources",
        "turn_id",
    ),
}


def _ledger(path: Path, encoding: str, damage: str) -> Path:
    """Three conversations, each summarised twice (the last one then purged through its
    second turn: a sealed summary), one tail turn changed behind the store's back, and
    `damage` done."""
    if encoding != "UTF-8":
        encoded_file(path, encoding)
    with SQLiteStore(path) as store:
        for c in ("c1", "c2", "c3"):
            store.append(c, "system", "sys prompt")
            store.append(c, "user", "hello", id=f"{c}-u1", meta={"k": "v"}, group="g")
            store.append(c, "user", "more", id=f"{c}-u2")
            for n in range(3):
                store.append(c, "user", f"tail {n}", id=f"{c}-tail{n}")
            assert Compactor(store, POLICY).compact(c, force=True).accepted
            store.append(c, "user", "later", id=f"{c}-later")
            assert Compactor(store, POLICY).compact(c, force=True).accepted
        store.purge_through("c3", 2, "retention")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("UPDATE turns SET body = 'changed' WHERE id = 'c3-tail1'")
    conn.commit()
    conn.executescript(DAMAGE[damage][0].format(f"CAST({NOT_TEXT[encoding]} AS TEXT)"))
    conn.close()
    return path


def _carried(out: Path, table: str, column: str) -> list[tuple[Any, bytes]]:
    """Each exported row of `table` that carries `column`'s stored bytes: (its value in the
    column, the bytes)."""
    rows = pq.read_table(out / table).to_pylist()
    return [
        (row[column], raw) for row in rows for name, raw in row["not_utf8"] or () if name == column
    ]


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("encoding", sorted(NOT_TEXT))
def test_text_that_is_not_utf8_is_exported_and_checked_as_the_command_does(
    tmp_path: Path, encoding: str, damage: str
) -> None:
    db = _ledger(tmp_path / "ledger.db", encoding, damage)
    out = tmp_path / "parquet"
    report = export_parquet(db, out, turns_per_file=1)  # a part per conversation
    assert report.parts == report.conversations == 3
    conn = sqlite3.connect(db)
    try:
        for table in TABLES:  # every row in exactly one part
            (stored,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            assert pq.read_table(out / table).num_rows == stored, table
    finally:
        conn.close()
    _, table, column = DAMAGE[damage]
    if table is not None and column is not None:
        carried = _carried(out, table, column)
        assert carried and all(value is None for value, _ in carried)
        if encoding == "UTF-8":
            assert {raw for _, raw in carried} == {b"\xff"}
    expected = revalidate_database(db, mark_stale=False).as_json()
    with dask.config.set(scheduler="sync"):
        frame, aggregate = ldask.revalidate_parquet(out)
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    assert len(frame.compute()) == expected["summaries_checked"]
    assert expected["stale"] >= 1  # the changed tail turn of c3 at least


def test_the_command_exports_such_a_database(tmp_path: Path) -> None:
    """`ledgerfold export` succeeds where it printed a `StoreError` (exit 2), and its
    output never holds the stored bytes."""
    db = _ledger(tmp_path / "ledger.db", "UTF-8", "summary-text")
    done = run("export", str(db), "--parquet", str(tmp_path / "out"), "--json")
    assert done.exit_code == 0, done.output
    conn = sqlite3.connect(db)
    try:
        (summaries,) = conn.execute("SELECT COUNT(*) FROM summaries").fetchone()
    finally:
        conn.close()
    assert f'"summaries": {summaries},' in done.output
    assert "\\xff" not in done.output and "\ufffd" not in done.output


def test_sound_rows_carry_nothing(tmp_path: Path) -> None:
    db = _ledger(tmp_path / "ledger.db", "UTF-8", "summary-text")
    export_parquet(db, tmp_path / "out")
    for table in TABLES:
        carried = [row["not_utf8"] for row in pq.read_table(tmp_path / "out" / table).to_pylist()]
        assert sum(value is not None for value in carried) == (table == "summaries"), table
