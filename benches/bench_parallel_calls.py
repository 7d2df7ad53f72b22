"""Turns making several calls (parallel tool calls, SPEC §17.2) on a long ledger: 20,000
exchanges of a user turn, an assistant turn making three calls and their three results.
Timed: appending one more such exchange, turn by turn (the results' calls are found through
the calls indexes by position), and an edit taking a call made once away from its turn (its
result then looks for another call of its ID: a probe of each index, where a walk of every
turn making several calls read the ledger). Anchor, in the same store: appending two user
turns. `durability="normal"`: the disk's sync is not what is timed."""

from __future__ import annotations

import json
import statistics
import time
from itertools import count
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from bench_store import enabled, report

C = "c"
PARALLEL = 3


def _calls(*ids: str) -> dict[str, str]:
    return {"tool_calls": json.dumps([{"id": i, "type": "function"} for i in ids])}


def _exchange(store: lf.SQLiteStore, tag: str) -> None:
    made = [f"{tag}-{p}" for p in range(PARALLEL)]
    store.append(C, "assistant", "", meta=_calls(*made))
    for call_id in made:
        store.append(C, "tool", "result", meta={"tool_call_id": call_id})


def _anchor(store: lf.SQLiteStore, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        store.append(C, "user", "question")
        store.append(C, "user", "question")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@pytest.mark.parametrize("operation", ["append-exchange", "edit-away-a-call-made-once"])
def test_parallel_calls_on_a_long_ledger(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path, operation: str
) -> None:
    exchanges = 20_000 if enabled(request) else 200
    specs: list[dict[str, Any]] = []
    for n in range(exchanges):
        made = [f"k{n}-{p}" for p in range(PARALLEL)]
        specs += [
            {"role": "user", "body": f"question {n}"},
            {"role": "assistant", "body": "", "meta": _calls(*made)},
            *({"role": "tool", "body": "r", "meta": {"tool_call_id": i}} for i in made),
        ]
    store = lf.SQLiteStore(tmp_path / "ledger.db", durability="normal")
    for start in range(0, len(specs), 10_000):
        store.append_many(C, specs[start : start + 10_000])
    fresh = count()
    rounds = 100 if enabled(request) else 2
    if operation == "append-exchange":
        benchmark.pedantic(
            lambda: _exchange(store, f"new{next(fresh)}"),
            rounds=rounds,
            warmup_rounds=min(rounds, 5),
        )
    else:

        def setup() -> tuple[tuple[str], dict[str, Any]]:
            n = next(fresh)
            store.append(C, "assistant", "", id=f"one{n}", meta=_calls(f"once{n}"))
            store.append(C, "tool", "r", meta={"tool_call_id": f"once{n}"})
            return (f"one{n}",), {}

        benchmark.pedantic(
            lambda turn_id: store.edit(C, turn_id, meta={}), setup=setup, rounds=rounds
        )
    report(benchmark, "two_user_appends_s", _anchor(store, rounds), exchanges=exchanges)
    store.close()
