"""A read-only open racing the last writer's close. `reading_uri` looks for the WAL and its
`-shm` and, both there, opens with `readonly_shm=1`; the writer's close deletes both, and
when that fell between the look and SQLite's first read the open failed with "unable to
open database file" (SQLite cannot create the `-shm` it is told to open read-only). The
opener (`_paths.connect_reading`) now reads once as it opens and, when the files changed
under it, opens again with the URI they fit then. Real files, a real writer."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.store import _database, _paths


def _close_after_the_look(monkeypatch: pytest.MonkeyPatch, writer: lf.SQLiteStore) -> list[str]:
    """`reading_uri` as it is, but the writer closes right after the first look."""
    real, uris = _paths.reading_uri, []

    def looked(path: str) -> str:
        uri = real(path)
        uris.append(uri)
        writer.close()  # the race, made to happen here (idempotent)
        return uri

    monkeypatch.setattr(_paths, "reading_uri", looked)
    monkeypatch.setattr(_database, "reading_uri", looked, raising=False)
    return uris


def test_a_writer_closing_between_the_look_and_the_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    writer = lf.SQLiteStore(path)
    writer.append("c", "user", "hello")
    assert os.path.exists(f"{path}-wal") and os.path.exists(f"{path}-shm")
    uris = _close_after_the_look(monkeypatch, writer)
    with lf.SQLiteStore(path, read_only=True) as reader:
        assert [turn.body for turn in reader.load("c").turns] == ["hello"]
    assert "readonly_shm=1" in uris[0]  # the look saw a live writer's files
    # SQLite makes an empty WAL as the open that fails starts: nothing reads from it, and
    # the next writer takes it over and removes it at its close.
    assert not os.path.exists(f"{path}-shm")
    assert not os.path.exists(f"{path}-wal") or os.path.getsize(f"{path}-wal") == 0
    with lf.SQLiteStore(path) as writer_again:
        writer_again.append("c", "user", "again")
    assert sorted(os.listdir(tmp_path)) == ["s.db"]


def test_connect_reading_after_the_race_reads_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opener the CLI's direct reads can use too: same race, same outcome."""
    path = tmp_path / "s.db"
    writer = lf.SQLiteStore(path)
    writer.append("c", "user", "hello")
    _close_after_the_look(monkeypatch, writer)
    conn = _paths.connect_reading(str(path), factory=sqlite3.Connection)
    try:
        assert conn.execute("SELECT COUNT(*) FROM turns").fetchone() == (1,)
    finally:
        conn.close()


def _open_and_close(path: str, stop: Any, opened: Any) -> None:
    """The writer: open, append, close, again and again, until told to stop."""
    while not stop.is_set():
        with lf.SQLiteStore(path) as store:
            store.append("c", "user", "x")
        opened.set()


#: Read-only opens raced against the writer (about 1 in 300 failed before the fix).
OPENS = 1500


def test_read_only_opens_against_a_writer_opening_and_closing(tmp_path: Path) -> None:
    """Another process opens, writes and closes the file in a loop while this one opens it
    read-only: no open fails because the writer closed meanwhile. (A read-only connection
    whose `-shm` nobody held when it opened can still fail a *later* read with SQLite's
    "attempt to write a readonly database" while a new writer recovers that `-shm`: not
    this race, and not the opener's; docs/threading.md.)"""
    path = str(tmp_path / "s.db")
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "hello")
    context = multiprocessing.get_context("spawn")
    stop, opened = context.Event(), context.Event()
    writer = context.Process(target=_open_and_close, args=(path, stop, opened))
    writer.start()
    failures: list[str] = []
    try:
        assert opened.wait(60)
        for _ in range(OPENS):
            try:
                with lf.SQLiteStore(path, read_only=True):
                    pass
            except lf.StoreError as err:
                failures.append(str(err))
    finally:
        stop.set()
        writer.join(60)
    assert writer.exitcode == 0
    assert not [failure for failure in failures if "unable to open" in failure]
    assert all("attempt to write a readonly database" in failure for failure in failures)
