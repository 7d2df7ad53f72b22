"""The agent loop (SPEC §15): what one agent session costs, per compaction and per
append. Smoke-sized in the normal test run; full size under `make bench`.

- Agent session: real transcript bodies, one user/assistant exchange at a time through
  `Compactor` (trigger 4,000 tokens) with a token-counting summarizer: summarizer input
  tokens / tokens appended (anchor, same session: what v1 would have sent for the same
  compactions, every covered turn plus the previous summary each time), the largest request,
  the number of compactions and the database size. Anchor, same run: LangChain v1's
  `SummarizationMiddleware` in `create_agent` over the same exchanges with the same
  summarizer and bound (`langchain_session.py`): its summarizer input, largest request and
  summarisations. Facts planted in every 25th user turn are counted in what the model is
  sent after every exchange (ours: summary + raw tail; LangChain's: its summary + kept
  messages) and in what is kept afterwards (our ledger; LangChain's agent state).
- Per-compaction store cost: a compaction of 8 new turns on a 100k-turn conversation vs on a
  1k-turn one, and on a 1M-turn one (short synthetic bodies) vs 1k (a trivial summarizer,
  so the store's work is what is timed), in turn.
- Append latency: single `append` with durability "full" and "normal", each vs a raw
  `sqlite3` INSERT with the same pragmas (p50/p99 in extra_info).
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from bench_conftest import full_size, iter_transcript_turns, record_ratio, target

import langchain_session
import ledgerfold as lf
from ledgerfold import ExtractiveSummarizer
from ledgerfold.tokens import approx_tokens
from ledgerfold.tools import run_recall
from recall_facts import FACTS

PV = "bench-loop"


#: A fact is planted in the user turn of every FACT_EVERY-th exchange, from the first.
FACT_EVERY = 25


def fact(k: int) -> str:
    """The k-th planted fact (`recall_facts.FACTS`: constraints, to-dos, refusals with their
    evidence and Chinese facts, interleaved), a sentence of its own."""
    return FACTS[k % len(FACTS)].text


def fact_turn_id(k: int) -> str:
    """The ID of the user turn the k-th fact is planted in."""
    return f"t{2 * k * FACT_EVERY}u"


def facts_planted(exchanges_done: int) -> list[str]:
    return [fact(k) for k in range((exchanges_done + FACT_EVERY - 1) // FACT_EVERY)]


def facts_in(text: str, planted: list[str]) -> int:
    return sum(1 for planted_fact in planted if planted_fact in text)


def exchanges() -> Iterator[tuple[str, str]]:
    """(user body, assistant body) pairs from the real transcripts, in order, repeated; every
    FACT_EVERY-th user body starts with a planted fact (its first sentence, so the extractive
    summarizer's line for the turn carries it)."""
    turns = [t for t in iter_transcript_turns() if t["role"] in ("user", "assistant")]
    users = [t["body"] for t in turns if t["role"] == "user" and t["body"].strip()]
    assistants = [t["body"] for t in turns if t["role"] == "assistant" and t["body"].strip()]
    for n in count():
        user = users[n % len(users)]
        if n % FACT_EVERY == 0:
            user = f"{fact(n // FACT_EVERY)}\n{user}"
        yield user, assistants[n % len(assistants)]


def checkpoints(n_exchanges: int) -> set[int]:
    """The exchanges (0-based) whose fact counts extra_info lists (eight, evenly spaced)."""
    return {n_exchanges * step // 8 - 1 for step in range(1, 9)}


def turn_ids(items: Any) -> set[str]:
    return {item.id for item in items if isinstance(item, lf.TurnItem)}


class CountingSummarizer:
    """The built-in extractive summarizer, counting what it is given."""

    def __init__(self) -> None:
        self.inner = ExtractiveSummarizer()
        self.input_tokens = 0
        self.largest_request = 0  # turn text only: what max_input_tokens bounds
        self.largest_with_summary = 0  # the previous summary too, as LangChain's is counted
        self.calls = 0
        self.seen: set[str] = set()  # IDs of the turns it was given

    def __call__(self, request: lf.SummaryRequest) -> str:
        tokens = sum(approx_tokens(turn.text) for turn in request.turns)
        with_summary = tokens + approx_tokens(request.previous_summary or "")
        self.input_tokens += with_summary
        self.largest_request = max(self.largest_request, tokens)
        self.largest_with_summary = max(self.largest_with_summary, with_summary)
        self.seen.update(turn.id for turn in request.turns)
        self.calls += 1
        return self.inner(request)


def test_agent_session(benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    n_exchanges = 2_000 if full_size(request.config) else 150
    policy = lf.CompactionPolicy(PV, keep_tail=6, trigger_tokens=4_000)
    marks = checkpoints(n_exchanges)
    outcome: dict[str, Any] = {}

    def session() -> None:
        path = tmp_path / f"session-{len(outcome)}.db"
        summarizer = CountingSummarizer()
        appended_tokens = appended_bytes = 0
        v1_input = 0  # what v1 would have sent: every covered turn + the previous summary
        tokens_of: dict[str, int] = {}
        facts_seen = []  # facts in the context (summary + raw tail) after each exchange
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
                context = compactor.context("c")
                sent = "\n".join(item.text for item in context.items)
                facts_seen.append(facts_in(sent, facts_planted(index + 1)))
        store_bytes = sum(
            os.path.getsize(f"{path}{suffix}")
            for suffix in ("", "-wal")
            if os.path.exists(f"{path}{suffix}")
        )
        outcome.update(
            path=path,
            summarizer=summarizer,
            appended_tokens=appended_tokens,
            appended_bytes=appended_bytes,
            v1_input=v1_input,
            store_bytes=store_bytes,
            facts_seen=facts_seen,
            unread=2 * n_exchanges - len(summarizer.seen | turn_ids(context.items)),
        )

    benchmark.pedantic(session, rounds=1)
    summarizer: CountingSummarizer = outcome["summarizer"]
    planted = facts_planted(n_exchanges)
    with lf.SQLiteStore(outcome["path"]) as store:
        ledger = "\n".join(turn.body for turn in store.load("c").turns)
        recall = _recall_reachability(store, policy, len(planted))
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
        largest_request_with_summary_tokens=summarizer.largest_with_summary,
        compactions=summarizer.calls,
        compaction_bound=turns // policy.min_new_turns,
        store_bytes=outcome["store_bytes"],
        store_bound_bytes=2 * outcome["appended_bytes"] + 2**20,
        facts_planted=len(planted),
        facts_planted_by_checkpoint=[len(facts_planted(index + 1)) for index in sorted(marks)],
        facts_in_context_by_checkpoint=[outcome["facts_seen"][index] for index in sorted(marks)],
        facts_in_context_mean=round(statistics.mean(outcome["facts_seen"]), 3),
        facts_in_context=outcome["facts_seen"][-1],
        facts_in_ledger=facts_in(ledger, planted),
        turns_never_summarised=outcome["unread"],  # neither given to the summarizer nor sent
    )
    extra.update(_langchain_anchor(benchmark, n_exchanges, policy, marks))
    extra.update(recall)
    target(benchmark, "facts_unreachable_share", max_value=0.05)
    target(benchmark, "erased_facts_found", max_value=0)
    target(benchmark, "input_per_appended_token", max_value=1.5)
    target(benchmark, "largest_request_tokens", max_value=policy.max_input_tokens)
    target(benchmark, "compactions", max_value=turns // policy.min_new_turns)
    target(benchmark, "store_bytes", max_value=2 * outcome["appended_bytes"] + 2**20)
    assert summarizer.largest_request <= policy.max_input_tokens
    assert summarizer.calls <= turns // policy.min_new_turns
    assert extra["facts_in_ledger"] == len(planted)  # the raw ledger keeps every turn
    assert extra["turns_never_summarised"] == 0  # each turn is summarised before it leaves
    assert extra["erased_facts_found"] == 0  # erased text is never returned


def _recall_reachability(
    store: lf.SQLiteStore, policy: lf.CompactionPolicy, n_planted: int
) -> dict[str, Any]:
    """SPEC §16.4: a planted fact is reachable when its turn is in the context or among the
    hits of one `recall_history` call whose query is the fact's question (worded differently,
    sharing only key terms). Then four facts are erased and asked for again: none may come
    back."""
    context_ids = turn_ids(store.context("c", policy.version).items)
    in_context = reachable = 0
    by_kind: dict[str, list[int]] = {}
    for k in range(n_planted):
        turn_id = fact_turn_id(k)
        hits = json.loads(run_recall(store, "c", {"query": FACTS[k].question}))["hits"]
        found = turn_id in context_ids or any(hit["turn_id"] == turn_id for hit in hits)
        in_context += turn_id in context_ids
        reachable += found
        by_kind.setdefault(FACTS[k].kind, [0, 0])
        by_kind[FACTS[k].kind][0] += found
        by_kind[FACTS[k].kind][1] += 1
    erased = list(range(0, n_planted, max(1, n_planted // 4)))[:4]
    for k in erased:
        store.retract("c", fact_turn_id(k), erase=True)
    erased_found = 0
    for k in erased:
        result = run_recall(store, "c", {"query": FACTS[k].question, "limit": 20})
        erased_found += FACTS[k].answer in result or fact_turn_id(k) in result
    return {
        "facts_reachable_with_recall": reachable,
        "facts_reachable_context_only": in_context,
        "facts_unreachable_share": round(1 - reachable / n_planted, 4) if n_planted else 0.0,
        "facts_reachable_by_kind": {kind: f"{a}/{b}" for kind, (a, b) in by_kind.items()},
        "erased_facts_asked": len(erased),
        "erased_facts_found": erased_found,
    }


def _langchain_anchor(
    benchmark: Any, n_exchanges: int, policy: lf.CompactionPolicy, marks: set[int]
) -> dict[str, Any]:
    """The same exchanges through LangChain v1's `SummarizationMiddleware` (see
    `langchain_session.py`): a comparable trigger (tokens of the whole input, the same
    counter) and keep (the last `keep_tail` messages), the same summarizer and bound."""
    reason = langchain_session.unavailable()
    if reason is not None:
        warnings.warn(f"agent session: LangChain anchor skipped: {reason}", stacklevel=2)
        return {"langchain_anchor": f"skipped: {reason}"}
    assert policy.trigger_tokens is not None
    session = langchain_session.LangChainSession(
        trigger_tokens=policy.trigger_tokens,
        keep_messages=policy.keep_tail,
        max_summary_tokens=policy.max_summary_tokens,
    )
    source = exchanges()
    facts_seen = []  # facts in what the agent's model was sent, each exchange
    start = time.perf_counter()
    for index in range(n_exchanges):
        user, assistant = next(source)
        sent = session.exchange(2 * index + 1, user, assistant)
        facts_seen.append(facts_in(sent, facts_planted(index + 1)))
    record_ratio(benchmark, "langchain_session", time.perf_counter() - start)
    summarizer = session.summarizer
    assert summarizer.calls > 0  # else the anchor measured nothing
    ours = benchmark.extra_info
    return {
        "langchain_summarizer_input_tokens": summarizer.input_tokens,
        "langchain_input_per_appended_token": round(
            summarizer.input_tokens / ours["appended_tokens"], 3
        ),
        "input_tokens_vs_langchain": round(
            ours["summarizer_input_tokens"] / summarizer.input_tokens, 3
        ),
        "langchain_largest_request_tokens": summarizer.largest_request,
        "langchain_summarisations": summarizer.calls,
        "langchain_facts_in_model_input_by_checkpoint": [facts_seen[i] for i in sorted(marks)],
        "langchain_facts_in_model_input_mean": round(statistics.mean(facts_seen), 3),
        "langchain_facts_in_model_input": facts_seen[-1],
        "langchain_facts_in_state": facts_in(session.state_text(), facts_planted(n_exchanges)),
        # Trimmed away before its summarizer call (trim_tokens_to_summarize) and not kept.
        "langchain_turns_never_summarised": 2 * n_exchanges
        - len(summarizer.seen | session.turn_ids()),
    }


def short_exchanges() -> Iterator[tuple[str, str]]:
    """Short synthetic exchanges: a 1M-turn ledger of real bodies would be gigabytes, and the
    covered turns' bodies are not what a compaction of 8 new turns reads."""
    for n in count():
        yield f"user turn {n}: a short question.", f"assistant turn {n}: a short answer."


def _summarised(
    path: Path, turns: int, source: Iterator[tuple[str, str]] | None = None
) -> tuple[lf.SQLiteStore, lf.Compactor]:
    store = lf.SQLiteStore(path, durability="normal")
    source = exchanges() if source is None else source
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


def _store_cost(
    benchmark: Any,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    big_n: int,
    source: Callable[[], Iterator[tuple[str, str]]] = exchanges,
) -> None:
    """One compaction of 8 new turns on `big_n` turns, timed by the benchmark; the same on
    1k turns timed in turn before each round (the anchor)."""
    big, big_compactor = _summarised(tmp_path / "big.db", big_n, source())
    small, small_compactor = _summarised(tmp_path / "small.db", 1_000, source())
    numbers = count()
    small_times: list[float] = []

    def eight_new(store: lf.SQLiteStore) -> None:
        n = next(numbers)
        store.append_many("c", [{"role": "user", "body": f"new turn {n}.{i}"} for i in range(8)])

    # CPU time of this thread as well: it leaves out the time other processes on a shared
    # machine take the core, which wall-clock medians do not.
    small_cpu: list[float] = []
    big_cpu: list[float] = []

    def setup() -> tuple[tuple[()], dict[str, Any]]:
        eight_new(small)  # the anchor, timed in turn with ours
        start, start_cpu = time.perf_counter(), time.thread_time()
        assert small_compactor.compact("c").accepted
        small_times.append(time.perf_counter() - start)
        small_cpu.append(time.thread_time() - start_cpu)
        eight_new(big)
        return (), {}

    def compact_big() -> None:
        start_cpu = time.thread_time()
        assert big_compactor.compact("c").accepted
        big_cpu.append(time.thread_time() - start_cpu)

    # The first extension after the setup's rebase reads the covered IDs back once.
    setup()
    compact_big()
    small_times.clear()
    small_cpu.clear()
    big_cpu.clear()
    # Many rounds: each takes milliseconds, and the shared machine's noise is large.
    benchmark.pedantic(compact_big, setup=setup, rounds=41 if full_size(request.config) else 2)
    big.close()
    small.close()
    record_ratio(benchmark, "compaction_1k_turns", statistics.median(small_times))
    benchmark.extra_info["turns"] = big_n
    # The fastest rounds of both, less disturbed by other processes than the medians.
    stats = getattr(benchmark, "stats", None)  # None when benchmarks are disabled
    if stats is not None:
        benchmark.extra_info["min_s"] = stats.stats.min
    benchmark.extra_info["compaction_1k_turns_min_s"] = min(small_times)
    benchmark.extra_info["cpu_s"] = statistics.median(big_cpu)
    benchmark.extra_info["compaction_1k_turns_cpu_s"] = statistics.median(small_cpu)
    benchmark.extra_info["cpu_ratio"] = round(
        statistics.median(big_cpu) / max(statistics.median(small_cpu), 1e-9), 2
    )


def test_compaction_store_cost_100k_vs_1k(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """8 new turns compacted on a 100k-turn conversation within 1.5x of the same on 1k turns:
    the store's work follows the new turns, not the ledger (summarizer excluded)."""
    big_n = 100_000 if full_size(request.config) else 4_000
    _store_cost(benchmark, request, tmp_path, big_n)
    target(benchmark, "compaction_1k_turns", max_ratio=1.5)


def test_compaction_store_cost_1m_vs_1k(
    benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The same at 1M turns, within 2x of 1k turns (short synthetic bodies on both sides:
    setup takes minutes, not the gigabytes of a real 1M-turn ledger)."""
    big_n = 1_000_000 if full_size(request.config) else 4_000
    _store_cost(benchmark, request, tmp_path, big_n, short_exchanges)
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
