"""The agent loop (SPEC §15, issue 17): what one agent session costs, per compaction and per
append. Smoke-sized in the normal test run; full size under `make bench`.

- Agent session: real transcript bodies, one user/assistant exchange at a time through
  `Compactor` (trigger 4,000 tokens) with a token-counting summarizer: summarizer input
  tokens / tokens appended (anchor, same session: what v1 would have sent for the same
  compactions, every covered turn plus the previous summary each time), the largest request,
  the number of compactions and the database size.
- Per-compaction store cost: a compaction of 8 new turns on a 100k-turn conversation vs on a
  1k-turn one (a trivial summarizer, so the store's work is what is timed), in turn.
- Append latency: single `append` with durability "full" and "normal", each vs a raw
  `sqlite3` INSERT with the same pragmas (p50/p99 in extra_info).
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from bench_conftest import full_size, iter_transcript_turns, record_ratio, target

import ledgerfold as lf
from ledgerfold.summarizers import ExtractiveSummarizer
from ledgerfold.tokens import approx_tokens

PV = "bench-loop"


def exchanges() -> Iterator[tuple[str, str]]:
    """(user body, assistant body) pairs from the real transcripts, in order, repeated."""
    turns = [t for t in iter_transcript_turns() if t["role"] in ("user", "assistant")]
    users = [t["body"] for t in turns if t["role"] == "user" and t["body"].strip()]
    assistants = [t["body"] for t in turns if t["role"] == "assistant" and t["body"].strip()]
    for n in count():
        yield users[n % len(users)], assistants[n % len(assistants)]


class CountingSummarizer:
    """The built-in extractive summarizer, counting what it is given."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.input_tokens = 0
        self.largest_request = 0
        self.calls = 0

    def __call__(self, request: lf.SummaryRequest) -> str:
        tokens = sum(approx_tokens(turn.text) for turn in request.turns)
        self.input_tokens += tokens + approx_tokens(request.previous_summary or "")
        self.largest_request = max(self.largest_request, tokens)
        self.calls += 1
        return self.inner(request)


def test_agent_session(benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    n_exchanges = 2_000 if full_size(request.config) else 150
    policy = lf.CompactionPolicy(PV, keep_tail=6, trigger_tokens=4_000)
    outcome: dict[str, Any] = {}

    def session() -> None:
        path = tmp_path / f"session-{len(outcome)}.db"
        summarizer = CountingSummarizer()
        appended_tokens = appended_bytes = 0
        v1_input = 0  # what v1 would have sent: every covered turn + the previous summary
        tokens_of: dict[str, int] = {}
        with lf.SQLiteStore(path, durability="normal") as store:
            compactor = lf.Compactor(store, policy, summarizer)
            source = exchanges()
            for index in range(n_exchanges):
                user, assistant = next(source)
                for role, body in (("user", user), ("assistant", assistant)):
                    turn = store.append("c", role, body, id=f"t{2 * index}{role[0]}")
                    tokens_of[turn.id] = approx_tokens(body)
                    appended_tokens += tokens_of[turn.id]
                    appended_bytes += len(body.encode())
                previous = store.current_summary("c")
                result = compactor.compact("c")
                if result.accepted and result.summary is not None:
                    v1_input += sum(tokens_of[i] for i in result.summary.source_ids)
                    v1_input += approx_tokens(previous.text) if previous else 0
        store_bytes = sum(
            os.path.getsize(f"{path}{suffix}")
            for suffix in ("", "-wal")
            if os.path.exists(f"{path}{suffix}")
        )
        outcome.update(
            summarizer=summarizer,
            appended_tokens=appended_tokens,
            appended_bytes=appended_bytes,
            v1_input=v1_input,
            store_bytes=store_bytes,
        )

    benchmark.pedantic(session, rounds=1)
    summarizer: CountingSummarizer = outcome["summarizer"]
    turns = 2 * n_exchanges
    extra = benchmark.extra_info
    extra.update(
        exchanges=n_exchanges,
        appended_tokens=outcome["appended_tokens"],
        summarizer_input_tokens=summarizer.input_tokens,
        input_per_appended_token=round(summarizer.input_tokens / outcome["appended_tokens"], 3),
        v1_input_tokens=outcome["v1_input"],
        v1_input_per_appended_token=round(outcome["v1_input"] / outcome["appended_tokens"], 3),
        largest_request_tokens=summarizer.largest_request,
        compactions=summarizer.calls,
        compaction_bound=turns // policy.min_new_turns,
        store_bytes=outcome["store_bytes"],
        store_bound_bytes=2 * outcome["appended_bytes"] + 2**20,
    )
    target(benchmark, "input_per_appended_token", max_value=1.5)
    target(benchmark, "largest_request_tokens", max_value=policy.max_input_tokens)
    target(benchmark, "compactions", max_value=turns // policy.min_new_turns)
    target(benchmark, "store_bytes", max_value=2 * outcome["appended_bytes"] + 2**20)
    assert summarizer.largest_request <= policy.max_input_tokens
    assert summarizer.calls <= turns // policy.min_new_turns


def _summarised(path: Path, turns: int) -> tuple[lf.SQLiteStore, lf.Compactor]:
    store = lf.SQLiteStore(path, durability="normal")
    source = exchanges()
    step = 20_000
    for start in range(0, turns, step):
        batch = []
        for index in range(start, min(turns, start + step), 2):
            user, assistant = next(source)
            batch += [
                {"role": "user", "body": user, "id": f"u{index}"},
                {"role": "assistant", "body": assistant, "id": f"a{index}"},
            ]
        store.append_many("c", batch)
    policy = lf.CompactionPolicy(PV, keep_tail=8, max_input_tokens=10**9, keep_versions=2)
    compactor = lf.Compactor(store, policy, lambda request: "summary")
    assert compactor.compact("c", force=True).accepted
    return store, compactor


def test_compaction_store_cost_100k_vs_1k(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """8 new turns compacted on a 100k-turn conversation within 2x of the same on 1k turns:
    the store's work follows the new turns, not the ledger (summarizer excluded)."""
    big_n = 100_000 if full_size(request.config) else 4_000
    big, big_compactor = _summarised(tmp_path / "big.db", big_n)
    small, small_compactor = _summarised(tmp_path / "small.db", 1_000)
    numbers = count()
    small_times: list[float] = []

    def eight_new(store: lf.SQLiteStore) -> None:
        n = next(numbers)
        store.append_many("c", [{"role": "user", "body": f"new turn {n}.{i}"} for i in range(8)])

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        eight_new(small)  # the anchor, timed in turn with ours
        start = time.perf_counter()
        assert small_compactor.compact("c").accepted
        small_times.append(time.perf_counter() - start)
        eight_new(big)
        return (), {}

    def compact_big() -> None:
        assert big_compactor.compact("c").accepted

    benchmark.pedantic(compact_big, setup=setup, rounds=15 if full_size(request.config) else 2)
    big.close()
    small.close()
    record_ratio(benchmark, "compaction_1k_turns", statistics.median(small_times))
    benchmark.extra_info["turns"] = big_n
    target(benchmark, "compaction_1k_turns", max_ratio=2.0)


def _raw_insert_seconds(path: Path, synchronous: str, bodies: list[str]) -> list[float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(
        "CREATE TABLE turns (conversation_id TEXT, id TEXT, sequence INTEGER, role TEXT,"
        " body TEXT, digest BLOB, UNIQUE (conversation_id, id), UNIQUE (conversation_id,"
        " sequence))"
    )
    times = []
    for sequence, body in enumerate(bodies, start=1):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?)",
            ("c", f"t{sequence}", sequence, "user", body, bytes(32)),
        )
        conn.execute("COMMIT")
        times.append(time.perf_counter() - start)
    conn.close()
    return times


def _percentile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_append_latency(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path, durability: str
) -> None:
    n = 400 if full_size(request.config) else 20
    source = exchanges()
    bodies = [next(source)[0] for _ in range(n)]
    store = lf.SQLiteStore(tmp_path / "append.db", durability=durability)
    times: list[float] = []
    bodies_left = iter(bodies * 1000)

    def append_one() -> None:
        start = time.perf_counter()
        store.append("c", "user", next(bodies_left))
        times.append(time.perf_counter() - start)

    benchmark.pedantic(append_one, rounds=n)
    store.close()
    raw = _raw_insert_seconds(tmp_path / "raw.db", durability.upper(), bodies)
    record_ratio(benchmark, "raw_insert", statistics.median(raw))
    benchmark.extra_info.update(
        p50_s=_percentile(times, 0.5),
        p99_s=_percentile(times, 0.99),
        raw_p50_s=_percentile(raw, 0.5),
        raw_p99_s=_percentile(raw, 0.99),
    )
