"""Benchmarks of `SQLiteStore` (pytest-benchmark), each with its anchor in the same run.

- `append_many` of real transcript turns vs raw `sqlite3` `executemany` of the same rows
  (same pragmas: WAL, `synchronous=FULL`); ratio in `extra_info`.
- `commit_summary` with 10k sources vs raw `executemany` of the same 10k source-index rows.
- `context()` on a 1M-turn conversation whose summary covers all but the last 1,000 turns,
  vs the same on a 10k-turn conversation; the target is a ratio within 3x (the per-call path
  must not touch summarised rows).

Under the normal suite (`--benchmark-disable`) each runs once on small sizes as a smoke test.
Run for real with `make bench`. No timing assertions: the figures are reported, not judged.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf

PV = "bench-policy"


def shared_dir() -> Path:
    """The repository's copy of the real transcripts and golden vectors."""
    return Path(__file__).resolve().parents[1] / "tests" / "data"


def _real_turns() -> list[tuple[str, str]]:
    """(role, body) of every turn of the shared transcripts, in file order."""
    turns: list[tuple[str, str]] = []
    for name in ("tau_bench.jsonl", "openhands.jsonl", "swe_agent.jsonl", "docent_inspect.jsonl"):
        with open(shared_dir() / "transcripts" / name, encoding="utf-8") as lines:
            for line in lines:
                turns.extend((t["role"], t["body"]) for t in json.loads(line)["turns"])
    return turns


REAL = _real_turns()


def specs(n: int, start: int = 0) -> Iterator[dict[str, Any]]:
    """`n` append mappings with real bodies and role mix, repeated with unique IDs."""
    for i in range(start, start + n):
        role, body = REAL[i % len(REAL)]
        yield {"role": role, "body": body, "id": f"t{i}"}


def enabled(request: pytest.FixtureRequest) -> bool:
    """Full sizes under `make bench` (--benchmark-enable over the default --benchmark-disable)."""
    config = request.config
    return bool(config.getoption("benchmark_enable")) or not config.getoption("benchmark_disable")


def median_seconds(run: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def raw_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def test_append_many_throughput(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    n = 10_000 if enabled(request) else 500
    batch = list(specs(n))
    stores = count()

    def setup() -> tuple[tuple[lf.SQLiteStore, list[dict[str, Any]]], dict[str, Any]]:
        store = lf.SQLiteStore(tmp_path / f"append-{next(stores)}.db")
        return (store, batch), {}

    def append(store: lf.SQLiteStore, turns: list[dict[str, Any]]) -> None:
        store.append_many("c", turns)
        store.close()

    benchmark.pedantic(append, setup=setup, rounds=5 if enabled(request) else 1)

    conn = raw_connection(tmp_path / "raw.db")
    conn.execute(
        "CREATE TABLE turns (conversation_id TEXT, id TEXT, sequence INTEGER, role TEXT, body TEXT,"
        " protected INTEGER, protection_reason TEXT, grp TEXT, meta TEXT, digest BLOB,"
        " UNIQUE (conversation_id, id), UNIQUE (conversation_id, sequence))"
    )
    digest = bytes(32)
    raw_runs = count()

    def raw_insert() -> None:
        conversation = f"c{next(raw_runs)}"
        rows = [
            (conversation, t["id"], i + 1, t["role"], t["body"], 0, None, None, None, digest)
            for i, t in enumerate(batch)
        ]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")

    raw = median_seconds(raw_insert, 5 if enabled(request) else 1)
    conn.close()
    report(benchmark, "raw_executemany_s", raw, turns=n)


def test_commit_summary_10k_sources(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    n = 10_000 if enabled(request) else 500
    store = lf.SQLiteStore(tmp_path / "commit.db")
    store.append_many("c", list(specs(n + 8)))
    ids = count()

    def setup() -> tuple[tuple[lf.SummaryEnvelope], dict[str, Any]]:
        plan = store.start_plan("c", 8, PV)
        envelope = lf.create_summary_envelope(plan, store.load("c"), f"s{next(ids)}", PV, "summary")
        assert envelope is not None and len(envelope.source_ids) == n
        return (envelope,), {}

    def commit(envelope: lf.SummaryEnvelope) -> None:
        assert store.commit_summary(envelope).accepted

    benchmark.pedantic(commit, setup=setup, rounds=5 if enabled(request) else 1)
    conversation = store.load("c")
    envelope = store.current_summary("c")
    assert envelope is not None
    store.close()

    conn = raw_connection(tmp_path / "raw.db")
    conn.execute(
        "CREATE TABLE summary_sources (summary_pk INTEGER, position INTEGER, turn_id TEXT,"
        " turn_digest BLOB, PRIMARY KEY (summary_pk, position)) WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX by_turn ON summary_sources (turn_id)")
    raw_runs = count()

    def raw_insert() -> None:
        pk = next(raw_runs)
        rows = [
            (pk, position, turn_id, conversation.get(turn_id).digest)  # type: ignore[union-attr]
            for position, turn_id in enumerate(envelope.source_ids)
        ]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO summary_sources VALUES (?, ?, ?, ?)", rows)
        conn.execute("COMMIT")

    raw = median_seconds(raw_insert, 5 if enabled(request) else 1)
    conn.close()
    report(benchmark, "raw_executemany_s", raw, sources=n)


def build_summarised(store: lf.SQLiteStore, conversation: str, n: int, tail: int) -> None:
    """`n` turns in batches; one summary covering all but the last `tail`."""
    step = 50_000
    for start in range(0, n, step):
        store.append_many(conversation, list(specs(min(step, n - start), start)))
    plan = store.start_plan(conversation, tail, PV)
    envelope = lf.create_summary_envelope(
        plan, store.load(conversation), f"s-{conversation}", PV, "summary"
    )
    assert envelope is not None and store.commit_summary(envelope).accepted


def test_context_on_a_long_ledger(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    big = 1_000_000 if enabled(request) else 3_000
    small = 10_000 if enabled(request) else 1_500
    tail = 1_000
    store = lf.SQLiteStore(tmp_path / "context.db")
    started = time.perf_counter()
    build_summarised(store, "big", big, tail)
    build_seconds = time.perf_counter() - started
    build_summarised(store, "small", small, tail)
    store.context("small", PV)  # warm the envelope cache, as a long-lived app would
    store.context("big", PV)

    # The read itself: the store serves a context again while nothing changed
    # (`store/_context_cache.py`), so each round starts with that cache empty; the served-again
    # figure is recorded beside it.
    def uncached_small() -> object:
        store._contexts.clear()
        return store.context("small", PV)

    context = benchmark.pedantic(
        store.context,
        args=("big", PV),
        setup=store._contexts.clear,
        rounds=200 if enabled(request) else 3,
    )
    assert context.fallback is None and len(context) == tail + 1

    small_seconds = median_seconds(uncached_small, 20)
    served_again = median_seconds(lambda: store.context("big", PV), 20)
    store.close()
    report(
        benchmark,
        "context_10k_turns_s",
        small_seconds,
        turns=big,
        build_s=build_seconds,
        served_again_s=served_again,
    )


def report(benchmark: Any, anchor_name: str, anchor: float, **extra: float) -> None:
    """Put the anchor and the ratio (ours / anchor) beside the benchmark's own figures."""
    benchmark.extra_info.update(extra)
    benchmark.extra_info[anchor_name] = anchor
    stats = getattr(benchmark, "stats", None)
    if stats is not None and anchor > 0:
        ratio = stats.stats.median / anchor
        benchmark.extra_info["ratio_vs_anchor"] = ratio
        median = stats.stats.median
        print(f"\n{benchmark.name}: {median:.4f}s, {anchor_name} {anchor:.4f}s, ratio {ratio:.2f}")
