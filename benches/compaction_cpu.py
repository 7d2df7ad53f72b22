"""Thread CPU of the deferred compaction's parts, as `sessions_pooled.py`'s sessions make
them due (#28; docs/performance.md, "The deferred compaction's CPU").

    .venv/bin/python benches/compaction_cpu.py [ROUNDS] [RUNS]

20 `LedgerfoldSession`s on one `SQLiteStore`, ROUNDS (600) rounds of two real transcript
bodies, one session a round; after each batch of appends, the compactions made due run
(`Compactor._plan_and_end`, the built-in summarizer) in a batch of their own, as the store's
worker runs them. Prints the median thread CPU (µs) of `_begin` (due check and plan), the
built-in summarizer, `_finish` (the end: commit, pruning), the commit itself and its two
paths (`_extending`: a rolling extension; `_general`: checked on the whole ledger) over
RUNS (6) runs after a warm-up run. Alternate old and new code in separate processes: the
machine drifts."""

from __future__ import annotations

import collections
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sessions_pooled
from ledgerfold import SQLiteStore
from ledgerfold import _compactor as compactor
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from ledgerfold.store import _commit as commit
from ledgerfold.store import _sqlite as sqlite
from ledgerfold.summarizers import _extractive as extractive

TIMES: dict[str, list[float]] = collections.defaultdict(list)


def _timed(owner: Any, name: str, label: str) -> None:
    real: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            TIMES[label].append(time.thread_time() - start)

    setattr(owner, name, timed)


def run(items: list[list[dict[str, str]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "s.db")
        sessions = [LedgerfoldSession(f"s{n}", store=store) for n in range(20)]
        for first in range(0, len(items), 20):
            due = []
            with store._worker_batch():
                for index in range(first, min(first + 20, len(items))):
                    session = sessions[index % 20]
                    session._append(items[index])
                    if session.compactor._trigger_reached(session.session_id):
                        due.append(session)
            with store._worker_batch():
                for session in due:
                    job = session.compactor
                    job._plan_and_end(session.session_id, False, job._in_job_summarizer())
        store.close()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    bodies = sessions_pooled._bench_module()._bodies()
    items = [
        [{"role": "user", "content": next(bodies)}, {"role": "assistant", "content": next(bodies)}]
        for _ in range(rounds)
    ]
    _timed(compactor.Compactor, "_begin", "begin")
    _timed(extractive.ExtractiveSummarizer, "__call__", "summarize")
    _timed(compactor.Compactor, "_finish", "finish")
    _timed(sqlite.SQLiteStore, "commit_summary", "commit_summary")
    _timed(commit, "_extending", "extending")
    _timed(commit, "_general", "general")
    run(items)  # warm-up
    TIMES.clear()
    for _ in range(runs):
        run(items)
    print({label: round(statistics.median(values) * 1e6) for label, values in TIMES.items()})


if __name__ == "__main__":
    main()
