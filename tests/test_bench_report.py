"""benches/report.py: targets judged PASS/MISS, ratios and sizes formatted, RESULTS.md written."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPORT = Path(__file__).resolve().parents[1] / "benches" / "report.py"


def load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", REPORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building classes
    spec.loader.exec_module(module)
    return module


report = load_report()


def bench(name: str, median: float, extra: dict[str, Any], suite: str = "bench_core.py") -> dict:
    return {
        "name": name,
        "fullname": f"benches/{suite}::{name}",
        "stats": {"median": median, "min": median, "mean": median},
        "extra_info": extra,
    }


def run(*benchmarks: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine_info": {
            "node": "box",
            "system": "Linux",
            "release": "6.1",
            "python_implementation": "CPython",
            "python_version": "3.11.7",
            "cpu": {"brand_raw": "Test CPU", "count": 2},
        },
        "commit_info": {"id": "0123456789abcdef", "branch": "main", "dirty": True},
        "datetime": "2026-01-01T00:00:00",
        "version": "5.3.1",
        "command": "pytest benches --benchmark-enable --benchmark-only",
        "benchmarks": list(benchmarks),
    }


@pytest.mark.parametrize(
    ("anchor_s", "status"),
    [(0.25, "PASS"), (0.2, "PASS"), (0.19, "MISS")],  # ours 10 ms, target >= 20x
)
def test_min_speedup(anchor_s: float, status: str) -> None:
    extra = {"loop_median_s": anchor_s, "targets": [{"anchor": "loop", "min_speedup": 20}]}
    (row,) = report.rows_of(bench("t", 0.01, extra))
    assert row.status == status
    assert row.ratio == pytest.approx(anchor_s / 0.01)
    assert row.target == "≥ 20.0×"


@pytest.mark.parametrize(("ours", "status"), [(0.03, "PASS"), (0.0301, "MISS")])
def test_max_ratio_uses_ours_over_anchor(ours: float, status: str) -> None:
    # bench_store's anchors carry their own names (no `_median_s` suffix).
    extra = {
        "context_10k_turns_s": 0.01,
        "targets": [{"anchor": "context_10k_turns_s", "max_ratio": 3}],
    }
    (row,) = report.rows_of(bench("t", ours, extra))
    assert row.status == status
    assert row.target == "ours ≤ 3.00× anchor"


@pytest.mark.parametrize(("peak", "status"), [(100, "PASS"), (101, "MISS")])
def test_max_value(peak: int, status: str) -> None:
    extra = {"peak_rss_bytes": peak, "targets": [{"anchor": "peak_rss_bytes", "max_value": 100}]}
    (row,) = report.rows_of(bench("t", 1.0, extra))
    assert (row.status, row.is_value, row.value) == (status, True, peak)


def test_anchor_without_target_reports_the_ratio_only() -> None:
    (row,) = report.rows_of(bench("t", 0.5, {"raw_median_s": 0.25}))
    assert (row.anchor, row.ratio, row.target, row.status) == ("raw", 0.5, "", "")


def test_missing_anchor_or_median_is_not_judged() -> None:
    extra = {"targets": [{"anchor": "loop", "min_speedup": 2}]}
    (row,) = report.rows_of(bench("t", 1.0, extra))
    assert (row.ratio, row.status) == (None, "")
    no_median = bench("t", 0.0, {"loop_median_s": 1.0, "targets": extra["targets"]})
    no_median["stats"] = {}
    assert report.rows_of(no_median)[0].status == ""


@pytest.mark.parametrize(
    ("ratio", "text"),
    [(3753.26, "3,753×"), (23.59, "23.6×"), (1.618, "1.62×"), (0.04, "0.04×"), (None, "n/a")],
)
def test_format_ratio(ratio: float | None, text: str) -> None:
    assert report.format_ratio(ratio) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.000_141_1, "141.1 µs"), (0.0149, "14.9 ms"), (3.17, "3.17 s")]
)
def test_format_seconds(seconds: float, text: str) -> None:
    assert report.format_seconds(seconds) == text


def test_a_near_miss_shows_the_digit_that_misses() -> None:
    extra = {"one_median_s": 1.597, "targets": [{"anchor": "one", "min_speedup": 1.6}]}
    (row,) = report.rows_of(bench("t", 1.0, extra))
    assert (row.status, row.ratio_text()) == ("MISS", "1.597×")
    assert report.format_judged(1.6, 1.6) == "1.60×"
    assert "vs one: 1.597×, target ≥ 1.60×" in report.render(run(bench("t", 1.0, extra)), "x")


def test_a_max_value_is_bytes_only_when_its_key_says_so() -> None:
    extra = {
        "compactions": 157,
        "input_per_appended_token": 1.379,
        "store_bytes": 4_239_360,
        "targets": [
            {"anchor": "compactions", "max_value": 500},
            {"anchor": "input_per_appended_token", "max_value": 1.5},
            {"anchor": "store_bytes", "max_value": 4_274_674},
        ],
    }
    text = report.render(run(bench("test_agent_session", 6.0, extra)), "x")
    assert "| compactions | 157 | — | ≤ 500 | PASS |" in text
    assert "| input_per_appended_token | 1.379 | — | ≤ 1.5 | PASS |" in text
    assert "| store_bytes | 4.0 MiB | — | ≤ 4.1 MiB | PASS |" in text
    extra["compactions"] = 1_234
    missed = report.render(run(bench("test_agent_session", 6.0, extra)), "x")
    assert "- `test_agent_session` vs compactions: 1,234, target ≤ 500" in missed


def test_format_bytes() -> None:
    assert report.format_bytes(524_288_000) == "500.0 MiB"
    assert report.format_bytes(512) == "512 B"


def test_render_tables_summary_and_misses() -> None:
    text = report.render(
        run(
            bench(
                "test_fast[200k]",
                0.01,
                {
                    "turns": 200_000,
                    "loop_median_s": 0.5,
                    "speedup_vs_loop": 50.0,
                    "targets": [{"anchor": "loop", "min_speedup": 20}],
                },
            ),
            bench(
                "test_slow",
                0.1,
                {"reference_median_s": 0.2, "targets": [{"anchor": "reference", "min_speedup": 5}]},
                suite="bench_heavy.py",
            ),
        ),
        ".benchmarks/last.json",
    )
    assert "**Targets: 1 of 2 met.**" in text
    assert "- `test_slow` vs reference: 2.00×, target ≥ 5.00×" in text
    assert "## bench_core.py" in text and "## bench_heavy.py" in text
    assert "| `test_fast[200k]` | 10.0 ms | loop | 500.0 ms | 50.0× | ≥ 20.0× | PASS |" in text
    assert "| **MISS** |" in text
    assert "- `test_fast[200k]`: turns=200,000" in text  # details, without the anchors
    assert "speedup_vs_loop" not in text
    assert "Test CPU, 2 logical cores, Linux 6.1, CPython 3.11.7" in text
    assert "`0123456789ab` on `main`, with uncommitted changes" in text
    assert "`pytest benches --benchmark-enable --benchmark-only`" in text
    assert "python benches/report.py .benchmarks/last.json" in text


def test_main_reads_the_newest_run_and_writes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = tmp_path / ".benchmarks" / "Linux-CPython-3.11-64bit"
    store.mkdir(parents=True)
    old, new = store / "0001_old.json", store / "0002_new.json"
    old.write_text(json.dumps(run(bench("test_old", 1.0, {}))), encoding="utf-8")
    new.write_text(json.dumps(run(bench("test_new", 1.0, {}))), encoding="utf-8")
    os.utime(old, (1, 1))
    assert report.main(["-o", "RESULTS.md"]) == 0
    text = (tmp_path / "RESULTS.md").read_text(encoding="utf-8")
    assert "test_new" in text and "test_old" not in text
    assert "**Targets: 0 of 0 met.**" in text


def test_baseline_drops_per_round_timings(tmp_path: Path) -> None:
    source = run(bench("test_a", 1.0, {"x_median_s": 2.0}))
    source["benchmarks"][0]["stats"]["data"] = [1.0, 1.0, 1.0]
    path = tmp_path / "last.json"
    path.write_text(json.dumps(source), encoding="utf-8")
    baseline = tmp_path / "baseline.json"
    assert report.main([str(path), "-o", str(tmp_path / "R.md"), "--baseline", str(baseline)]) == 0
    saved = json.loads(baseline.read_text(encoding="utf-8"))
    assert "data" not in saved["benchmarks"][0]["stats"]
    del source["benchmarks"][0]["stats"]["data"]
    assert saved["benchmarks"][0]["stats"] == source["benchmarks"][0]["stats"]
    assert saved["machine_info"] == source["machine_info"]


def test_main_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_later_run_replaces_the_same_suite_and_each_suite_names_its_run(
    tmp_path: Path,
) -> None:
    full = run(
        bench("test_core", 1.0, {}),
        bench("test_old_session", 1.0, {}, suite="bench_agent_loop.py"),
    )
    later = run(bench("test_session", 2.0, {}, suite="bench_agent_loop.py"))
    later["command"] = "pytest benches/bench_agent_loop.py --benchmark-enable"
    later["datetime"] = "2026-02-02T00:00:00"
    paths = [tmp_path / "full.json", tmp_path / "loop.json"]
    for path, content in zip(paths, (full, later), strict=True):
        path.write_text(json.dumps(content), encoding="utf-8")
    out = tmp_path / "R.md"
    assert report.main([*map(str, paths), "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "test_core" in text and "test_session" in text
    assert "test_old_session" not in text  # the whole suite came from the later run
    assert f"python benches/report.py {paths[0]} {paths[1]}" in text
    assert "Run 1:" in text and "Run 2:" in text
    assert "`pytest benches/bench_agent_loop.py --benchmark-enable`" in text
    assert "- When: 2026-02-02T00:00:00" in text
    core, loop = text.index("## bench_core.py"), text.index("## bench_agent_loop.py")
    assert text.index("From run 1.", core) < text.index("| `test_core`")
    assert text.index("From run 2.", loop) < text.index("| `test_session`")


def test_a_run_that_gives_no_suite_is_not_listed() -> None:
    first = run(bench("test_a", 1.0, {}, suite="bench_agent_loop.py"))
    second = run(bench("test_b", 1.0, {}, suite="bench_agent_loop.py"))
    text = report.render_runs([(first, "one.json"), (second, "two.json")])
    assert "Run 2:" not in text and "From run" not in text and "test_a" not in text
    assert "Medians of one run" in text


def test_baseline_takes_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "last.json"
    path.write_text(json.dumps(run(bench("test_a", 1.0, {}))), encoding="utf-8")
    baseline = tmp_path / "baseline.json"
    assert report.main([str(path), str(path), "--baseline", str(baseline)]) == 2
    assert "one run" in capsys.readouterr().err and not baseline.exists()
