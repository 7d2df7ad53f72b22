"""SQLite VM steps (in hundreds, `set_progress_handler`) and wall time of each write and
read path of `SQLiteStore` on one conversation of real transcript turns (tool calls and
results as the transcripts have them, every transcript appended again with its IDs
suffixed), compacted to a summary and a tail, at two ledger sizes. A path whose steps grow
with the ledger where its new work does not is a cost defect (docs/performance.md, "Cost
that follows the new work").

    .venv/bin/python benches/steps_by_ledger_size.py 1000 100000
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold._transcripts import load_transcripts

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "transcripts"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
KEEP_TAIL = 40


def _turns(count: int) -> list[dict[str, Any]]:
    """`count` turns of the transcripts, in order, again and again with suffixed IDs."""
    folder = SHARED if SHARED.is_dir() else DATA
    transcripts = [t for path in sorted(folder.glob("*.jsonl")) for t in load_transcripts(path)]
    out: list[dict[str, Any]] = []
    copy = 0
    while len(out) < count:
        for transcript in transcripts:
            for turn in transcript.turns:
                row: dict[str, Any] = {"role": turn.role, "body": turn.body}
                row["id"] = f"{turn.id}~{copy}"
                if turn.meta and "tool_calls" in turn.meta:
                    calls = json.loads(turn.meta["tool_calls"])
                    for call in calls:
                        call["id"] = f"{call['id']}~{copy}"
                    row["meta"] = {"tool_calls": json.dumps(calls)}
                elif turn.meta and "tool_call_id" in turn.meta:
                    row["meta"] = {"tool_call_id": f"{turn.meta['tool_call_id']}~{copy}"}
                out.append(row)
                if len(out) == count:
                    return out
        copy += 1
    return out


def _call(call_id: str) -> dict[str, str]:
    return {
        "tool_calls": json.dumps(
            [{"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]
        )
    }


def _answer(call_id: str) -> dict[str, str]:
    return {"tool_call_id": call_id}


def _summarise(_request: object) -> str:
    return "a short summary"


def measure(count: int, folder: Path) -> dict[str, tuple[int, float]]:
    """Steps and milliseconds of each path at a ledger of `count` turns."""
    store = lf.SQLiteStore(folder / f"steps{count}.db", durability="normal")
    turns = _turns(count)
    for start in range(0, len(turns), 5000):
        store.append_many("c", turns[start : start + 5000])
    policy = lf.CompactionPolicy("v1", keep_tail=KEEP_TAIL, max_input_tokens=10**9)
    compactor = lf.Compactor(store, policy, _summarise)
    compactor.compact("c")
    found: dict[str, tuple[int, float]] = {}

    def run(name: str, work: Callable[[], object]) -> None:
        store._contexts.clear()  # a read not served from the context cache
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        store._connection().set_progress_handler(step, 100)
        began = time.perf_counter()
        try:
            work()
        finally:
            elapsed = time.perf_counter() - began
            store._connection().set_progress_handler(None, 0)
        found[name] = (steps[0], round(elapsed * 1000, 1))

    summary = store.current_summary("c")
    assert summary is not None
    covered = set(summary.source_ids)
    ledger = store.load("c").turns
    tail_user = [t for t in ledger if t.id not in covered and t.role == "user"][-1]
    covered_user = [t for t in ledger if t.id in covered and t.role == "user"]
    middle = covered_user[len(covered_user) // 2]
    run("context", lambda: store.context("c", "v1"))
    run("append (plain)", lambda: store.append("c", "user", "hello"))
    run("append (a call)", lambda: store.append("c", "assistant", "", meta=_call("new1")))
    run(
        "append (its result)", lambda: store.append("c", "tool", "r", meta={"tool_call_id": "new1"})
    )
    run("append (a unique call)", lambda: store.append("c", "assistant", "", meta=_call("one")))
    run(
        "append (its result, 2)",
        lambda: store.append("c", "tool", "r", meta={"tool_call_id": "one"}),
    )
    one = store.load("c").turns[-2]
    run("edit (a raw tail turn)", lambda: store.edit("c", tail_user.id, body=tail_user.body + "."))
    run("edit (a covered turn)", lambda: store.edit("c", middle.id, body=middle.body + "."))
    run("edit (remove a unique call ID)", lambda: store.edit("c", one.id, meta={}))
    run("compact (rebuild after the edit)", lambda: compactor.compact("c"))
    for n in range(3):
        store.append("c", "user", f"more {n}")
    run("compact (extend)", lambda: compactor.compact("c"))
    roles = ("system",)
    begin = store.begin_compaction
    run("begin_compaction (nothing new)", lambda: begin("c", KEEP_TAIL, "v1", preserve_roles=roles))
    users = [t for t in store.load("c").turns if t.role == "user"]
    run("retract (raw turn)", lambda: store.retract("c", users[-1].id))
    run("retract (raw turn, erase)", lambda: store.retract("c", users[-2].id, erase=True))
    run("context (after)", lambda: store.context("c", "v1"))
    run("search", lambda: store.search("c", "error file"))
    run("stats(conversation_id)", lambda: store.stats("c"))
    store.close()
    return found


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        results = {size: measure(size, Path(folder)) for size in sizes}
    print(f"{'path':34s}" + "".join(f"{size:>22,d}" for size in sizes))
    for name in results[sizes[0]]:
        cells = "".join(f"{results[s][name][0]:>12d} {results[s][name][1]:>7.1f} ms" for s in sizes)
        print(f"{name:34s}{cells}")


if __name__ == "__main__":
    main([int(arg) for arg in sys.argv[1:]] or [1000, 100000])
