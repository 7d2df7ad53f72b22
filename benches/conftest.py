"""Ledgers for the benchmarks, built from the real transcripts in shared/data.

Under the normal test run (`--benchmark-disable`) every benchmark runs once as a smoke
test on a small ledger; under `make bench` the ledgers have their full sizes.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import Turn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

SHARED = Path(os.environ.get("LEDGERFOLD_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def iter_transcript_turns() -> Iterator[dict[str, Any]]:
    for path in sorted((SHARED / "data").glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:  # never str.splitlines(): bodies contain U+2028
                if line.strip():
                    yield from json.loads(line)["turns"]


def real_turns(count: int) -> list[Turn]:
    """`count` turns with real bodies and role mix, repeated with unique IDs and sequences."""
    source = list(iter_transcript_turns())
    turns = []
    for n in range(count):
        raw = source[n % len(source)]
        turns.append(Turn(f"{raw['id']}#{n // len(source)}", n + 1, raw["role"], raw["body"]))
    return turns


def full_size(config: pytest.Config) -> bool:
    # `make bench` passes --benchmark-enable over the default --benchmark-disable.
    return bool(config.getoption("benchmark_enable")) or not config.getoption("benchmark_disable")


@pytest.fixture(scope="session")
def ledger_size(request: pytest.FixtureRequest) -> int:
    return 200_000 if full_size(request.config) else 2_000


@pytest.fixture(scope="session")
def ledger(ledger_size: int) -> list[Turn]:
    return real_turns(ledger_size)


def median_seconds(function: Callable[[], object], *, rounds: int) -> float:
    """Median wall time of `function` over `rounds` calls (the anchors' measurement)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def record_ratio(benchmark: Any, anchor_name: str, anchor_seconds: float) -> None:
    """Store the anchor's median and the speed-up over it beside the benchmark's own stats."""
    stats = getattr(benchmark, "stats", None)
    ours = stats.stats.median if stats is not None else None
    benchmark.extra_info[f"{anchor_name}_median_s"] = anchor_seconds
    if ours:
        benchmark.extra_info[f"speedup_vs_{anchor_name}"] = round(anchor_seconds / ours, 2)
