"""A search passes over a hit whose turn row another tool damaged, with a warning naming its
table key. When the terms kept for the search found no sound hit and it retried with the
dropped common terms (SPEC §16.5), or when a strict read failed and it read again leniently,
the same row was warned about again, once per attempt: one damaged row, one warning per
search."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf

SECRET = "zebra-secret-7"
DAMAGE = {
    "role-not-a-role": "UPDATE turns SET role = 'narrator' WHERE id = 'rare'",
    "body-a-blob": f"UPDATE turns SET body = CAST('quokka common {SECRET}' AS BLOB)"
    " WHERE id = 'rare'",
    "body-not-utf8": f"UPDATE turns SET body = CAST(X'ff' AS TEXT) || 'quokka common {SECRET}'"
    " WHERE id = 'rare'",
}


def _ledger(path: Path) -> None:
    """60 turns holding 'common' (more than the 50 passages that make a term common in a
    conversation), one of them, 'rare', also holding 'quokka'."""
    with lf.SQLiteStore(path) as store:
        turns = [{"id": f"t{n}", "role": "user", "body": f"common n{n}"} for n in range(60)]
        turns.append({"id": "rare", "role": "user", "body": "quokka common"})
        store.append_many("c", turns)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_hit_is_warned_about_once_per_search(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    _ledger(path)
    with lf.SQLiteStore(path) as store:
        assert store.search("c", "quokka common", limit=3)[0].turn_id == "rare"
    with sqlite3.connect(path) as conn:
        (pk,) = conn.execute("SELECT pk FROM turns WHERE id = 'rare'").fetchone()
        conn.execute(DAMAGE[damage])
    conn.close()
    with caplog.at_level(logging.WARNING, logger="ledgerfold"), lf.SQLiteStore(path) as store:
        hits = store.search("c", "quokka common", limit=3)
        assert len(hits) == 3 and "rare" not in {hit.turn_id for hit in hits}
    warned = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert warned == [f"search: a hit's turn row is damaged (pk={pk}), passed over"]
    assert not any(SECRET in r.getMessage() for r in caplog.records)
