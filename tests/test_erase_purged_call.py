"""Erasing a tool call after a purge reached it (SPEC §15.5, §17.2, §17.7), on a real SQLite
file: erasing a call takes its results with it. A purge (the retention policy's, or one on
demand) whose cutoff fell between a call and its result used to take the call and leave the
result live, because the summary it sealed covered both; the purge blanks the call's meta,
so a later `retract(call, erase=True)` could no longer find the result, and the result's
text (what the call fetched) stayed in the database file. A purge now stops before a unit
it would split, covered or not, so the call stays until its results can go with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold import SQLiteStore

CONV = "c"
PV = "v1"


def file_bytes(path: Path) -> bytes:
    wal = Path(f"{path}-wal")
    return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def summarized(store: SQLiteStore) -> tuple[int, lf.SummaryEnvelope]:
    """t0..t3, a call and its result, t4..t11, one summary covering all but the tail;
    returns the call's sequence and the summary."""
    for n in range(4):
        store.append(CONV, "user" if n % 2 == 0 else "assistant", f"turn {n}", id=f"t{n}")
    calls = json.dumps([{"id": "k1", "type": "function"}])
    call = store.append(CONV, "assistant", "looking up", id="a1", meta={"tool_calls": calls})
    store.append(CONV, "tool", "sentinelfetchedbody", id="r1", meta={"tool_call_id": "k1"})
    for n in range(4, 12):
        store.append(CONV, "user" if n % 2 == 0 else "assistant", f"turn {n}", id=f"t{n}")
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2)
    summary = lf.Compactor(store, policy, lambda r: f"{len(r.turns)} turns").compact(CONV).summary
    assert summary is not None and {"a1", "r1"} <= set(summary.source_ids)
    return call.sequence, summary


@pytest.mark.parametrize("how", ["retention", "purge_through"])
def test_a_purge_leaves_no_live_result_of_a_call_it_takes(tmp_path: Path, how: str) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        at, summary = summarized(store)
        if how == "retention":  # the newest 9 stay: the cutoff is the call's sequence
            boundary = store.apply_retention(CONV, retain_turns=9)
        else:
            preview = store.preview_purge(CONV, at)
            boundary = store.purge_through(CONV, at, "retention")
            assert preview["through_sequence"] == at - 1  # the preview says so too
        assert boundary is not None and boundary.through_sequence == at - 1
        assert store.current_summary(CONV) == summary  # sealed, not lost
        live = [t.id for t in store.load(CONV).turns]
        assert live[:2] == ["a1", "r1"]
        store.retract(CONV, "a1", erase=True)  # the call goes, and its result with it
        assert [t.id for t in store.load(CONV).turns][:1] == ["t4"]
    assert b"sentinelfetchedbody" not in file_bytes(path)


def test_the_next_purge_takes_the_call_and_its_result_together(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        at, _ = summarized(store)
        store.purge_through(CONV, at, "retention")
        boundary = store.purge_through(CONV, at + 1, "retention")
        assert boundary.through_sequence == at + 1
        assert "a1" not in {t.id for t in store.load(CONV).turns}
        assert "r1" not in {t.id for t in store.load(CONV).turns}
        store.retract(CONV, "a1", erase=True)  # purged with its result: nothing is left
    assert b"sentinelfetchedbody" not in file_bytes(path)
