"""Differential: `ledgerfold revalidate` and the Parquet export revalidated on Dask give the
same verdicts on one damaged real-file ledger (the real transcripts, imported and compacted):
a conversation pointing at another conversation's summary (in another part of the export), a
current summary whose record names another conversation, current summaries whose records the
store cannot read (`damaged-record`), a summarised body changed behind the store's back and
a purged (sealed) conversation, and text that is not UTF-8 (another tool's write: a current
summary's text, a cited turn's meta, a conversation's key), which the export carries as its
bytes. The record verdicts are the command's own rule (`_revalidate_runs.record_verdict`),
which the export records per conversation."""

from __future__ import annotations

import importlib
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import InvalidInput, SQLiteStore
from ledgerfold.export import FORMAT_VERSION, export_parquet
from ledgerfold.revalidate import revalidate_database

dask = importlib.import_module("dask")
ldask = importlib.import_module("ledgerfold.dask")
pq = importlib.import_module("pyarrow.parquet")

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402
from revalidate_support import DASK_SAME as SAME  # noqa: E402

_CURRENT_OF = "(SELECT current_summary FROM conversations WHERE id = ?)"
#: Damage to a conversation's current summary record that the store cannot read past.
RECORD_DAMAGE = (
    "text = NULL",
    "plan_id = char(12288)",
    "parent_id = ' '",
    "source_revision = -1",
    "rejected_source_ids = 'not json'",
    "policy_version = NULL",
)
_NOT_UTF8 = "CAST(X'ff' AS TEXT)"
#: Where a conversation's key is stored.
_KEYS = (
    ("turns", "conversation_id"),
    ("conversations", "id"),
    ("source_runs", "conversation_id"),
    ("summaries", "conversation_id"),
)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("dask-damage") / "ledger.db"
    import_and_compact(path, "v1")
    with SQLiteStore(path) as store:
        summarised = [
            cid for cid in store.conversation_ids() if store.current_summary(cid) is not None
        ]
        store.purge_through(summarised[1], 2, "retention")
    assert len(summarised) > 20
    # The first and the last conversation: in the first and the last part of the export.
    pointing, pointed = summarised[0], summarised[-1]
    moved = summarised[3]
    damaged_ones = summarised[5 : 5 + len(RECORD_DAMAGE)]
    tampered = summarised[len(summarised) // 2]
    # Text that is not UTF-8: a current summary's text, a cited turn's meta, a key.
    unreadable, bad_meta, bad_key = summarised[12:15]
    with sqlite3.connect(path) as conn:
        conn.execute(
            f"UPDATE conversations SET current_summary = {_CURRENT_OF} WHERE id = ?",
            (pointed, pointing),
        )
        conn.execute(
            f"UPDATE summaries SET conversation_id = ? WHERE pk = {_CURRENT_OF}",
            (summarised[4], moved),
        )
        for change, conversation in zip(RECORD_DAMAGE, damaged_ones, strict=True):
            conn.execute(f"UPDATE summaries SET {change} WHERE pk = {_CURRENT_OF}", (conversation,))
        (turn_id,) = conn.execute(
            "SELECT turn_id FROM summary_sources WHERE summary_pk = "
            f"{_CURRENT_OF} ORDER BY position LIMIT 1",
            (tampered,),
        ).fetchone()
        conn.execute(
            "UPDATE turns SET body = body || ' (tampered)' WHERE conversation_id = ? AND id = ?",
            (tampered, turn_id),
        )
        conn.execute(
            f"UPDATE summaries SET text = {_NOT_UTF8} WHERE pk = {_CURRENT_OF}", (unreadable,)
        )
        conn.execute(
            f"UPDATE turns SET meta = {_NOT_UTF8} WHERE conversation_id = ? AND id ="
            f" (SELECT turn_id FROM summary_sources WHERE summary_pk = {_CURRENT_OF}"
            " ORDER BY position LIMIT 1)",
            (bad_meta, bad_meta),
        )
        conn.execute("PRAGMA foreign_keys = OFF")
        for table, column in _KEYS:
            conn.execute(
                f"UPDATE {table} SET {column} = CAST(? || X'ff' AS TEXT) WHERE {column} = ?",
                (bad_key, bad_key),
            )
    conn.close()
    out = tmp_path_factory.mktemp("dask-damage") / "parquet"
    report = export_parquet(path, out, turns_per_file=2_000)
    assert report.parts >= 3
    return {
        "db": path,
        "out": out,
        "pointing": pointing,
        "moved": moved,
        "damaged": damaged_ones,
        "tampered": tampered,
        "sealed": summarised[1],
        "unreadable": unreadable,
        "bad_meta": bad_meta,
        "bad_key": bad_key + "\ufffd",  # as the command names it
    }


def test_both_paths_give_the_same_verdicts(damaged: dict[str, Any]) -> None:
    expected = revalidate_database(damaged["db"], mark_stale=False).as_json()
    with dask.config.set(scheduler="threads"):
        frame, aggregate = ldask.revalidate_parquet(damaged["out"])
    assert {key: aggregate[key] for key in SAME} == {key: expected[key] for key in SAME}
    reasons = {item["conversation"]: item["reason"] for item in expected["stale_summaries"]}
    assert reasons == {
        damaged["pointing"]: "conversation-mismatch",
        damaged["moved"]: "conversation-mismatch",
        **dict.fromkeys(damaged["damaged"], "damaged-record"),
        damaged["tampered"]: "source-modified",
        damaged["unreadable"]: "damaged-record",
        damaged["bad_meta"]: "source-modified",
        damaged["bad_key"]: "damaged-record",
    }
    rows = frame.compute()
    by_conversation = {row.conversation: row for row in rows.itertuples(index=False)}
    assert len(by_conversation) == len(rows) == expected["summaries_checked"]
    unchecked = ("pointing", "moved", "unreadable", "bad_key")
    for conversation in (*(damaged[name] for name in unchecked), *damaged["damaged"]):
        row = by_conversation[conversation]
        assert (row.status, row.turns_hashed, row.bytes_hashed) == ("stale", 0, 0)
    assert by_conversation[damaged["sealed"]].status == "current"


def test_the_export_records_the_commands_record_verdicts(damaged: dict[str, Any]) -> None:
    table = pq.read_table(damaged["out"] / "conversations")
    verdicts = {
        # A key that is not UTF-8 is null, its bytes carried: named as the command names it.
        conversation or dict(carried)["id"].decode(errors="replace"): reason
        for conversation, reason, carried in zip(
            table.column("id").to_pylist(),
            table.column("current_summary_verdict").to_pylist(),
            table.column("not_utf8").to_pylist(),
            strict=True,
        )
        if reason is not None
    }
    assert verdicts == {
        damaged["pointing"]: "conversation-mismatch",
        damaged["moved"]: "conversation-mismatch",
        **dict.fromkeys(damaged["damaged"], "damaged-record"),
        damaged["unreadable"]: "damaged-record",
        damaged["bad_key"]: "damaged-record",
    }


@pytest.mark.parametrize("version", [1, 2])
def test_an_export_of_an_older_format_is_refused_with_a_way_out(
    damaged: dict[str, Any], tmp_path: Path, version: int
) -> None:
    manifest = (damaged["out"] / "_manifest.json").read_text(encoding="utf-8")
    old = tmp_path / "old"
    old.mkdir()
    current = f'"format_version": {FORMAT_VERSION}'
    assert current in manifest
    (old / "_manifest.json").write_text(
        manifest.replace(current, f'"format_version": {version}'), encoding="utf-8"
    )
    with pytest.raises(ValueError, match="export the database again"):
        ldask.read_manifest(old)


@pytest.mark.parametrize(
    "dropped",
    [["current_summary_verdict", "not_utf8"], ["not_utf8"]],  # format 1, format 2
)
def test_a_part_of_an_older_format_checked_on_its_own_is_invalid_input(
    damaged: dict[str, Any], tmp_path: Path, dropped: list[str]
) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(damaged["out"], old)
    part = old / "conversations" / "part-00000.parquet"
    table = pq.read_table(part)
    pq.write_table(table.drop_columns(dropped), part)
    with pytest.raises(InvalidInput, match="export the database again"):
        ldask.check_part(0, path=str(old))
