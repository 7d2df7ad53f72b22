"""The sealed base stays an ancestor of the sealed summary (SPEC §17.5, §15.5), on a real
SQLite file: when the sealed summary was written in a source run of its own (an extension
over a call answered below its slot), the purge erases the versions between it and the base,
and with them the only link the store had from one to the other. An edit of a live source of
the sealed summary then found no checkpoint, and the next compaction was a rebase of the
live turns: what the purged turns said was lost, though the purge had kept their summary."""

from __future__ import annotations

import json
from pathlib import Path

import ledgerfold as lf
from ledgerfold import SQLiteStore

CONV = "c"
PV = "v1"


def text(request: lf.SummaryRequest) -> str:
    return f"{request.plan_id}: " + " ".join(item.id for item in request.turns)


def talk(store: SQLiteStore, first: int, count: int) -> None:
    for n in range(first, first + count):
        store.append(CONV, "user" if n % 2 else "assistant", f"turn {n}", id=f"t{n}")


def test_an_edit_after_a_purge_extends_the_sealed_base_across_source_runs(tmp_path: Path) -> None:
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=2, keep_versions=1)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy, text)
        talk(store, 0, 8)
        base = compactor.compact(CONV).summary  # t0..t5
        assert base is not None
        calls = json.dumps([{"id": "k1", "type": "function"}])
        store.append(CONV, "assistant", "calling", id="call", meta={"tool_calls": calls})
        talk(store, 8, 4)
        compactor.compact(CONV)  # the call waits for its result: kept raw below the slot
        store.append(CONV, "tool", "result", id="result", meta={"tool_call_id": "k1"})
        talk(store, 12, 2)
        sealed = compactor.compact(CONV).summary  # over the call below its slot: a new run
        assert sealed is not None and {"call", "result"} <= set(sealed.source_ids)
        store.purge_through(CONV, 6, "retention")  # base's sources
        assert store.current_summary(CONV) == sealed
        store.edit(CONV, "t11", body="corrected")  # a live source of the sealed summary
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == base.id
        assert set(base.source_ids) <= set(outcome.summary.source_ids)
        assert store.stats(CONV).sealed_lost == 0
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None
