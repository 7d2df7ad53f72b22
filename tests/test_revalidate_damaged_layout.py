"""Deep revalidation and `stats()` agree with the store's context on a summary whose layout
another tool damaged. The context already read such a summary as a damaged record
(`stale-summary:damaged-record`): a slot (`summaries.through_sequence`) that is not its
sources' last sequence. Revalidation checked its sources only and called it current (in
process and on worker threads alike), and `stats()` counted no fallback for it. Each
database here is a real file, damaged with raw SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.revalidate import revalidate_database

PV = "v1"
POLICY = lf.CompactionPolicy(PV, keep_tail=4)
DAMAGED = "damaged-record"
#: Slots another tool may write: no integer, below the last source, no source's, past it.
SLOTS = ["'x'", "2.5", "-3", "NULL", "X'00'", "10", "15", "17", "999"]


def _ledger(path: Path) -> dict[str, str]:
    """Conversations `c` (damaged below) and `d` (sound): 20 turns each, the summary
    covering t0..t15 (slot 16), t16..t19 the tail. Returns each one's summary ID."""
    ids = {}
    with lf.SQLiteStore(path) as store:
        for cid in ("c", "d"):
            store.append_many(
                cid, [{"id": f"t{n}", "role": "user", "body": f"m {n}"} for n in range(20)]
            )
            outcome = lf.Compactor(store, POLICY).compact(cid)
            assert outcome.accepted and outcome.summary is not None
            ids[cid] = outcome.summary.id
    return ids


def _damage(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    conn.close()


def _statuses(path: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT conversation_id, status, reason FROM summaries ORDER BY conversation_id"
        ).fetchall()
    conn.close()
    return rows


def _verdicts(
    path: Path, *, workers: int, mark_stale: bool = False, checked: int = 2
) -> dict[str, str]:
    report = revalidate_database(path, workers=workers, mark_stale=mark_stale)
    assert report.summaries_checked == checked
    assert report.current + report.stale == checked
    return {item.conversation_id: item.reason for item in report.stale_summaries}


def _agree(path: Path, summary_id: str | None) -> None:
    """The context, the Compactor's context and stats() say the same of conversation c (a
    summary marked stale is named by its record's reason only)."""
    with lf.SQLiteStore(path) as store:
        context = store.context("c", PV)
        assert context.fallback == f"stale-summary:{DAMAGED}"
        assert context.fallback_id in {summary_id, None}
        assert lf.Compactor(store, POLICY).context("c").fallback == context.fallback
        assert store.stats().fallbacks == {f"stale-summary:{DAMAGED}": 1}
        assert store.stats("c").fallbacks == {f"stale-summary:{DAMAGED}": 1}
        assert store.stats("d").fallbacks == {}
        assert store.context("d", PV).fallback is None


@pytest.mark.parametrize("slot", SLOTS)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_damaged_slot_is_a_damaged_record(tmp_path: Path, slot: str, workers: int) -> None:
    path = tmp_path / "slot.db"
    ids = _ledger(path)
    _damage(path, f"UPDATE summaries SET through_sequence = {slot} WHERE conversation_id = 'c'")
    _agree(path, ids["c"])
    assert _verdicts(path, workers=workers) == {"c": DAMAGED}
    # Marked stale with that reason: the context and stats still say the same.
    assert _verdicts(path, workers=workers, mark_stale=True) == {"c": DAMAGED}
    assert _statuses(path) == [("c", "stale", DAMAGED), ("d", "current", None)]
    _agree(path, ids["c"])
    assert _verdicts(path, workers=workers, checked=1) == {}  # only d is current now


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sound_slot_written_again_is_current(tmp_path: Path, workers: int) -> None:
    path = tmp_path / "sound.db"
    _ledger(path)
    _damage(path, "UPDATE summaries SET through_sequence = 16")  # the value it holds
    assert _verdicts(path, workers=workers) == {}
    with lf.SQLiteStore(path) as store:
        assert store.context("c", PV).fallback is None
        assert store.stats().fallbacks == {}


#: `plans.preserve_roles` as another tool may leave it: not UTF-8, not JSON, not a list of
#: role names, not text at all.
ROLES = {
    "not-utf8": "CAST(X'5b2273797374656dff225d' AS TEXT)",
    "not-json": "'not json'",
    "not-a-list": "'{\"system\": 1}'",
    "not-roles": "'[1, 2]'",
    "unknown-role": "'[\"admin\"]'",
    "a-blob": "X'5b5d'",
    "a-number": "7",
}


@pytest.mark.parametrize("roles", sorted(ROLES))
@pytest.mark.parametrize("workers", [1, 2])
def test_unreadable_plan_roles_are_a_damaged_record(
    tmp_path: Path, roles: str, workers: int
) -> None:
    path = tmp_path / "roles.db"
    ids = _ledger(path)
    _damage(path, f"UPDATE plans SET preserve_roles = {ROLES[roles]} WHERE conversation_id = 'c'")
    _agree(path, ids["c"])
    assert _verdicts(path, workers=workers) == {"c": DAMAGED}
    assert _verdicts(path, workers=workers, mark_stale=True) == {"c": DAMAGED}
    assert _statuses(path) == [("c", "stale", DAMAGED), ("d", "current", None)]
    _agree(path, None)
    assert _verdicts(path, workers=workers, checked=1) == {}


@pytest.mark.parametrize("roles", ["'[]'", '\'["system", "tool"]\''])
def test_readable_plan_roles_keep_the_summary_current(tmp_path: Path, roles: str) -> None:
    path = tmp_path / "kept.db"
    _ledger(path)
    _damage(path, f"UPDATE plans SET preserve_roles = {roles}")
    assert _verdicts(path, workers=1) == {}
    with lf.SQLiteStore(path) as store:
        assert store.context("c", PV).fallback is None
        assert store.stats().fallbacks == {}


def test_the_parquet_export_on_dask_gives_the_same_verdicts(tmp_path: Path) -> None:
    dask = pytest.importorskip("dask")
    ldask = pytest.importorskip("ledgerfold.dask")
    from ledgerfold.export import export_parquet

    path = tmp_path / "both.db"
    _ledger(path)
    _damage(path, "UPDATE summaries SET through_sequence = 999 WHERE conversation_id = 'c'")
    _damage(path, "UPDATE plans SET preserve_roles = 'not json' WHERE conversation_id = 'd'")
    expected = revalidate_database(path, mark_stale=False).as_json()
    assert {item["conversation"]: item["reason"] for item in expected["stale_summaries"]} == {
        "c": DAMAGED,
        "d": DAMAGED,
    }
    export_parquet(path, tmp_path / "parquet")
    with dask.config.set(scheduler="threads"):
        _, aggregate = ldask.revalidate_parquet(tmp_path / "parquet")
    same = ("conversations", "summaries_checked", "current", "stale", "stale_summaries")
    assert {key: aggregate[key] for key in same} == {key: expected[key] for key in same}
