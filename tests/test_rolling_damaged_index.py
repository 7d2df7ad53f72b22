"""The rolling fast path over a damaged source index (SPEC §15.1, §15.4): stored digests
that do not reproduce a summary's fingerprint make a rebase due instead of an extension, a
commit on a store reading a damaged index checks the whole ledger, and a sealed summary
stays sealed."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._native import SourceDigests
from ledgerfold._summary import extended_fingerprint

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))


from rolling_support import POLICY, VERSION, _compact, _reference, _say  # noqa: E402


def _damage_index(path: Path, *digests: object) -> None:
    """Overwrite the stored digests of the first sources of every run, as a change made
    outside ledgerfold (or a bad sector) would."""
    with sqlite3.connect(path) as raw:
        for position, digest in enumerate(digests):
            raw.execute(
                "UPDATE run_sources SET turn_digest = ? WHERE position = ?", (digest, position)
            )
    raw.close()


@pytest.mark.parametrize(
    "digests",
    [(bytes(32),), (bytes(31),), (b"y" * 33,), ("x" * 32,), (bytes(31), bytes(33))],
    ids=["other-digest", "short", "long", "text", "lengths-that-make-up"],
)
def test_a_damaged_source_index_is_not_extended_but_rebased(
    tmp_path: Path, digests: tuple[object, ...]
) -> None:
    """Regression: the stored digests of a summary's sources were trusted when read back, so
    after a damaged row an extension was accepted bound to a fingerprint its sources do not
    have (the context then served it), or the compaction raised `InvalidInput`/`TypeError`.
    Now digests that do not reproduce the summary's fingerprint make a rebase due."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        _say(store, "c", 10)
        first = _compact(store)
    _damage_index(path, *digests)
    with lf.SQLiteStore(path) as store:  # a cold cache: the digests come from the index
        _say(store, "c", 3)
        rebase = _compact(store)
        assert rebase.parent_id is None and set(first.source_ids) <= set(rebase.source_ids)
        assert rebase.source_fingerprint == _reference(store, rebase)
        assert lf.check_summary(rebase, store.load("c"), VERSION).current
        assert store.context("c", VERSION).summary is not None
        # The rebase wrote a new index: the loop rolls on from it.
        _say(store, "c", 3)
        rolled = _compact(store)
        assert rolled.parent_id == rebase.id
        assert rolled.source_fingerprint == _reference(store, rolled)


def test_a_commit_on_a_store_reading_a_damaged_index_checks_the_whole_ledger(
    tmp_path: Path,
) -> None:
    """The compaction began on a store whose cache holds the true digests; the index is
    damaged; another store (cold) commits. Its fast path cannot be trusted, so the envelope
    is checked on the ledger: accepted, with the reference fingerprint (it was refused as
    `source-modified` before: an honest result lost)."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as warm, lf.SQLiteStore(path) as cold:
        _say(warm, "c", 10)
        _compact(warm)
        _say(warm, "c", 3)
        work = warm.begin_compaction("c", 2, VERSION)
        assert work.parent is not None and isinstance(work.parent_digests, SourceDigests)
        _damage_index(path, bytes(32))
        plan = work.plan
        assert plan is not None
        envelope = lf.SummaryEnvelope(
            id="s2",
            plan_id=plan.plan_id,
            conversation_id="c",
            source_revision=plan.source_revision,
            source_ids=plan.compacted_ids,
            source_fingerprint=extended_fingerprint(work.parent_digests, work.new_turns),
            policy_version=VERSION,
            text="extends",
            parent_id=work.parent.id,
        )
        write = cold.commit_summary(envelope)
        assert write.accepted, write
        assert envelope.source_fingerprint == _reference(cold, envelope)


def test_a_damaged_index_of_a_sealed_summary_leaves_it_sealed(tmp_path: Path) -> None:
    """The rebase a damaged index makes due never supersedes a sealed summary (it holds what
    the purged turns said): nothing is compacted instead, and no extension is accepted."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        _say(store, "c", 10)
        sealed = _compact(store)
        store.purge_through("c", 3, "retention")
    with sqlite3.connect(path) as raw:  # a live source's digest (position 5: turn5)
        raw.execute("UPDATE run_sources SET turn_digest = ? WHERE position = 5", (bytes(32),))
    raw.close()
    with lf.SQLiteStore(path) as store:
        _say(store, "c", 3)
        outcome = lf.Compactor(store, POLICY, lambda request: "summary").compact("c")
        assert not outcome.accepted
        current = store.current_summary("c")
        assert current is not None and current.id == sealed.id
