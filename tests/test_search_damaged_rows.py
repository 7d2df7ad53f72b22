"""A search whose hits include a turn row another tool damaged (text that is not UTF-8, a
sequence that is not a number) failed whole with `StoreError`: one damaged row made the
conversation's recall useless. The damaged row is now passed over (a warning names its table
key, never its text); the other hits come back, `limit` of them when there are that many."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf

SECRET = "zebra-secret-7"

DAMAGE = {
    "body-not-utf8": f"UPDATE turns SET body = CAST(X'ff' AS TEXT) || '{SECRET}' WHERE id = 't2'",
    "role-not-utf8": "UPDATE turns SET role = CAST(X'ff' AS TEXT) WHERE id = 't2'",
    "id-not-utf8": "UPDATE turns SET id = CAST(X'74ff' AS TEXT) WHERE id = 't2'",
    "sequence-not-a-number": "UPDATE turns SET sequence = 'six' WHERE id = 't2'",
}


def _ledger(path: Path) -> None:
    """Six turns holding 'alpha'; t2 holds it most, so it is the best hit."""
    with lf.SQLiteStore(path) as store:
        store.append_many(
            "c",
            [
                {"id": f"t{n}", "role": "user", "body": "alpha " * (5 if n == 2 else 1) + f"n{n}"}
                for n in range(6)
            ],
        )


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_hit_is_passed_over(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    with lf.SQLiteStore(path) as store:
        assert store.search("c", "alpha", limit=3)[0].turn_id == "t2"
    with sqlite3.connect(path) as conn:
        conn.execute(DAMAGE[damage])
    conn.close()
    with caplog.at_level(logging.WARNING, logger="ledgerfold"), lf.SQLiteStore(path) as store:
        hits = store.search("c", "alpha", limit=3)
        assert [hit.turn_id for hit in hits] == ["t5", "t4", "t3"]  # limit sound ones
        every = store.search("c", "alpha", limit=10)
        assert sorted(hit.turn_id for hit in every) == ["t0", "t1", "t3", "t4", "t5"]
    warned = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert warned and all("pk=" in message for message in warned)
    assert not any(SECRET in r.getMessage() for r in caplog.records)


def test_a_sound_ledger_searches_as_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    with caplog.at_level(logging.WARNING, logger="ledgerfold"), lf.SQLiteStore(path) as store:
        assert [hit.turn_id for hit in store.search("c", "alpha", limit=2)] == ["t2", "t5"]
    assert not caplog.records


#: Damage the UTF-8 read takes without an error, which `load()` still refuses: a body that
#: is a blob (it came back as the hit's `text`, bytes), a role that is no role.
READABLE_DAMAGE = {
    "body-a-blob": f"UPDATE turns SET body = CAST('alpha alpha {SECRET}' AS BLOB) WHERE id = 't2'",
    "role-not-a-role": "UPDATE turns SET role = 'narrator' WHERE id = 't2'",
}


@pytest.mark.parametrize("damage", sorted(READABLE_DAMAGE))
def test_a_damaged_hit_read_without_error_is_passed_over(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    with sqlite3.connect(path) as conn:
        conn.execute(READABLE_DAMAGE[damage])
    conn.close()
    with caplog.at_level(logging.WARNING, logger="ledgerfold"), lf.SQLiteStore(path) as store:
        with pytest.raises(lf.StoreError, match="damaged row in table turns"):
            store.load("c")
        hits = store.search("c", "alpha", limit=3)
        assert [hit.turn_id for hit in hits] == ["t5", "t4", "t3"]
        assert all(isinstance(hit.text, str) and hit.role == "user" for hit in hits)
    warned = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert warned and all("pk=" in message for message in warned)
    assert not any(SECRET in r.getMessage() for r in caplog.records)
