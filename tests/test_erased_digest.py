"""An erased turn keeps its ID and sequence, but not the digest of its erased text: BLAKE3
over a known encoding (SPEC §3) is no secret, and guessing a short body ("my locker code is
NNNN", a yes or a no) against the stored digest took milliseconds, so the "erased" text was
recoverable from the file. The erased row's digest is that of the row as it is now (blank),
as the schema says of every row and as a blanked recall result's is. A purged turn keeps its
digest (a sealed summary is checked with it, SPEC §15.5) until it is erased too."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import ledgerfold as lf


def stored_digest(path: Path, turn_id: str) -> bytes:
    with sqlite3.connect(path) as conn:
        (digest,) = conn.execute("SELECT digest FROM turns WHERE id = ?", (turn_id,)).fetchone()
    conn.close()
    return bytes(digest)


def guessed(path: Path, turn_id: str, sequence: int) -> str | None:
    digest = stored_digest(path, turn_id)
    for pin in range(10_000):
        body = f"my locker code is {pin:04d}"
        if lf.Turn(id=turn_id, sequence=sequence, role="user", body=body).digest == digest:
            return body
    return None


def test_an_erased_turns_digest_gives_nothing_of_its_text(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "hello", id="u0")
        store.append("c", "user", "my locker code is 0471", id="u1")
        store.append("c", "user", "my locker code is 0815", id="u2")
        store.edit("c", "u2", body="my locker code is 0999")
        assert guessed(path, "u1", 2) == "my locker code is 0471"  # what an attacker does
        store.retract("c", "u1", erase=True)
        store.retract("c", "u2")
        store.retract("c", "u2", erase=True)  # retracted earlier, erased later
    assert guessed(path, "u1", 2) is None
    assert guessed(path, "u2", 3) is None
    blank = lf.Turn(id="u1", sequence=2, role="user", body="")
    assert stored_digest(path, "u1") == blank.digest  # the row as it is now


def test_an_erased_purged_turns_digest_gives_nothing_of_its_text(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    with lf.SQLiteStore(path) as store:
        store.append("c", "user", "my locker code is 0471", id="u1")
        for i in range(2, 6):
            store.append("c", "user", f"turn {i}", id=f"u{i}")
        store.purge_through("c", 1, "retention")
        assert guessed(path, "u1", 1) == "my locker code is 0471"  # purged: the digest stays
        store.retract("c", "u1", erase=True)
    assert guessed(path, "u1", 1) is None


def test_the_store_works_on_after_erasures(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "d.db") as store:
        for i in range(12):
            store.append("c", "user", f"turn {i} my locker code is {i:04d}", id=f"u{i}")
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        compactor = lf.Compactor(store, policy, lf.ExtractiveSummarizer())
        assert compactor.compact("c", force=True).accepted
        store.retract("c", "u3", erase=True)
        assert compactor.compact("c", force=True).accepted
        assert store.context("c", "v1").fallback is None
        assert lf.check_summary(store.current_summary("c"), store.load("c"), "v1").current
