"""Revalidation of a database another tool wrote keys into that no API call can name: an empty
conversation key, a blank summary ID, a blank turn ID (the store refuses such IDs). Like a
key stored as a blob, each is reported, not marked or repaired; the rest of the database is
marked and repaired as usual, never an `InvalidInput` for the whole run (in a UTF-8 file and
in both UTF-16 ones)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.revalidate import revalidate_database
from revalidate_support import encoded_file

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
ENCODINGS = ["UTF-8", "UTF-16le", "UTF-16be"]


def _ledger(path: Path, encoding: str) -> Path:
    """Three conversations, each a summary over its older turns and a raw tail of two."""
    encoded_file(path, encoding)
    with SQLiteStore(path) as store:
        for c in ("c1", "c2", "c3"):
            store.append(c, "system", "sys prompt", id=f"{c}-s")
            for n in range(5):
                store.append(c, "user", f"turn {n}", id=f"{c}-u{n}")
            assert Compactor(store, POLICY).compact(c, force=True).status == "accepted"
    return path


def _sql(path: Path, script: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.executescript(script)
    conn.close()


_RENAME_C2 = (
    "UPDATE turns SET conversation_id = '' WHERE conversation_id = 'c2';"
    " UPDATE summaries SET conversation_id = '' WHERE conversation_id = 'c2';"
    " UPDATE conversations SET id = '' WHERE id = 'c2';"
)
#: A cited body changed in every conversation: each summary is stale (source-modified).
_CHANGE_CITED = "UPDATE turns SET body = 'changed' WHERE id LIKE '%-u1';"
#: A tail body changed in every conversation: each digest is wrong, the summaries current.
_CHANGE_TAIL = "UPDATE turns SET body = 'changed' WHERE id LIKE '%-u4';"


def _statuses(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(
            conn.execute(
                "SELECT c.id, s.status FROM conversations c JOIN summaries s"
                " ON s.pk = c.current_summary"
            ).fetchall()
        )
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_stale_summary_of_an_empty_conversation_key_is_reported_not_marked(
    tmp_path: Path, encoding: str, workers: int
) -> None:
    path = _ledger(tmp_path / "s.db", encoding)
    _sql(path, _RENAME_C2 + _CHANGE_CITED)
    report = revalidate_database(path, workers=workers)
    assert report.stale == 3
    assert {s.conversation_id for s in report.stale_summaries} == {"", "c1", "c3"}
    # The nameable ones are marked; the unnameable one stays as it was.
    assert _statuses(path) == {"": "current", "c1": "stale", "c3": "stale"}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_wrong_digest_under_an_empty_conversation_key_is_reported_not_repaired(
    tmp_path: Path, encoding: str
) -> None:
    path = _ledger(tmp_path / "s.db", encoding)
    _sql(path, _RENAME_C2 + _CHANGE_TAIL)
    report = revalidate_database(path, workers=1)
    assert report.stale == 0
    assert set(report.wrong_digests) == {("", "c2-u4"), ("c1", "c1-u4"), ("c3", "c3-u4")}
    assert report.digests_repaired == 2


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_stale_summary_with_a_blank_id_is_reported_not_marked(
    tmp_path: Path, encoding: str
) -> None:
    path = _ledger(tmp_path / "s.db", encoding)
    _sql(
        path,
        "UPDATE summaries SET id = ' ' WHERE pk = (SELECT current_summary FROM conversations"
        " WHERE id = 'c2');" + _CHANGE_CITED,
    )
    report = revalidate_database(path, workers=1)
    assert {(s.conversation_id, s.summary_id) for s in report.stale_summaries} >= {("c2", " ")}
    assert report.stale == 3
    statuses = _statuses(path)
    assert (statuses["c1"], statuses["c3"]) == ("stale", "stale")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_wrong_digest_of_a_blank_turn_id_is_reported_not_repaired(
    tmp_path: Path, encoding: str
) -> None:
    path = _ledger(tmp_path / "s.db", encoding)
    _sql(path, "UPDATE turns SET id = ' ' WHERE id = 'c2-u4';" + _CHANGE_TAIL)
    report = revalidate_database(path, workers=1)
    assert set(report.wrong_digests) == {("c1", "c1-u4"), ("c2", " "), ("c3", "c3-u4")}
    assert report.digests_repaired == 2
