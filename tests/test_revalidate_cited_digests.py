"""A stored digest changed alone (`turns.digest` rewritten by another tool, the body as it
was) in a turn a current summary cites. The summary is sound (its sources' bytes are the ones
it was made from: SPEC §6) and the store's context serves it, but the per-call path trusts
stored digests (`check_summary` on the loaded ledger reads it `source-modified`). Deep
revalidation re-hashed the cited bytes and never looked at their stored digests, so it
reported nothing and repaired nothing. It now reports such a digest as wrong (`wrong_digests`)
and repairs it, the summary staying current (its source index recorded the repaired digest),
whatever path read the run: packed and matched at once, packed with turns kept raw below the
slot, or by rows. Each database is a real file, damaged with raw SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold import _native
from ledgerfold.revalidate import revalidate_database

PV = "v1"
POLICY = lf.CompactionPolicy(PV, keep_tail=4)
DIGESTS = {"random": "randomblob(32)", "short": "X'0011'", "text": "'not a digest'"}


def _ledger(path: Path, *, kept: bool = False) -> None:
    """Conversations c and d, 20 turns each, each summary covering t0..t15; with `kept`,
    c's t1 is protected (kept raw below the summary's slot)."""
    with lf.SQLiteStore(path) as store:
        for cid in ("c", "d"):
            store.append_many(
                cid,
                [
                    {
                        "id": f"t{n}",
                        "role": "user",
                        "body": f"m {n}",
                        "protected": kept and cid == "c" and n == 1,
                        "protection_reason": "active-constraint"
                        if kept and cid == "c" and n == 1
                        else None,
                    }
                    for n in range(20)
                ],
            )
            assert lf.Compactor(store, POLICY).compact(cid).accepted


def _set_digest(path: Path, value: str) -> bytes:
    with sqlite3.connect(path) as conn:
        (before,) = conn.execute(
            "SELECT digest FROM turns WHERE conversation_id = 'c' AND id = 't3'"
        ).fetchone()
        conn.execute(f"UPDATE turns SET digest = {value} WHERE conversation_id = 'c' AND id = 't3'")
    conn.close()
    return bytes(before)


def _state(path: Path) -> tuple[list[tuple[str, str]], object]:
    with sqlite3.connect(path) as conn:
        statuses = conn.execute(
            "SELECT conversation_id, status FROM summaries ORDER BY conversation_id"
        ).fetchall()
        (digest,) = conn.execute(
            "SELECT digest FROM turns WHERE conversation_id = 'c' AND id = 't3'"
        ).fetchone()
    conn.close()
    return statuses, digest


def _check(path: Path, before: bytes, workers: int) -> None:
    report = revalidate_database(path, workers=workers, mark_stale=False)
    assert (report.current, report.stale, report.stale_summaries) == (2, 0, ())
    assert (report.digests_wrong, report.wrong_digests) == (1, (("c", "t3"),))
    assert report.digests_repaired == 0
    with lf.SQLiteStore(path) as store:  # the context and stats() agree: the summary is used
        assert store.context("c", PV).fallback is None
        assert store.stats().fallbacks == {}
    report = revalidate_database(path, workers=workers)
    assert (report.current, report.stale) == (2, 0)
    assert (report.digests_wrong, report.digests_repaired) == (1, 1)
    assert _state(path) == ([("c", "current"), ("d", "current")], before)
    report = revalidate_database(path, workers=workers, mark_stale=False)
    assert (report.current, report.digests_wrong) == (2, 0)
    with lf.SQLiteStore(path) as store:
        summary = store.current_summary("c")
        assert summary is not None
        assert lf.check_summary(summary, store.load("c"), PV).current
        assert store.context("c", PV).fallback is None


@pytest.mark.parametrize("digest", sorted(DIGESTS))
@pytest.mark.parametrize("workers", [1, 2])
def test_a_cited_digest_changed_alone_is_reported_and_repaired(
    tmp_path: Path, digest: str, workers: int
) -> None:
    path = tmp_path / "cited.db"
    _ledger(path)
    _check(path, _set_digest(path, DIGESTS[digest]), workers)


@pytest.mark.parametrize("workers", [1, 2])
def test_with_a_turn_kept_raw_below_the_slot(tmp_path: Path, workers: int) -> None:
    path = tmp_path / "kept.db"
    _ledger(path, kept=True)
    assert revalidate_database(path, workers=workers, mark_stale=False).digests_wrong == 0
    _check(path, _set_digest(path, DIGESTS["random"]), workers)


def test_when_the_run_is_read_by_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rows.db"
    _ledger(path)
    monkeypatch.setattr(_native, "revalidate_columns", lambda *args, **kwargs: None)
    assert revalidate_database(path, workers=1, mark_stale=False).digests_wrong == 0
    _check(path, _set_digest(path, DIGESTS["random"]), 1)
