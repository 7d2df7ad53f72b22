"""Where a late tick of `bench_integrations`' 2 ms ticker comes from: the same 20 sessions
on one loop (ours, or the SDK's `SQLiteSession`), with the loop's selector timed. For each
tick it finds the select the loop was in when the tick fell due: a tick that ends with that
select *expiring* waited for the timer (epoll's timeout is whole milliseconds, rounded up:
a select begun 0.1 ms before the tick sleeps 1 ms), one whose select returned an event
(a thread's result) was woken before the rounding mattered.

    .venv/bin/python benches/loop_lag_anatomy.py ours 10
    .venv/bin/python benches/loop_lag_anatomy.py theirs 10

Prints the lag p50/p90/p99, how many ticks ended in an expired select, how many were over
0.95 ms late, and how long past its rounded timeout an expired select returned (the timer's
slack plus the wait for the GIL or a CPU). Figures: docs/performance.md ("What the
ticker's p99 compares").
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import math
import selectors
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sessions_pooled  # noqa: E402

#: `(start, timeout, end, events)` of each select of the loop.
SELECTS: list[tuple[float, float | None, float, int]] = []
#: `(due, ran)` of each tick.
TICKS: list[tuple[float, float]] = []


def _timed_select(real: Any) -> Any:
    def select(self: Any, timeout: float | None = None) -> Any:
        start = time.perf_counter()
        ready = real(self, timeout)
        SELECTS.append((start, timeout, time.perf_counter(), len(ready)))
        return ready

    return select


def _timed_sleep(bench: Any) -> Any:
    real = asyncio.sleep

    async def sleep(delay: float, result: Any = None) -> Any:
        if delay != bench.TICK_S:
            return await real(delay, result)
        start = time.perf_counter()
        await real(delay)
        TICKS.append((start + delay, time.perf_counter()))
        return None

    return sleep


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    side, repeats = sys.argv[1], int(sys.argv[2])
    bench = sessions_pooled._bench_module()
    selector = selectors.DefaultSelector
    selector.select = _timed_select(selector.select)  # type: ignore[method-assign]
    bench.asyncio.sleep = _timed_sleep(bench)
    bodies = bench._bodies()
    drive = bench._theirs if side == "theirs" else bench._ours
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(repeats):
            gc.collect()
            gc.freeze()
            drive(Path(tmp) / f"{run}.db", 30, bodies)
    ends = [end for _, _, end, _ in SELECTS]
    lags, expired, late, over = [], 0, 0, []
    for due, ran in TICKS:
        lags.append(ran - due)
        start, timeout, end, events = SELECTS[bisect.bisect_left(ends, due)]
        if start <= due and events == 0 and timeout:
            expired += 1
            over.append(end - start - math.ceil(timeout * 1e3) * 1e-3)
        late += ran - due > 0.00095
    ms = [round(_percentile(lags, q) * 1e3, 3) for q in (0.5, 0.9, 0.99)]
    print(f"{side}: {len(lags)} ticks, lag p50/p90/p99 {ms} ms")
    share = f"{expired / len(lags):.0%}"
    print(f"  ended in an expired select: {expired} ({share}); over 0.95 ms late: {late}")
    if over:
        spread = [round(_percentile(over, q) * 1e3, 3) for q in (0.5, 0.9, 0.99)]
        print(f"  an expired select's return past its rounded timeout p50/p90/p99: {spread} ms")


if __name__ == "__main__":
    main()
