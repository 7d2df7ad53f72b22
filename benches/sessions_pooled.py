"""Pooled A/B of `bench_integrations`' 20 sessions on one loop: the SDK's `SQLiteSession`
against `LedgerfoldSession`, each side run in turn `REPEATS` times (30 rounds each) and its
samples pooled, so a run's p99 rests on thousands of calls instead of the bench's few
hundred. A side named twice (`theirs,ours,theirsB,oursB`) measures the spread of two runs
of one side (A/A). Sides: `theirs*` (the SDK), `ours*` (as shipped), `inline*` (ours with
the compaction `add_items` makes due run inside its job, as before the deferral).

    .venv/bin/python benches/sessions_pooled.py 20 theirs,ours,theirsB,oursB

Figures and their reading: docs/performance.md ("`add_items` without the compaction it
makes due"). Run it on a quiet machine: the sides alternate, but the ratio of two p99s
taken minutes apart still moves with the load.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _bench_module() -> Any:
    """`bench_integrations`, imported as pytest would (its conftest as `bench_conftest`)."""
    sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]
    spec = importlib.util.spec_from_file_location("bench_conftest_pooled", HERE / "conftest.py")
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = conftest
    spec.loader.exec_module(conftest)
    import bench_integrations

    return bench_integrations


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repeats", type=int, help="runs of each side (20: about 40 s a side)")
    parser.add_argument("sides", nargs="?", default="theirs,ours,inline")
    args = parser.parse_args(argv)
    bench = _bench_module()
    from ledgerfold.integrations import openai_agents

    shipped = openai_agents.LedgerfoldSession.add_items

    async def inline(self: Any, items: list[Any]) -> None:
        if items:
            await self.compactor._acompact(self.session_id, False, lambda: self._append(items))

    sides = args.sides.split(",")
    pools: dict[str, dict[str, list[float]]] = {s: {"lag": [], "add": [], "get": []} for s in sides}
    bodies = bench._bodies()
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeats):
            for side in sides:
                gc.collect()
                gc.freeze()
                path = Path(tmp) / f"{side}{run}.db"
                if side.startswith("theirs"):
                    measured = bench._theirs(path, 30, bodies)
                else:
                    patched = inline if side.startswith("inline") else shipped
                    openai_agents.LedgerfoldSession.add_items = patched  # type: ignore[method-assign]
                    measured = bench._ours(path, 30, bodies)
                for key in ("lag", "add", "get"):
                    pools[side][key] += measured[key]
    openai_agents.LedgerfoldSession.add_items = shipped  # type: ignore[method-assign]
    for side, data in pools.items():
        ms = {
            "lag p99": bench._percentile(data["lag"], 0.99),
            "lag max": max(data["lag"]),
            "add p50": bench._percentile(data["add"], 0.5),
            "add p99": bench._percentile(data["add"], 0.99),
            "get p50": bench._percentile(data["get"], 0.5),
            "get p99": bench._percentile(data["get"], 0.99),
        }
        print(f"{side:8s} " + " | ".join(f"{k} {v * 1e3:6.2f}" for k, v in ms.items()) + " (ms)")


if __name__ == "__main__":
    main()
