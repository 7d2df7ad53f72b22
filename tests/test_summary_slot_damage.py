"""A current summary's slot (`summaries.through_sequence`) is where its last source is. The
store trusted the stored column: changed by another tool, the context left turns out (a slot
past the tail hid the newest turns) or showed covered ones again beside the summary, and a
compaction extended it with turns it already covered (an envelope citing a turn twice). A
slot that is not the last source's sequence (or no number) is now a damaged record: the
context is raw (`stale-summary:damaged-record`) and the next compaction rebases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf

PV = "v1"
POLICY = lf.CompactionPolicy(PV, keep_tail=4)
DAMAGE = ["'x'", "2.5", "-3", "NULL", "X'00'", "10", "999"]


def _compacted(path: Path) -> lf.SummaryEnvelope:
    """20 turns; the summary covers t0..t15 (slot 16), t16..t19 are the tail."""
    with lf.SQLiteStore(path) as store:
        store.append_many(
            "c", [{"id": f"t{n}", "role": "user", "body": f"m {n}"} for n in range(20)]
        )
        assert lf.Compactor(store, POLICY).compact("c").accepted
        summary = store.current_summary("c")
    assert summary is not None
    return summary


def _set_slot(path: Path, value: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE summaries SET through_sequence = {value}")
    conn.close()


@pytest.mark.parametrize("value", DAMAGE)
def test_a_damaged_slot_gives_the_raw_context(tmp_path: Path, value: str) -> None:
    path = tmp_path / "s.db"
    summary = _compacted(path)
    _set_slot(path, value)
    with lf.SQLiteStore(path) as store:
        context = store.context("c", PV)
        assert (context.fallback, context.fallback_id) == (
            "stale-summary:damaged-record",
            summary.id,
        )
        assert [item.id for item in context.items] == [f"t{n}" for n in range(20)]


@pytest.mark.parametrize("value", DAMAGE)
def test_a_damaged_slot_is_rebased_not_extended(tmp_path: Path, value: str) -> None:
    path = tmp_path / "r.db"
    _compacted(path)
    _set_slot(path, value)
    with lf.SQLiteStore(path) as store:
        store.append_many(
            "c", [{"id": f"u{n}", "role": "user", "body": f"u {n}"} for n in range(10)]
        )
        assert lf.Compactor(store, POLICY).compact("c").accepted
        summary = store.current_summary("c")
        assert summary is not None
        assert len(set(summary.source_ids)) == len(summary.source_ids) == 26  # no turn twice
        context = store.context("c", PV)
        assert context.fallback is None
        assert [item.id for item in context.items[1:]] == ["u6", "u7", "u8", "u9"]


def test_a_sound_slot_serves_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    summary = _compacted(path)
    _set_slot(path, "16")  # what it is: a write of the same value
    with lf.SQLiteStore(path) as store:
        context = store.context("c", PV)
        assert context.fallback is None and context.summary is not None
        assert context.summary.id == summary.id
