"""Cost under edits (SPEC §17.5, issue 28 item 5): summarizer input per appended token in the
agent session of `bench_agent_loop.py` (real transcript exchanges, trigger 4,000 tokens) with
an edit of a covered turn every 100 exchanges, in one run:

- ``recent``: the edited turn drawn from the newest 10% of the covered turns (a correction
  of something recent, the common case) — target ≤ 2× the appended tokens;
- ``uniform``: drawn uniformly from every covered turn — reported (a rebuild re-reads
  everything after the edit, so about 6× is this design's floor);
- ``uniform, no checkpoints`` (anchor, same run: `keep_checkpoints=0`, every edit a rebase,
  as before checkpoints).

Each way runs over a few seeds (which turns are edited); extra_info has the median and the
spread. Smoke-sized (300 exchanges, one seed) in the normal test run; 1,000 exchanges and
three seeds under `make bench`.
"""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from bench_conftest import full_size, target

import ledgerfold as lf
from bench_agent_loop import CountingSummarizer, exchanges
from ledgerfold.tokens import approx_tokens

PV = "bench-edit"
EDIT_EVERY = 100


def _session(path: Path, n_exchanges: int, way: str, seed: int) -> dict[str, Any]:
    """One session; returns the summarizer's input per appended token and the counts."""
    rng = random.Random(seed)
    checkpoints = 0 if way == "uniform-no-checkpoints" else 8
    policy = lf.CompactionPolicy(
        PV, keep_tail=6, trigger_tokens=4_000, keep_checkpoints=checkpoints
    )
    summarizer = CountingSummarizer()
    appended = edits = rebases = 0
    with lf.SQLiteStore(path, durability="normal") as store:
        compactor = lf.Compactor(store, policy, summarizer)
        source = exchanges()
        for index in range(n_exchanges):
            user, assistant = next(source)
            for role, body in (("user", user), ("assistant", assistant)):
                store.append("c", role, body, id=f"t{2 * index}{role[0]}")
                appended += approx_tokens(body)
            if index % EDIT_EVERY == EDIT_EVERY - 1:
                summary = store.current_summary("c")
                if summary is not None:
                    covered = summary.source_ids
                    pool = covered[-max(1, len(covered) // 10) :] if way == "recent" else covered
                    victim = rng.choice(pool)
                    (turn,) = store.get_turns("c", [victim])
                    body = turn.body
                    store.edit("c", victim, body=body + " [corrected]")
                    edits += 1
            result = compactor.compact("c")
            if result.accepted and result.summary is not None and result.summary.parent_id is None:
                rebases += 1
    return {
        "ratio": summarizer.input_tokens / appended,
        "edits": edits,
        "rebases": rebases,
        "calls": summarizer.calls,
    }


WAYS = ("recent", "uniform", "uniform-no-checkpoints")


def test_edit_cost(benchmark: Any, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    full = full_size(request.config)
    n_exchanges = 1_000 if full else 300
    seeds = (1, 2, 3) if full else (1,)
    runs: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}

    def all_ways() -> None:
        for seed in seeds:
            for way in WAYS:  # interleaved, so load on the machine hits every way alike
                path = tmp_path / f"{way}-{seed}-{len(runs[way])}.db"
                runs[way].append(_session(path, n_exchanges, way, seed))

    benchmark.pedantic(all_ways, rounds=1)
    extra = benchmark.extra_info
    extra.update(exchanges=n_exchanges, seeds=len(seeds), edit_every=EDIT_EVERY)
    for way in WAYS:
        ratios = [run["ratio"] for run in runs[way]]
        key = way.replace("-", "_")
        extra[f"{key}_input_per_appended_token"] = round(statistics.median(ratios), 3)
        extra[f"{key}_input_per_appended_token_min"] = round(min(ratios), 3)
        extra[f"{key}_input_per_appended_token_max"] = round(max(ratios), 3)
        extra[f"{key}_rebases"] = [run["rebases"] for run in runs[way]]
        extra[f"{key}_edits"] = [run["edits"] for run in runs[way]]
    target(benchmark, "recent_input_per_appended_token", max_value=2.0)
    assert all(run["edits"] > 0 for way in WAYS for run in runs[way])
