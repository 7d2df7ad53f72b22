"""Recall's segmentation (SPEC §16.5): `index_passages` over the real transcripts' bodies and
over a 100 KB tool output, beside the slow pure-Python reference of tests/segment_reference.py
(the differential oracle) in the same run.

Targets (judged by benches/report.py): `index_passages` over the transcripts >= 20x the
reference; a 100 KB tool output well under a millisecond per KB (tools/segment-interface.md):
at most 0.1 ms per KB.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from bench_conftest import SHARED, full_size, interleaved, median_seconds, target

import segment_reference as reference  # tests/segment_reference.py, on sys.path by conftest
from ledgerfold._segment import index_passages

#: Bodies segmented per call in smoke mode (the normal test run); all of them under
#: `make bench`.
SMOKE_BODIES = 200


def transcript_bodies(role: str | None = None) -> list[str]:
    """Every body of the real transcripts (of one role, if given), in file order."""
    bodies = []
    for path in sorted((SHARED / "transcripts").glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            for line in handle:  # never str.splitlines(): bodies contain U+2028
                if line.strip():
                    for turn in json.loads(line)["turns"]:
                        if role is None or turn["role"] == role:
                            bodies.append(turn["body"])
    return bodies


def index_all(segment: Any, bodies: list[str]) -> int:
    return sum(len(segment(body)) for body in bodies)


def test_index_passages_on_the_transcripts(benchmark: Any, request: pytest.FixtureRequest) -> None:
    config = request.config
    bodies = transcript_bodies()
    if not full_size(config):
        bodies = bodies[:SMOKE_BODIES]
    passages = interleaved(
        benchmark,
        config,
        lambda: index_all(index_passages, bodies),
        {"python_reference": lambda: index_all(reference.index_passages, bodies)},
        rounds=5,
    )
    assert passages == index_all(reference.index_passages, bodies[:50]) + index_all(
        index_passages, bodies[50:]
    )
    benchmark.extra_info.update(
        bodies=len(bodies),
        body_bytes=sum(len(body.encode()) for body in bodies),
        passages=passages,
    )
    target(benchmark, "python_reference", min_speedup=20)


def test_index_passages_on_a_100kb_tool_output(
    benchmark: Any, request: pytest.FixtureRequest
) -> None:
    # Real tool outputs, joined until the text is 100 KB: one long tool turn.
    output = ""
    for body in transcript_bodies("tool"):
        output += body + "\n"
        if len(output.encode()) >= 100_000:
            break
    # A character unassigned in Python's Unicode version (one output holds binary noise) is
    # one the crates' newer version may assign: the reference cannot judge it, so it is a
    # space here (same length, same cost).
    output = "".join(" " if unicodedata.category(char) == "Cn" else char for char in output)
    kilobytes = len(output.encode()) / 1_000
    assert kilobytes >= 100
    passages = interleaved(
        benchmark,
        request.config,
        lambda: index_passages(output),
        {"python_reference": lambda: reference.index_passages(output)},
        rounds=50,
    )
    assert passages == reference.index_passages(output)
    seconds = median_seconds(lambda: index_passages(output), rounds=20)
    benchmark.extra_info.update(
        kilobytes=kilobytes, passages=len(passages), ms_per_kb=seconds * 1_000 / kilobytes
    )
    target(benchmark, "ms_per_kb", max_value=0.1)
    target(benchmark, "python_reference", min_speedup=20)
