"""Deep revalidation compares the stored digest of every turn a verified summary cites. The
check re-hashes the sources' bytes against the summary's fingerprint, not against the
digests stored in their rows, which the store's own checks trust (SPEC §15.5, §15.8: a
purge checks the summary it seals with them). A cited turn whose stored digest was changed
behind the library's back (its body intact) was reported by nothing and repaired by nothing:
revalidation called everything current, `check_summary` on `load()` called the summary
`source-modified`, and a purge erased it instead of sealing it. It is now a wrong digest,
named and repaired as an uncited turn's is, and the summary, whose bytes are right, stays
current."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.revalidate import RevalidationReport, revalidate_database

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from revalidate_support import encoded_file  # noqa: E402

PV = "v1"


def _ledger(path: Path, encoding: str) -> Path:
    """Three conversations of 20 turns, each compacted (t0..t15 cited, t16..t19 raw)."""
    encoded_file(path, encoding)
    with lf.SQLiteStore(path) as store:
        for cid in ("a", "b", "c"):
            store.append_many(
                cid, [{"id": f"t{n}", "role": "user", "body": f"{cid} turn {n}"} for n in range(20)]
            )
            policy = lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1)
            assert lf.Compactor(store, policy).compact(cid).accepted
    return path


def _sql(path: Path, statement: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement)
    conn.close()


def _reports(path: Path, **options: Any) -> RevalidationReport:
    """The report, the same whatever the workers and run sizes (`mark_stale=False`)."""
    reports = [
        revalidate_database(path, workers=workers, batch_turns=batch, mark_stale=False, **options)
        for workers in (1, 2)
        for batch in (1, 2000)
    ]
    seen = {
        json.dumps({k: v for k, v in r.as_json().items() if k not in ("seconds", "workers")})
        for r in reports
    }
    assert len(seen) == 1, seen
    return reports[0]


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16le"])
def test_a_cited_turns_wrong_stored_digest_is_found_and_repaired(
    tmp_path: Path, encoding: str
) -> None:
    path = _ledger(tmp_path / "r.db", encoding)
    _sql(path, "UPDATE turns SET digest = randomblob(32) WHERE conversation_id = 'b' AND id = 't5'")
    with lf.SQLiteStore(path) as store:  # what the store's own check says of it
        current = store.current_summary("b")
        assert current is not None
        assert lf.check_summary(current, store.load("b"), PV).reason == "source-modified"

    found = _reports(path)
    assert (found.stale, found.current) == (0, 3)  # the bytes are the summary's
    assert (found.digests_wrong, found.wrong_digests) == (1, (("b", "t5"),))

    repaired = revalidate_database(path, workers=1)
    assert (repaired.digests_repaired, repaired.stale) == (1, 0)
    again = _reports(path)
    assert (again.digests_wrong, again.stale, again.current) == (0, 0, 3)
    with lf.SQLiteStore(path) as store:
        current = store.current_summary("b")
        assert current is not None
        assert lf.check_summary(current, store.load("b"), PV).current
        store.purge_through("b", 8, "retention")  # sealed, not erased
        assert store.current_summary("b") == current
        assert store.context("b", PV).fallback is None


def test_a_cited_turns_digest_is_compared_without_hashing_every_cited_body(
    tmp_path: Path,
) -> None:
    """Only the cited turns whose stored digest differs from the source index's are hashed
    again: `digests_checked` counts the raw tails (4 a conversation) and that one."""
    path = _ledger(tmp_path / "n.db", "UTF-8")
    assert _reports(path).digests_checked == 12
    _sql(path, "UPDATE turns SET digest = randomblob(32) WHERE conversation_id = 'c' AND id = 't0'")
    assert _reports(path).digests_checked == 13


def test_a_changed_cited_body_is_still_a_stale_summary(tmp_path: Path) -> None:
    """Not a wrong digest of a verified summary: its bytes no longer give its fingerprint."""
    path = _ledger(tmp_path / "b.db", "UTF-8")
    _sql(path, "UPDATE turns SET body = 'changed' WHERE conversation_id = 'a' AND id = 't3'")
    report = _reports(path)
    assert [(s.conversation_id, s.reason) for s in report.stale_summaries] == [
        ("a", "source-modified")
    ]
    assert report.wrong_digests == (("a", "t3"),)
