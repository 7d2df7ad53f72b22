"""The search index arrives with schema v5 (SPEC §16.5 "Schemas and openers", §17.9): a v4
file gets its index built the first time it is opened for writing, in batches that commit as
they go (resumable, progress logged); a read-only open of a v4 file serves everything but
search; a change of the segmenter's version rebuilds; without FTS5 the store opens and
search raises `StoreError`."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold import _segment
from ledgerfold.store import _search_index as search_index
from ledgerfold.store._schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

FRUITS = ("apple", "banana", "cherry", "mango", "kiwi", "lemon", "olive")


def v4_turns(n: int) -> list[lf.Turn]:
    """Turn i mentions FRUITS[i % 7]."""
    return [
        lf.Turn(f"t{i}", i, "user" if i % 2 else "assistant", f"message {i} about {FRUITS[i % 7]}")
        for i in range(1, n + 1)
    ]


def write_v4_database(path: Path, turns: list[lf.Turn]) -> None:
    """What the v4 store wrote: its four migrations' tables and one conversation's rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for version, name, ddl in MIGRATIONS[:4]:
        conn.executescript(ddl)
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01T00:00:00')", (version, name)
        )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 4")
    conn.execute(
        "INSERT INTO conversations (id, revision, last_sequence) VALUES ('c', ?, ?)",
        (len(turns), turns[-1].sequence),
    )
    conn.executemany(
        "INSERT INTO turns (conversation_id, id, sequence, role, body, protected, digest,"
        " created_at) VALUES ('c', ?, ?, ?, ?, 0, ?, '2026-01-01T00:00:00')",
        [(t.id, t.sequence, t.role, t.body, t.digest) for t in turns],
    )
    conn.close()


def schema_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0])
    finally:
        conn.close()


def test_a_v4_file_read_only_serves_everything_but_search(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    turns = v4_turns(10)
    write_v4_database(path, turns)
    with lf.SQLiteStore(path, read_only=True) as store:
        assert [turn.id for turn in store.load("c").turns] == [turn.id for turn in turns]
        assert store.context("c", "p").fallback == "no-summary"
        with pytest.raises(lf.StoreError, match="open it once for writing"):
            store.search("c", "banana")
    assert schema_version(path) == 4  # a read-only open migrates nothing


def test_a_v4_file_gets_its_index_at_the_first_writing_open(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    turns = v4_turns(25)
    write_v4_database(path, turns)
    with lf.SQLiteStore(path) as store:
        hits = store.search("c", "mango", limit=100)
        assert {hit.turn_id for hit in hits} == {t.id for t in turns if t.sequence % 7 == 3}
        state = (
            store._connection()
            .execute("SELECT index_version, complete FROM search_state")
            .fetchone()
        )
        assert tuple(state) == (_segment.INDEX_VERSION, 1)
    assert schema_version(path) == SCHEMA_VERSION == 5
    with lf.SQLiteStore(path, read_only=True) as store:  # now a read-only open can search
        assert len(store.search("c", "mango", limit=100)) == len(hits)


def test_the_build_runs_in_batches_that_commit_and_log_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "v4.db"
    write_v4_database(path, v4_turns(23))
    monkeypatch.setattr(search_index, "BUILD_BATCH", 5)
    commits: list[int] = []
    real_insert = search_index._insert

    def counting_insert(conn: sqlite3.Connection, turns: list[tuple[int, str]]) -> None:
        # Each batch runs in its own transaction, begun after the previous one committed.
        assert conn.in_transaction
        commits.append(conn.execute("SELECT built_through FROM search_state").fetchone()[0])
        real_insert(conn, turns)

    monkeypatch.setattr(search_index, "_insert", counting_insert)
    with caplog.at_level(logging.INFO, logger="ledgerfold.store"):
        lf.SQLiteStore(path).close()
    # built_through advances by one batch per transaction: 0, 5, 10, 15, 20.
    assert sorted(set(commits)) == [0, 5, 10, 15, 20]
    progress = [r.getMessage() for r in caplog.records if "search index progress" in r.getMessage()]
    assert len(progress) == 5 and progress[-1].endswith("turns=23 of 23")
    assert all("mango" not in r.getMessage() for r in caplog.records)


def test_an_interrupted_build_resumes_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v4.db"
    turns = v4_turns(23)
    write_v4_database(path, turns)
    monkeypatch.setattr(search_index, "BUILD_BATCH", 5)
    real_insert = search_index._insert
    calls = {"n": 0}

    def failing_insert(conn: sqlite3.Connection, batch: list[tuple[int, str]]) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # the third batch (five turns a batch, one insert a batch)
            raise sqlite3.OperationalError("disk I/O error")
        real_insert(conn, batch)

    monkeypatch.setattr(search_index, "_insert", failing_insert)
    with pytest.raises(lf.StoreError):
        lf.SQLiteStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT built_through, complete FROM search_state").fetchone() == (10, 0)
    conn.close()
    monkeypatch.setattr(search_index, "_insert", real_insert)
    with lf.SQLiteStore(path) as store:
        for seven in range(7):
            hits = store.search("c", FRUITS[seven], limit=100)
            assert sorted(hit.sequence for hit in hits) == [
                t.sequence for t in turns if t.sequence % 7 == seven
            ]
        # Every turn indexed once: no batch was indexed twice.
        rows = store._connection().execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()
        assert rows[0] == len(turns)


def test_writes_during_an_unfinished_build_are_not_indexed_twice(tmp_path: Path) -> None:
    """A store already open while another process's build is unfinished keeps only turns
    up to `built_through`; the build indexes the rest, so each turn is indexed once."""
    path = tmp_path / "v4.db"
    write_v4_database(path, v4_turns(12))
    store = lf.SQLiteStore(path)
    conn = store._connection()
    # The state another opener leaves after its first batch: turns 1..5 indexed.
    for pk in range(6, 13):
        body = conn.execute("SELECT body FROM turns WHERE pk = ?", (pk,)).fetchone()[0]
        conn.execute("BEGIN IMMEDIATE")
        search_index._delete(conn, pk, body)
        conn.execute("COMMIT")
    conn.execute("UPDATE search_state SET built_through = 5, complete = 0")
    store.append("c", "user", "a later mango turn", id="later")  # pk 13: left to the build
    store.edit("c", "t3", body="edited mango text")  # pk 3: kept by the write path
    store.edit("c", "t10", body="edited mango again")  # pk 10: left to the build
    assert conn.execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0] == 5
    store.close()
    with lf.SQLiteStore(path) as store:
        hits = store.search("c", "mango", limit=100)
        assert sorted(hit.turn_id for hit in hits) == ["later", "t10", "t3"]
        assert [hit.text for hit in hits if hit.turn_id == "t3"] == ["edited mango text"]
        rows = store._connection().execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()
        assert rows[0] == 13


def test_a_new_segmenter_version_rebuilds_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "papaya one", id="a")
        store.edit("c", "a", body="papaya two")
    monkeypatch.setattr(search_index, "INDEX_VERSION", _segment.INDEX_VERSION + 1)
    with lf.SQLiteStore(path) as store:
        conn = store._connection()
        assert conn.execute("SELECT index_version FROM search_state").fetchone()[0] == (
            _segment.INDEX_VERSION + 1
        )
        assert [hit.turn_id for hit in store.search("c", "papaya")] == ["a"]
        assert store.search("c", "one") == []
        assert conn.execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0] == 1
    monkeypatch.undo()
    # A reader whose segmenter differs from the one the index was built with cannot search
    # it (its query tokens would not be the index's).
    with (
        lf.SQLiteStore(path, read_only=True) as store,
        pytest.raises(lf.StoreError, match="not built for this ledgerfold"),
    ):
        store.search("c", "papaya")


def test_without_fts5_the_store_opens_and_search_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "persimmon before", id="a")
    monkeypatch.setattr(search_index, "fts5_available", lambda conn: False)
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "persimmon without fts5", id="b")
        store.edit("c", "a", body="persimmon edited")
        store.retract("c", "a", erase=True)
        assert [turn.id for turn in store.load("c").turns] == ["b"]
        with pytest.raises(lf.StoreError, match="no FTS5"):
            store.search("c", "persimmon")
        # The index an FTS5 build left is emptied, not left stale.
        conn = store._connection()
        assert (
            conn.execute("SELECT COUNT(*) FROM search_fts_data WHERE id NOT IN (1, 10)").fetchone()[
                0
            ]
            == 0
        )
    monkeypatch.undo()
    with lf.SQLiteStore(path) as store:  # FTS5 again: rebuilt from the ledger
        assert [hit.turn_id for hit in store.search("c", "persimmon")] == ["b"]


def test_a_fresh_store_without_fts5_opens_and_search_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_index, "fts5_available", lambda conn: False)
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        store.append("c", "user", "words", id="a")
        with pytest.raises(lf.StoreError, match="no FTS5"):
            store.search("c", "words")
    with lf.SQLiteStore() as memory, pytest.raises(lf.StoreError, match="no FTS5"):
        memory.search("c", "words")
