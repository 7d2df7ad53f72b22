"""Write `benches/RESULTS.md` from pytest-benchmark JSON runs.

    python benches/report.py [RUN.json ...] [-o benches/RESULTS.md] [--baseline FILE]

Without a path, the newest `.benchmarks/**/*.json` is read; without `-o`, the Markdown goes
to stdout. One table per suite (bench file): each benchmark's median, every anchor measured
in the same run (`<anchor>_median_s` in `extra_info`, or a key a target names), the ratio
anchor / ours, and each declared target (`extra_info["targets"]`, see `benches/conftest.py`)
judged PASS or MISS. With several runs, a later run's suites replace the same suites of the
earlier ones (the last full run, then a run of one bench file), and each suite names its
run. `--baseline PATH` (one run) also saves the run, without its per-round timings, as the
baseline `make bench-check` compares against (`benches/baseline.json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANCHOR_SUFFIX = "_median_s"


@dataclass(frozen=True)
class Row:
    """One anchor of one benchmark, with the target on it if there is one."""

    anchor: str
    value: float | None  # the anchor's seconds, or the measured value of a max_value target
    ratio: float | None  # anchor / ours for timings; None for values
    target: str  # human text, "" when no target
    status: str  # "PASS", "MISS", or "" when there is no target (or it cannot be judged)
    is_value: bool = False  # a `max_value` target: `value` is a measure, not seconds
    bound: float | None = None  # the ratio the target names (anchor / ours), if any

    def ratio_text(self) -> str:
        if self.bound is None:
            return format_ratio(self.ratio)
        return format_judged(self.ratio, self.bound)


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def format_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "n/a"
    if ratio >= 100:
        return f"{ratio:,.0f}×"
    if ratio >= 10:
        return f"{ratio:.1f}×"
    return f"{ratio:.2f}×"


def format_judged(ratio: float | None, bound: float) -> str:
    """A ratio beside its bound: one more digit when rounding would make a miss look met."""
    text = format_ratio(ratio)
    if ratio is not None and ratio < 10 and text == format_ratio(bound) and ratio != bound:
        return f"{ratio:.3f}×"
    return text


def format_bytes(size: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(size) >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:.0f} B"


def format_measure(key: str, value: float) -> str:
    """A `max_value` figure: bytes when its key says so (`peak_rss_bytes`), else a count or
    a ratio (`compactions`, `input_per_appended_token`)."""
    if key.endswith("bytes"):
        return format_bytes(value)
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.4g}"


def anchor_value(extra: dict[str, Any], anchor: str) -> float | None:
    for key in (anchor + ANCHOR_SUFFIX, anchor):
        value = extra.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def judge(target: dict[str, Any], extra: dict[str, Any], median: float | None) -> Row:
    """One target: `min_speedup` (anchor / ours >= x), `max_ratio` (ours / anchor <= x) or
    `max_value` (extra_info[anchor] <= x); a target without a bound only reports the ratio."""
    anchor = str(target["anchor"])
    value = anchor_value(extra, anchor)
    if "max_value" in target:
        bound = float(target["max_value"])
        status = "" if value is None else ("PASS" if value <= bound else "MISS")
        return Row(anchor, value, None, f"≤ {format_measure(anchor, bound)}", status, is_value=True)
    ratio = value / median if value is not None and median else None
    if "min_speedup" in target:
        bound = float(target["min_speedup"])
        text = f"≥ {format_ratio(bound)}"
        status = "" if ratio is None else ("PASS" if ratio >= bound else "MISS")
        return Row(anchor, value, ratio, text, status, bound=bound)
    elif "max_ratio" in target:
        bound = float(target["max_ratio"])
        text = f"ours ≤ {format_ratio(bound)} anchor"
        status = "" if ratio is None else ("PASS" if 1 / ratio <= bound else "MISS")
        return Row(anchor, value, ratio, text, status, bound=1 / bound)
    else:
        text, status = "", ""
    return Row(anchor, value, ratio, text, status)


def rows_of(bench: dict[str, Any]) -> list[Row]:
    """Every anchor of a benchmark, targeted ones judged, in the order they were recorded."""
    extra: dict[str, Any] = bench.get("extra_info", {})
    median = bench.get("stats", {}).get("median")
    targets: list[dict[str, Any]] = list(extra.get("targets", []))
    names = [key[: -len(ANCHOR_SUFFIX)] for key in extra if key.endswith(ANCHOR_SUFFIX)]
    names += [str(t["anchor"]) for t in targets if str(t["anchor"]) not in names]
    rows = []
    for name in names:
        mine = [t for t in targets if str(t["anchor"]) == name]
        if not mine:
            rows.append(judge({"anchor": name}, extra, median))
        rows.extend(judge(t, extra, median) for t in mine)
    return rows


def details_of(bench: dict[str, Any]) -> str:
    """The benchmark's other figures (sizes, counts, bytes), as `key=value` pairs."""
    extra = bench.get("extra_info", {})
    anchors = {row.anchor for row in rows_of(bench)}
    shown = []
    for key, value in extra.items():
        if key == "targets" or key.startswith("speedup_vs_") or key.endswith(ANCHOR_SUFFIX):
            continue
        if key in anchors or key == "ratio_vs_anchor":
            continue
        if isinstance(value, float):
            value = f"{value:.4g}"
        elif isinstance(value, int) and key.endswith("bytes"):
            value = f"{value:,} ({format_bytes(value)})"
        elif isinstance(value, int):
            value = f"{value:,}"
        shown.append(f"{key}={value}")
    return ", ".join(shown)


def suite_of(bench: dict[str, Any]) -> str:
    fullname = str(bench.get("fullname") or bench.get("name", "?"))
    return Path(fullname.split("::")[0]).name


def table(benchmarks: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| benchmark | median | anchor | anchor median | speed-up (anchor ÷ ours) | target | met |",
        "|---|---:|---|---:|---:|---|---|",
    ]
    for bench in benchmarks:
        median = bench.get("stats", {}).get("median")
        rows = rows_of(bench) or [Row("—", None, None, "", "")]
        for index, row in enumerate(rows):
            name = f"`{bench['name']}`" if index == 0 else ""
            ours = format_seconds(median) if index == 0 else ""
            if row.is_value:
                shown = "n/a" if row.value is None else format_measure(row.anchor, row.value)
                value, ratio = shown, "—"
            else:
                value = format_seconds(row.value) if row.anchor != "—" else "—"
                ratio = row.ratio_text() if row.anchor != "—" else "—"
            status = f"**{row.status}**" if row.status == "MISS" else row.status
            lines.append(
                f"| {name} | {ours} | {row.anchor} | {value} | {ratio} | {row.target} | {status} |"
            )
    return lines


def machine_line(run: dict[str, Any]) -> str:
    machine = run.get("machine_info", {})
    cpu = machine.get("cpu", {})
    parts = [
        str(cpu.get("brand_raw") or machine.get("processor") or "unknown CPU"),
        f"{cpu.get('count', '?')} logical cores",
        f"{machine.get('system', '?')} {machine.get('release', '')}".strip(),
        f"{machine.get('python_implementation', 'Python')} {machine.get('python_version', '?')}",
        f"host `{machine.get('node', '?')}`",
    ]
    return ", ".join(parts)


def commit_line(run: dict[str, Any]) -> str:
    commit = run.get("commit_info", {})
    if not commit.get("id"):
        return "unknown"
    dirty = ", with uncommitted changes" if commit.get("dirty") else ""
    return f"`{str(commit['id'])[:12]}` on `{commit.get('branch', '?')}`{dirty}"


def render(run: dict[str, Any], source: str) -> str:
    return render_runs([(run, source)])


def merge_suites(
    runs: Sequence[tuple[dict[str, Any], str]],
) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """Suite (bench file) -> (index of the run it comes from, its benchmarks): a later run's
    suite replaces the same suite of an earlier run, whole."""
    suites: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for index, (run, _) in enumerate(runs):
        mine: dict[str, list[dict[str, Any]]] = {}
        for bench in sorted(run.get("benchmarks", []), key=lambda b: suite_of(b)):
            mine.setdefault(suite_of(bench), []).append(bench)
        suites.update((suite, (index, members)) for suite, members in mine.items())
    return dict(sorted(suites.items()))


def run_lines(run: dict[str, Any]) -> list[str]:
    command = run.get("command", "pytest benches --benchmark-enable --benchmark-only")
    return [
        f"- Command: `{command}`",
        f"- When: {run.get('datetime', '?')}",
        f"- Machine: {machine_line(run)}",
        f"- Commit: {commit_line(run)}",
        f"- pytest-benchmark {run.get('version', '?')}",
    ]


def render_runs(runs: Sequence[tuple[dict[str, Any], str]]) -> str:
    """RESULTS.md from one run, or from several (`merge_suites`): then each suite names the
    run it comes from, and only the runs that still give a suite are listed."""
    suites = merge_suites(runs)
    used = sorted({index for index, _ in suites.values()}) if len(runs) > 1 else [0]
    number = {index: position for position, index in enumerate(used, start=1)}
    benchmarks = [bench for _, members in suites.values() for bench in members]
    judged = [(bench, row) for bench in benchmarks for row in rows_of(bench) if row.status]
    misses = [(bench, row) for bench, row in judged if row.status == "MISS"]
    sources = " ".join(source for _, source in runs)
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `python benches/report.py {sources}` — do not edit by hand; run",
    ]
    if len(used) == 1:
        lines += [
            "`make bench` to measure again. Medians of one run; every anchor was measured in the",
            "same run. Speed-up = anchor median ÷ our median (above 1: ours is faster).",
            "",
            *run_lines(runs[used[0]][0]),
        ]
    else:
        lines += [
            "`make bench` to measure again. Medians of the run each suite names; every anchor was",
            "measured in the same run as its benchmark. Speed-up = anchor median ÷ our median",
            "(above 1: ours is faster).",
        ]
        for index in used:
            lines += ["", f"Run {number[index]}:", "", *run_lines(runs[index][0])]
    lines += ["", f"**Targets: {len(judged) - len(misses)} of {len(judged)} met.**"]
    if misses:
        lines += ["", "Missed:", ""]
        for bench, row in misses:
            shown = format_measure(row.anchor, row.value or 0) if row.is_value else row.ratio_text()
            lines.append(f"- `{bench['name']}` vs {row.anchor}: {shown}, target {row.target}")
    for suite, (index, members) in suites.items():
        lines += ["", f"## {suite}", ""]
        if len(used) > 1:
            lines += [f"From run {number[index]}.", ""]
        lines += table(members)
        details = [(bench["name"], details_of(bench)) for bench in members]
        if any(text for _, text in details):
            lines.append("")
            lines += [f"- `{name}`: {text}" for name, text in details if text]
    return "\n".join(lines) + "\n"


def baseline_of(run: dict[str, Any]) -> dict[str, Any]:
    """The run as a compare baseline: stats kept, per-round timings dropped (pytest-benchmark
    compares stats only)."""
    benchmarks = []
    for bench in run.get("benchmarks", []):
        stats = {k: v for k, v in bench.get("stats", {}).items() if k != "data"}
        benchmarks.append({**{k: v for k, v in bench.items() if k != "data"}, "stats": stats})
    return {**run, "benchmarks": benchmarks}


def newest_run(root: Path) -> Path:
    runs = sorted(root.glob("**/*.json"), key=lambda path: path.stat().st_mtime)
    if not runs:
        raise SystemExit(f"report.py: no pytest-benchmark JSON under {root}")
    return runs[-1]


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs",
        nargs="*",
        type=Path,
        help="pytest-benchmark JSON (default: newest); later "
        "runs' suites replace the same suites of earlier ones",
    )
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    parser.add_argument("--baseline", type=Path, help="also save the run here as the baseline")
    args = parser.parse_args(list(argv) if argv is not None else None)
    paths: list[Path] = args.runs or [newest_run(Path(".benchmarks"))]
    if args.baseline and len(paths) > 1:
        print("report.py: --baseline saves one run; give one", file=sys.stderr)
        return 2
    runs = []
    for path in paths:
        try:
            runs.append((json.loads(path.read_text(encoding="utf-8")), str(path)))
        except (OSError, ValueError) as error:
            print(f"report.py: cannot read {path}: {error}", file=sys.stderr)
            return 2
    text = render_runs(runs)
    if args.baseline:
        baseline = baseline_of(runs[0][0])
        args.baseline.write_text(json.dumps(baseline, indent=2) + "\n", encoding="utf-8")
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
