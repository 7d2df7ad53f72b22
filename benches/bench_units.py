"""Retracting and editing a call on a long ledger (SPEC §17.2): the store finds the results
paired with the call (the nearest call of their ID before them) by reading between the calls
of that ID next to it. 20,000 exchanges (user, call, result), call IDs unique or `call_0`
every time. Anchor, in the same run: one SQL query selecting the tool turns whose
`tool_call_id` is the call's (what a retraction read before the pairing rule, which took
every result of a reused ID). And appending a call and its result one by one (in order, or
the result first), against appending two user turns."""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import time
from itertools import count
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from bench_store import enabled, report

C = "c"


def _calls(call_id: str) -> dict[str, str]:
    return {"tool_calls": json.dumps([{"id": call_id, "type": "function"}])}


def _ledger(path: Path, exchanges: int, reused: bool) -> None:
    specs: list[dict[str, Any]] = []
    for n in range(exchanges):
        call_id = "call_0" if reused else f"call_{n}"
        specs += [
            {"role": "user", "body": f"question {n}", "id": f"u{n}"},
            {"role": "assistant", "body": "", "id": f"a{n}", "meta": _calls(call_id)},
            {
                "role": "tool",
                "body": f"result {n}",
                "id": f"r{n}",
                "meta": {"tool_call_id": call_id},
            },
        ]
    with lf.SQLiteStore(path) as store:
        store.append_many(C, specs)


@pytest.mark.parametrize("reused", [False, True], ids=["unique-ids", "call_0-every-time"])
@pytest.mark.parametrize("operation", ["retract", "edit"])
def test_change_a_call_on_a_long_ledger(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path, operation: str, reused: bool
) -> None:
    exchanges = 20_000 if enabled(request) else 300
    built = tmp_path / "built.db"
    _ledger(built, exchanges, reused)
    middle = exchanges // 2
    copies = count()

    def setup() -> tuple[tuple[lf.SQLiteStore], dict[str, Any]]:
        path = tmp_path / f"copy-{next(copies)}.db"
        shutil.copy(built, path)
        return (lf.SQLiteStore(path),), {}

    def change(store: lf.SQLiteStore) -> None:
        if operation == "retract":
            store.retract(C, f"a{middle}")
        else:
            store.edit(C, f"a{middle}", meta=_calls("renamed"))
        store.close()

    benchmark.pedantic(change, setup=setup, rounds=5 if enabled(request) else 1)
    with lf.SQLiteStore(tmp_path / f"copy-{next(copies) - 1}.db") as last:
        ids = {turn.id for turn in last.load(C).turns}
    # A retraction takes the call's own result along, and only that one.
    assert (f"r{middle}" in ids) == (operation == "edit") and f"r{middle + 1}" in ids
    conn = sqlite3.connect(built)
    call_id = "call_0" if reused else f"call_{middle}"

    def anchor() -> None:
        conn.execute(
            "SELECT pk, id FROM turns WHERE conversation_id = ? AND state = 0 AND role = 'tool'"
            " AND CASE WHEN json_valid(meta) THEN json_extract(meta, '$.tool_call_id') END"
            " IN (SELECT value FROM json_each(?))",
            (C, json.dumps([call_id])),
        ).fetchall()

    times = []
    for _ in range(5):
        start = time.perf_counter()
        anchor()
        times.append(time.perf_counter() - start)
    conn.close()
    report(benchmark, "sql_results_of_the_id_s", statistics.median(times), exchanges=exchanges)


@pytest.mark.parametrize("pattern", ["unique-ids", "call_0-every-time", "result-first"])
def test_append_an_exchange_on_a_long_ledger(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path, pattern: str
) -> None:
    """A call and its result appended one by one (`append`) after 20,000 exchanges: the
    store pairs each with the other (the result's call; results of the call's IDs stored
    before it, SPEC §17.2). `result-first` writes the result before its call (unique IDs).
    `durability="normal"`: the disk's sync is not what is timed. Anchor, in the same store:
    appending two user turns."""
    exchanges = 20_000 if enabled(request) else 300
    path = tmp_path / "ledger.db"
    _ledger(path, exchanges, pattern == "call_0-every-time")
    fresh = count()
    store = lf.SQLiteStore(path, durability="normal")

    def exchange() -> None:
        call_id = "call_0" if pattern == "call_0-every-time" else f"new_{next(fresh)}"
        call = ("assistant", "", _calls(call_id))
        result = ("tool", "result", {"tool_call_id": call_id})
        for role, body, meta in (result, call) if pattern == "result-first" else (call, result):
            store.append(C, role, body, meta=meta)

    rounds = 200 if enabled(request) else 2
    benchmark.pedantic(exchange, rounds=rounds, warmup_rounds=min(rounds, 5))

    def anchor() -> None:
        store.append(C, "user", "question")
        store.append(C, "user", "question")

    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        anchor()
        times.append(time.perf_counter() - start)
    store.close()
    report(benchmark, "two_user_appends_s", statistics.median(times), exchanges=exchanges)
