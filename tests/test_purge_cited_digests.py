"""A purge seals the current summary after checking it current (SPEC §15.5), and that check
reads the stored digests of the turns it cites. A cited turn whose stored digest alone was
changed behind the library's back (raw SQL; its body intact) made the summary read
`source-modified`, so the purge erased the summary it should have sealed: what the purged
turns said left the context although the summary's bytes were right. The seal now asks
the source index: a cited turn whose bytes still give the digest the summary was
fingerprinted from is checked with that digest, which the purge repairs. A body that
really changed still stales the summary."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.revalidate import revalidate_database

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from revalidate_support import encoded_file  # noqa: E402

PV = "v1"


def _ledger(path: Path) -> lf.SummaryEnvelope:
    """20 turns, t0..t15 summarised, t16..t19 raw; the summary."""
    with lf.SQLiteStore(path) as store:
        store.append_many(
            "b", [{"id": f"t{n}", "role": "user", "body": f"b turn {n}"} for n in range(20)]
        )
        assert lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4)).compact("b").accepted
        current = store.current_summary("b")
    assert current is not None
    return current


def _sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)
    conn.close()


def _digest(path: Path, turn_id: str) -> bytes:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT digest FROM turns WHERE id = ?", (turn_id,)).fetchone()
    conn.close()
    return bytes(row[0])


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16le"])
def test_a_purge_seals_the_summary_when_only_a_cited_digest_was_changed(
    tmp_path: Path, encoding: str
) -> None:
    path = encoded_file(tmp_path / "s.db", encoding)
    summary = _ledger(path)
    _sql(path, "UPDATE turns SET digest = randomblob(32) WHERE id = 't5'")
    with lf.SQLiteStore(path) as store:
        store.purge_through("b", 8, "retention")
        assert store.current_summary("b") == summary  # sealed, not erased
        context = store.context("b", PV)
        assert context.fallback is None
        assert context.summary is not None and context.summary.id == summary.id
    report = revalidate_database(path, workers=1, mark_stale=False)
    assert (report.current, report.stale) == (1, 0)


def test_a_live_cited_turns_digest_is_repaired_by_the_purge(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    summary = _ledger(path)
    good = _digest(path, "t12")
    _sql(path, "UPDATE turns SET digest = randomblob(32) WHERE id = 't12'")
    with lf.SQLiteStore(path) as store:
        assert lf.check_summary(summary, store.load("b"), PV).reason == "source-modified"
        store.purge_through("b", 3, "retention")
        assert store.current_summary("b") == summary
        assert store.context("b", PV).fallback is None
    assert _digest(path, "t12") == good  # t12 stays live, its digest repaired


def test_a_dry_run_names_the_summary_it_would_seal_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    summary = _ledger(path)
    _sql(path, "UPDATE turns SET digest = x'00' WHERE id = 't12'")
    before = path.read_bytes()
    with lf.SQLiteStore(path) as store:
        preview = store.preview_purge("b", 3)
        assert preview["sealed_summary"] == summary.id
        assert preview["versions_erased"] == 0
    assert _digest(path, "t12") == b"\x00"
    assert path.read_bytes() == before


def test_a_cited_body_that_changed_still_stales_the_summary(tmp_path: Path) -> None:
    """Its bytes do not give the source index's digest: the summary is not the ledger's."""
    path = tmp_path / "c.db"
    _ledger(path)
    _sql(path, "UPDATE turns SET body = 'changed', digest = randomblob(32) WHERE id = 't5'")
    with lf.SQLiteStore(path) as store:
        store.purge_through("b", 8, "retention")
        assert store.current_summary("b") is None
        assert store.context("b", PV).fallback == "no-summary"
