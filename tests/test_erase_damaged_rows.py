"""Erasure and purge get past rows damaged in storage (SPEC §15.5, §16.5): a turn whose text
is not UTF-8, whose meta is not a JSON object or whose stored digest does not match its row
is erased or purged like any other when it is the one taken, and, when it is not, stops
neither `retract(..., erase=True)` nor `purge_through` of its conversation and stays as it
is, reported by revalidation as before. (Both blocked on such a row: an erasure is what an
operator reaches for when data is bad, and only `delete_conversation` got past it.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from cli_support import damaged_db, file_has, table_contents
from ledgerfold.revalidate import revalidate_database

CID = "c"
SECRET = "SECRETDAMAGE"

#: Damage another tool wrote into a turn row (`?` is its ID).
DAMAGE = {
    "body-not-utf8": f"UPDATE turns SET body = CAST(X'ff' AS TEXT) || '{SECRET}' WHERE id = ?",
    "meta-not-utf8": f"UPDATE turns SET meta = CAST(X'7bff' AS TEXT) || '{SECRET}' WHERE id = ?",
    "meta-not-json": f"UPDATE turns SET meta = '{SECRET} not json' WHERE id = ?",
    "role-not-utf8": "UPDATE turns SET role = CAST(X'ff' AS TEXT) WHERE id = ?",
    "digest-mismatch": "UPDATE turns SET digest = randomblob(32) WHERE id = ?",
}


def _sql(path: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, params)
    conn.close()


def _row(path: Path, turn_id: str) -> tuple[Any, ...]:
    """The stored row as bytes (nothing decoded), state included."""
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT state, CAST(body AS BLOB), CAST(role AS BLOB), CAST(meta AS BLOB), digest"
            " FROM turns WHERE conversation_id = ? AND id = ?",
            (CID, turn_id),
        ).fetchone()
    conn.close()
    return tuple(row)


def _compacted(path: Path) -> Path:
    """20 turns; a current summary covers t0..t15, t16..t19 are the raw tail."""
    with lf.SQLiteStore(path) as store:
        store.append_many(
            CID,
            [
                {"id": f"t{n}", "role": "user" if n % 2 else "assistant", "body": f"turn {n}"}
                for n in range(20)
            ],
        )
        policy = lf.CompactionPolicy("v1", keep_tail=4, min_new_turns=1)
        assert lf.Compactor(store, policy).compact(CID).accepted
    return path


def _report(path: Path) -> tuple[Any, ...]:
    report = revalidate_database(path, workers=1, mark_stale=False)
    return report.turns_damaged, report.damaged_turns, report.digests_wrong


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_turn_is_erased(tmp_path: Path, damage: str) -> None:
    path = _compacted(tmp_path / "e.db")
    _sql(path, DAMAGE[damage], "t5")
    with lf.SQLiteStore(path) as store:
        store.retract(CID, "t5", erase=True)
        assert "t5" not in store.load(CID).turn_ids
        assert store.search(CID, "turn", scope="all", limit=100)  # the store works on
    state, body, _, meta, digest = _row(path, "t5")
    assert (state, body, meta) == (1, b"", None)  # retracted, blanked
    blank = lf.Turn("t5", 6, "user", "").digest  # the row as it is now; none for a bad role
    assert digest == (bytes(32) if damage == "role-not-utf8" else blank)
    assert not file_has(path, SECRET)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_turn_is_purged(tmp_path: Path, damage: str) -> None:
    path = _compacted(tmp_path / "p.db")
    _sql(path, DAMAGE[damage], "t5")
    with lf.SQLiteStore(path) as store:
        boundary = store.purge_through(CID, 8, "retention")
        assert boundary.through_sequence == 8
        assert store.history_boundary(CID) == boundary
        assert store.load(CID).turns[0].sequence == 9
    state, body, _, meta, _ = _row(path, "t5")
    assert (state, body, meta) == (2, b"", None)  # purged, blanked
    assert not file_has(path, SECRET)


def _retract_then_erase(store: lf.SQLiteStore, turn_id: str) -> None:
    store.retract(CID, turn_id)
    store.retract(CID, turn_id, erase=True)


ERASURES: dict[str, Callable[[lf.SQLiteStore], object]] = {
    "erase-cited": lambda store: store.retract(CID, "t3", erase=True),
    "erase-raw": lambda store: store.retract(CID, "t18", erase=True),
    "erase-retracted": lambda store: _retract_then_erase(store, "t3"),
    "purge": lambda store: store.purge_through(CID, 6, "retention"),
    "purge-forced": lambda store: store.purge_through(CID, 6, "retention", force=True),
    "retention": lambda store: store.apply_retention(CID, retain_turns=12),
}


PURGES = ("purge", "purge-forced", "retention")


@pytest.mark.parametrize("operation", sorted(ERASURES))
@pytest.mark.parametrize("damaged", ["t10", "t17"], ids=["cited", "raw"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_turn_stops_no_erasure_of_others(
    tmp_path: Path, damage: str, damaged: str, operation: str
) -> None:
    path = _compacted(tmp_path / "o.db")
    sound = _row(path, damaged)
    _sql(path, DAMAGE[damage], damaged)
    before, reported = _row(path, damaged), _report(path)
    with lf.SQLiteStore(path) as store:
        ERASURES[operation](store)
    if (damage, damaged) == ("digest-mismatch", "t10") and operation in PURGES:
        # A purge seals the summary that cites it: its bytes are the summary's, so the
        # seal checks and repairs its digest (test_purge_cited_digests.py).
        before = sound
    assert _row(path, damaged) == before  # left as it is
    if damaged == "t17":  # no summary cites it: revalidation reports it as before
        assert _report(path) == reported
    else:
        assert _report(path)[:2] == reported[:2]


@pytest.mark.parametrize("turn_id", ["t1", "t2"], ids=["itself", "another"])
def test_a_conversation_never_compacted_is_erased_and_purged_past_its_damage(
    tmp_path: Path, turn_id: str
) -> None:
    """`cli_support.damaged_db`: `'not json'` in the meta of b-damaged's t1."""
    path = damaged_db(tmp_path / "d.db", ("a", "b-damaged"), 6)
    with lf.SQLiteStore(path) as store:
        store.retract("b-damaged", turn_id, erase=True)
        store.purge_through("b-damaged", 3, "retention")  # t0..t2
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT id, state, body, meta FROM turns WHERE conversation_id = 'b-damaged'"
            " AND sequence <= 3 ORDER BY sequence"
        ).fetchall()
    conn.close()
    assert [row[1:] for row in rows] == [(2, "", None)] * 3


def _calls(path: Path) -> Path:
    """u0, a call a1 and its result r1, then six turns."""
    call = '[{"id": "k1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]'
    with lf.SQLiteStore(path) as store:
        store.append(CID, "user", "hello", id="u0")
        store.append(CID, "assistant", "calling", id="a1", meta={"tool_calls": call})
        store.append(CID, "tool", "result", id="r1", meta={"tool_call_id": "k1"})
        for n in range(6):
            store.append(CID, "user", f"more {n}", id=f"m{n}")
    return path


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("damaged", ["a1", "r1"])
def test_a_damaged_call_or_result_is_erased_and_purged(
    tmp_path: Path, damage: str, damaged: str
) -> None:
    erased, purged = _calls(tmp_path / "e.db"), _calls(tmp_path / "p.db")
    for path in (erased, purged):
        _sql(path, DAMAGE[damage], damaged)
    with lf.SQLiteStore(erased) as store:
        store.retract(CID, damaged, erase=True)
    with lf.SQLiteStore(purged) as store:
        # Unforced it succeeds, and may stop before the call: a result whose meta cannot be
        # read answers nothing, so the call looks unanswered (SPEC §17.2).
        assert store.preview_purge(CID, 3)["through_sequence"] in (1, 3)
        assert store.purge_through(CID, 3, "retention").through_sequence in (1, 3)
        store.purge_through(CID, 3, "retention", force=True)
    assert _row(erased, damaged)[:2] == (1, b"")
    assert _row(purged, damaged)[:2] == (2, b"")
    assert [_row(purged, turn_id)[0] for turn_id in ("a1", "r1", "m0")] == [2, 2, 0]
    assert not file_has(erased, SECRET) and not file_has(purged, SECRET)


FAILING_LAST = {  # a trigger failing the operation's last write, after the damaged row's
    "erase": "CREATE TRIGGER fail BEFORE UPDATE OF digest ON turns"
    " BEGIN SELECT RAISE(ABORT, 'disk says no'); END",
    "purge": "CREATE TRIGGER fail BEFORE INSERT ON history_boundaries"
    " BEGIN SELECT RAISE(ABORT, 'disk says no'); END",
}


FAILING_CALLS: dict[str, Callable[[lf.SQLiteStore], object]] = {
    "erase": lambda store: store.retract(CID, "t5", erase=True),
    "purge": lambda store: store.purge_through(CID, 8, "retention"),
}


@pytest.mark.parametrize("operation", sorted(FAILING_LAST))
def test_a_failed_erasure_of_a_damaged_turn_leaves_the_database_as_it_was(
    tmp_path: Path, operation: str
) -> None:
    path = _compacted(tmp_path / "f.db")
    _sql(path, DAMAGE["body-not-utf8"], "t5")
    _sql(path, DAMAGE["meta-not-utf8"], "t6")
    _sql(path, FAILING_LAST[operation])
    before = table_contents(path)
    with lf.SQLiteStore(path) as store:
        erasure = FAILING_CALLS[operation]
        with pytest.raises(lf.StoreError, match="disk says no"):
            erasure(store)
    assert table_contents(path) == before
