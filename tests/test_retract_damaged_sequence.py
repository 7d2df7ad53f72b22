"""A retraction or erasure of a turn whose stored sequence is not an integer (damaged in
storage, SPEC §15.5) reports no sequence, never a false one, on a real SQLite file: the log
line says `sequence=None` and the `retention.erased` event's `sequence` is None. (Both said 0,
the sequence of the stand-in turn the row was read as; erasing such a turn retracted before
raised a bare `ValueError`.)"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._events import Event

CID = "c"

#: Sequences another tool wrote that are no integer.
BAD_SEQUENCES = {"text": "'six'", "not-utf8": "CAST(X'ff' AS TEXT)", "real": "2.5"}


def _ledger(path: Path, bad: str) -> Path:
    with lf.SQLiteStore(path) as store:
        store.append_many(
            CID, [{"id": f"t{n}", "role": "user", "body": f"turn {n}"} for n in range(4)]
        )
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE turns SET sequence = {BAD_SEQUENCES[bad]} WHERE id = 't1'")
    conn.close()
    return path


def _retracted_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("retracted:")]


@pytest.mark.parametrize("bad", sorted(BAD_SEQUENCES))
@pytest.mark.parametrize("erase", [False, True], ids=["retract", "erase"])
def test_a_damaged_sequence_is_reported_as_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: str, erase: bool
) -> None:
    path = _ledger(tmp_path / "r.db", bad)
    events: list[Event] = []
    with (
        caplog.at_level(logging.INFO, logger="ledgerfold.store"),
        lf.SQLiteStore(path, on_event=events.append) as store,
    ):
        store.retract(CID, "t1", erase=erase)
        assert store.load(CID).turn_ids == ("t0", "t2", "t3")
    (line,) = _retracted_lines(caplog)
    assert "turn=t1 sequence=None " in line, line
    erased = [event for event in events if event.name == "retention.erased"]
    assert [event.sequence for event in erased] == ([None] if erase else [])


@pytest.mark.parametrize("bad", sorted(BAD_SEQUENCES))
def test_erasing_a_retracted_turn_with_a_damaged_sequence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: str
) -> None:
    path = _ledger(tmp_path / "e.db", bad)
    events: list[Event] = []
    with (
        caplog.at_level(logging.INFO, logger="ledgerfold.store"),
        lf.SQLiteStore(path, on_event=events.append) as store,
    ):
        store.retract(CID, "t1")
        store.retract(CID, "t1", erase=True)
    assert all("sequence=None " in line for line in _retracted_lines(caplog))
    (erased,) = [event for event in events if event.name == "retention.erased"]
    assert erased.sequence is None and erased.turn_ids == ("t1",)
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT state, body FROM turns WHERE id = 't1'").fetchone()
    conn.close()
    assert row == (1, "")


def test_a_sound_sequence_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.db"
    with lf.SQLiteStore(path) as store:
        store.append_many(CID, [{"id": f"t{n}", "role": "user", "body": "x"} for n in range(3)])
    with caplog.at_level(logging.INFO, logger="ledgerfold.store"), lf.SQLiteStore(path) as store:
        store.retract(CID, "t1", erase=True)
    (line,) = _retracted_lines(caplog)
    assert "turn=t1 sequence=2 " in line
