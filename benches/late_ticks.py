"""What the store worker was doing when a late tick of `bench_integrations`' 2 ms ticker
fell due: the same 20 `LedgerfoldSession`s on one loop, each job and batch of the worker
timed. A tick's deadline falls inside a job (named, with how many event loops the worker
could hand over to then), between two jobs of a batch, in a batch's tail (its commit and
answers, which no pause breaks), or with the worker idle.

    .venv/bin/python benches/late_ticks.py 8          # ticks over 0.95 ms late
    .venv/bin/python benches/late_ticks.py 24 0.002   # over 2 ms

Figures: docs/performance.md ("Timers due during a deferred compaction and a commit").
"""

from __future__ import annotations

import bisect
import collections
import functools
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loop_lag_anatomy as anatomy
import sessions_pooled
from ledgerfold import _worker

#: `(start, end, what, loops)`: each job (`what` its kind and function) and batch.
SPANS: list[tuple[float, float, str, int]] = []


def _instrument() -> None:
    run_batch, next_job = _worker.StoreWorker._run_batch, _worker.StoreWorker._next

    def timed_batch(self: Any) -> None:
        start = time.perf_counter()
        run_batch(self)
        SPANS.append((start, time.perf_counter(), "batch", -1))

    def timed_next(self: Any, after_ok: bool) -> Any:
        job = next_job(self, after_ok)
        if job is None:
            return None
        kind = "deferred" if isinstance(job[0], _worker._BatchStart) else "awaited"
        function = job[2].args[0] if job[2].args else None
        while isinstance(function, functools.partial):
            function = function.func
        name = getattr(function, "__name__", type(function).__name__)
        call = job[2]

        def timed() -> Any:
            start = time.perf_counter()
            try:
                return call()
            finally:
                SPANS.append((start, time.perf_counter(), f"{kind} {name}", len(self._loops)))

        return (job[0], job[1], timed)

    _worker.StoreWorker._run_batch = timed_batch  # type: ignore[method-assign]
    _worker.StoreWorker._next = timed_next  # type: ignore[method-assign]


def _where(due: float, jobs: list[tuple[float, float, str, int]], batches: list[Any]) -> str:
    starts = [span[0] for span in jobs]
    index = bisect.bisect_right(starts, due) - 1
    if index >= 0 and jobs[index][1] >= due:
        return f"in a job: {jobs[index][2]} (loops to hand over to: {jobs[index][3]})"
    batch = bisect.bisect_right([span[0] for span in batches], due) - 1
    if batch < 0 or batches[batch][1] < due:
        return "worker idle"
    following = index + 1 < len(jobs) and jobs[index + 1][0] <= batches[batch][1]
    return "between two jobs of a batch" if following else "a batch's tail (commit, answers)"


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.00095
    bench = sessions_pooled._bench_module()
    bench.asyncio.sleep = anatomy._timed_sleep(bench)
    _instrument()
    bodies = bench._bodies()
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(repeats):
            gc.collect()
            gc.freeze()
            bench._ours(Path(tmp) / f"{run}.db", 30, bodies)
    SPANS.sort()
    jobs = [span for span in SPANS if span[3] >= 0]
    batches = [span for span in SPANS if span[3] < 0]
    late = [due for due, ran in anatomy.TICKS if ran - due > threshold]
    counts = collections.Counter(_where(due, jobs, batches) for due in late)
    print(f"{len(late)} of {len(anatomy.TICKS)} ticks over {threshold * 1e3:.2f} ms late:")
    for where, count in counts.most_common():
        print(f"  {count:4d}  {where}")


if __name__ == "__main__":
    main()
