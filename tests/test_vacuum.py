"""`SQLiteStore.vacuum()` and `ledgerfold vacuum`: a rewrite of the whole file, so that no
byte of deleted text is left anywhere in it.

The erasing calls run with `secure_delete`, which zeroes a deleted row and a freed page, not
the unused space of a page in use, where SQLite can leave an older copy of a row as it
reorganises pages (seen in randomised runs of erasures: a whole `turns` row of a deleted
conversation, between a live page's cell pointers and its cells). Such a leftover
cannot be made on purpose from the public API, so these tests leave deleted bytes in the
file the way SQLite does without `secure_delete` (a connection of their own with it off),
then show that `vacuum()` leaves none of them and changes nothing the store answers."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import ledgerfold as lf
from ledgerfold._cli.main import cli
from ledgerfold._transcripts import load_transcripts

DATA = Path(__file__).resolve().parent / "data" / "transcripts"

MARKERS = [f"zqvk{n:04d}leftover" for n in range(40)]


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


def _leave_deleted_text(path: Path) -> None:
    """Rows written and deleted by a connection without `secure_delete`: their bytes stay
    in the file's pages, as such a leftover does."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete = OFF")
        conn.execute("CREATE TABLE scratch (body TEXT)")
        conn.executemany("INSERT INTO scratch VALUES (?)", [(m * 20,) for m in MARKERS])
        conn.execute("DELETE FROM scratch")
        conn.execute("DROP TABLE scratch")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _answers(store: lf.SQLiteStore, conversation_id: str) -> tuple[object, ...]:
    context = store.context(conversation_id, "v1")
    hits = store.search(conversation_id, "the", limit=10, scope="all")
    return (
        store.load(conversation_id).turns,
        context.ids,
        [(h.turn_id, h.text) for h in hits],
        [(r.plan_id, r.status) for r in store.summary_history(conversation_id)],
    )


def test_vacuum_leaves_no_deleted_bytes_and_changes_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    [first, second, *_] = load_transcripts(sorted(DATA.glob("*.jsonl")))
    with lf.SQLiteStore(path) as store:
        for transcript in (first, second):
            store.append_many(
                transcript.conversation_id,
                [{"id": t.id, "role": t.role, "body": t.body} for t in transcript.turns],
            )
        compactor = lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=4))
        assert compactor.compact(first.conversation_id, force=True).status == "accepted"
        store.delete_conversation(second.conversation_id)
        before = _answers(store, first.conversation_id)
    _leave_deleted_text(path)
    assert MARKERS[0].encode() in _file_bytes(path)  # what vacuum() must remove
    with lf.SQLiteStore(path) as store:
        store.vacuum()
        assert _answers(store, first.conversation_id) == before
        assert store.check_search_index() == []
        assert store.conversation_ids() == [first.conversation_id]
    left = _file_bytes(path)
    assert not [m for m in MARKERS if m.encode() in left]


def test_vacuum_of_a_read_only_store_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "hello")
    with (
        lf.SQLiteStore(path, read_only=True) as store,
        pytest.raises(lf.StoreError, match="vacuum: the store was opened read-only"),
    ):
        store.vacuum()


def test_vacuum_command(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "hello there")
    _leave_deleted_text(path)
    result = CliRunner().invoke(cli, ["vacuum", str(path), "--json"])
    assert result.exit_code == 0, result.output
    said = json.loads(result.output)
    assert said["database"] == str(path) and said["bytes_before"] >= said["bytes_after"] > 0
    assert not [m for m in MARKERS if m.encode() in _file_bytes(path)]
    missing = CliRunner().invoke(cli, ["vacuum", str(tmp_path / "none.db")])
    assert missing.exit_code != 0 and "none.db" in missing.output
