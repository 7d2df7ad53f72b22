"""Ledgers for the benchmarks, built from the real transcripts in tests/data/transcripts.

Under the normal test run (`--benchmark-disable`) every benchmark runs once as a smoke
test on a small ledger; under `make bench` the ledgers have their full sizes.

Every benchmark records its anchors (measured in the same run) in `extra_info` as
`<anchor>_median_s`, and its targets as `extra_info["targets"]`; `benches/report.py` turns
the JSON of a run into `benches/RESULTS.md` with the ratios and PASS/MISS per target.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import Turn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
# tests/ has a conftest.py too, and `import conftest` gets whichever pytest loaded last (it
# depends on the order of the command-line paths): the benches import this one by a name
# of its own. pytest has just put this module in sys.modules under `conftest`.
sys.modules["bench_conftest"] = sys.modules[__name__]

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"


def _units_by_union_find(ordered: Any) -> list[frozenset[str]]:
    """`reference.units` (SPEC §17.2's compaction units) in linear time: the same partition
    as the test oracle's brute force, which compares every pair of turns and would not end at
    200k turns. Only the pure-Python anchors call it; it makes them faster, never ours."""
    import reference

    parent = {turn.id: turn.id for turn in ordered}

    def find(turn_id: str) -> str:
        while parent[turn_id] != turn_id:
            parent[turn_id] = parent[parent[turn_id]]
            turn_id = parent[turn_id]
        return turn_id

    def union(a: str, b: str) -> None:
        parent[find(b)] = find(a)

    first_of_group: dict[str, str] = {}
    callers: dict[str, list[str]] = {}
    for turn in ordered:
        if turn.group is not None:
            union(first_of_group.setdefault(turn.group, turn.id), turn.id)
        for call_id in reference._call_ids(turn):
            callers.setdefault(call_id, []).append(turn.id)
    for turn in ordered:
        call_id = (turn.meta or {}).get("tool_call_id") if turn.role == "tool" else None
        for caller in callers.get(call_id, ()) if call_id is not None else ():
            union(caller, turn.id)
    units: dict[str, set[str]] = {}
    for turn in ordered:
        units.setdefault(find(turn.id), set()).add(turn.id)
    return [frozenset(unit) for unit in units.values()]


def pytest_configure(config: pytest.Config) -> None:
    # Only for a measuring run: the test run (smoke sizes, the same session as tests/)
    # keeps the oracle's own brute force.
    if full_size(config):
        import reference

        reference.units = _units_by_union_find


#: Ledger sizes by label: the labels are the test IDs, so a smoke run and a full run collect
#: the same tests; only the number of turns behind a label changes.
FULL_SIZES = {"10k": 10_000, "200k": 200_000, "1M": 1_000_000}
SMOKE_SIZES = {"10k": 300, "200k": 600, "1M": 1_200}


def iter_transcript_turns() -> Iterator[dict[str, Any]]:
    for path in sorted((SHARED / "transcripts").glob("*.jsonl")):
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


def size_of(config: pytest.Config, label: str) -> int:
    return (FULL_SIZES if full_size(config) else SMOKE_SIZES)[label]


@pytest.fixture(scope="session")
def ledger_size(request: pytest.FixtureRequest) -> int:
    return 200_000 if full_size(request.config) else 2_000


@pytest.fixture(scope="session")
def ledger(ledger_size: int) -> list[Turn]:
    return real_turns(ledger_size)


@pytest.fixture(scope="session", params=list(FULL_SIZES))
def sized_ledger(request: pytest.FixtureRequest) -> list[Turn]:
    """The real-transcript ledger at 10k, 200k and 1M turns (tiny in smoke mode).

    Session-scoped and parametrized: pytest groups the tests by size and drops one ledger
    before it builds the next, so at most one large ledger is alive at a time.
    """
    return real_turns(size_of(request.config, request.param))


def median_seconds(function: Callable[[], object], *, rounds: int) -> float:
    """Median wall time of `function` over `rounds` calls (the anchors' measurement)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def anchor_seconds(
    config: pytest.Config,
    function: Callable[[], object],
    *,
    rounds: int = 5,
    budget_s: float = 15.0,
) -> float:
    """Median wall time of an anchor: once in smoke mode; under `make bench` up to `rounds`
    calls, stopping early once `budget_s` is spent (a 1M-turn reference takes ~20 s a call)."""
    if not full_size(config):
        return median_seconds(function, rounds=1)
    times: list[float] = []
    spent = 0.0
    while len(times) < rounds and (not times or spent + times[-1] <= budget_s):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return statistics.median(times)


def interleaved(
    benchmark: Any,
    config: pytest.Config,
    ours: Callable[[], Any],
    anchors: dict[str, Callable[[], object]],
    *,
    rounds: int,
) -> Any:
    """Time `ours` with pytest-benchmark, `rounds` rounds of one call, and before each round
    one call of every anchor (through pytest-benchmark's `setup` hook, outside our timing);
    record each anchor's median with `record_ratio`. Timed in turn, a drift in the shared
    machine's speed hits both sides of a ratio alike (a block of ours then a block of the
    anchor's does not). One round in smoke mode."""
    times: dict[str, list[float]] = {name: [] for name in anchors}

    def time_the_anchors() -> None:
        for name, anchor in anchors.items():
            start = time.perf_counter()
            anchor()
            times[name].append(time.perf_counter() - start)

    result = benchmark.pedantic(
        ours, setup=time_the_anchors, rounds=rounds if full_size(config) else 1
    )
    for name, samples in times.items():
        record_ratio(benchmark, name, statistics.median(samples))
    return result


def record_ratio(benchmark: Any, anchor_name: str, anchor_seconds: float) -> None:
    """Store the anchor's median and the speed-up over it beside the benchmark's own stats."""
    stats = getattr(benchmark, "stats", None)
    ours = stats.stats.median if stats is not None else None
    benchmark.extra_info[f"{anchor_name}_median_s"] = anchor_seconds
    if ours:
        benchmark.extra_info[f"speedup_vs_{anchor_name}"] = round(anchor_seconds / ours, 2)


def target(
    benchmark: Any,
    anchor: str,
    *,
    min_speedup: float | None = None,
    max_ratio: float | None = None,
    max_value: float | None = None,
) -> None:
    """Declare a target for `benches/report.py` to judge.

    - `min_speedup`: anchor median / our median must be at least this (anchor key
      `<anchor>_median_s` in `extra_info`);
    - `max_ratio`: our median / anchor median must be at most this;
    - `max_value`: `extra_info[anchor]` itself (e.g. a peak RSS in bytes) must be at most this.
    """
    entry: dict[str, Any] = {"anchor": anchor}
    if min_speedup is not None:
        entry["min_speedup"] = min_speedup
    if max_ratio is not None:
        entry["max_ratio"] = max_ratio
    if max_value is not None:
        entry["max_value"] = max_value
    benchmark.extra_info.setdefault("targets", []).append(entry)


#: Targets of benchmarks whose files declare none (bench_store.py records its anchors under
#: its own names): test name -> (anchor key in extra_info, target entry).
_EXTERNAL_TARGETS: dict[str, list[dict[str, Any]]] = {
    # context() on 1M turns within 3x of 10k turns: ours (1M) / anchor (10k) <= 3.
    "test_context_on_a_long_ledger": [{"anchor": "context_10k_turns_s", "max_ratio": 3.0}],
    "test_append_many_throughput": [{"anchor": "raw_executemany_s"}],
    "test_commit_summary_10k_sources": [{"anchor": "raw_executemany_s"}],
}


def pytest_benchmark_update_json(
    config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]
) -> None:
    """Attach the targets above, and the command line, to the saved run."""
    output_json["command"] = " ".join(["pytest", *config.invocation_params.args])
    for bench in output_json.get("benchmarks", []):
        extra = bench.setdefault("extra_info", {})
        if "targets" not in extra and bench.get("name") in _EXTERNAL_TARGETS:
            extra["targets"] = _EXTERNAL_TARGETS[bench["name"]]
