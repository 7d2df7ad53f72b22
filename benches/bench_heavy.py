"""Heavy bodies: the per-call paths cost per source, never per body byte.

Two ledgers with the same number of turns: tiny bodies (~60 bytes) and heavy synthetic bodies
(256 KiB of ASCII text each; 2,000 turns = 512 MiB under `make bench`, 64 x 16 KiB in smoke
mode). A Turn's digest is computed once, when it is built, so `check_summary` and
`fingerprint_turns` over built Turns should take the same time on both, while the Python
blake3 loop, the reference and raw BLAKE3 over the bodies grow with the bytes.

Targets: on heavy bodies, `check_summary` and `fingerprint_turns` within 1.5x of the same
call on tiny bodies (anchor `tiny_bodies`); `check_summary` >= 50x the reference. The
`fingerprint_turns` >= 20x-the-Python-loop target is judged on real bodies (bench_core.py);
here the loop's ratio is reported to show it growing with the bytes.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import blake3
import pytest
from bench_conftest import anchor_seconds, full_size, record_ratio, target

import reference  # tests/reference.py, put on sys.path by conftest
from ledgerfold import (
    Conversation,
    SummaryEnvelope,
    Turn,
    check_summary,
    create_summary_envelope,
    fingerprint_turns,
    plan_compaction,
)

POLICY = "bench-v1"
KEEP_TAIL = 8
WORDS = [
    "ledger",
    "turn",
    "summary",
    "fingerprint",
    "source",
    "policy",
    "tool",
    "call",
    "result",
    "user",
    "assistant",
    "confirm",
    "pending",
    "constraint",
    "evidence",
    "revision",
    "sequence",
    "digest",
    "compaction",
    "context",
]


def synthetic_text(size: int, seed: int = 6) -> str:
    """`size` characters of ASCII words (one byte each in UTF-8), deterministic."""
    rng = random.Random(seed)
    block = " ".join(rng.choice(WORDS) for _ in range(4_096))  # ~40 KB, then repeated
    return (block * (size // len(block) + 2))[: size * 2]


def heavy_ledger(turns: int, body_bytes: int) -> list[Turn]:
    """`turns` turns whose bodies are distinct `body_bytes`-byte slices of one text."""
    text = synthetic_text(body_bytes)
    roles = ("user", "assistant", "tool", "assistant")
    return [
        Turn(f"h{n}", n + 1, roles[n % 4], text[n % body_bytes : n % body_bytes + body_bytes])
        for n in range(turns)
    ]


def tiny_ledger(turns: int) -> list[Turn]:
    roles = ("user", "assistant", "tool", "assistant")
    return [
        Turn(f"h{n}", n + 1, roles[n % 4], f"turn {n}: {WORDS[n % len(WORDS)]}")
        for n in range(turns)
    ]


Case = tuple[list[Turn], Conversation, SummaryEnvelope]


@pytest.fixture(scope="module")
def cases(request: pytest.FixtureRequest) -> dict[str, Case]:
    turns, body_bytes = (2_000, 256 * 1024) if full_size(request.config) else (64, 16 * 1024)
    result = {}
    for name, ledger in (("tiny", tiny_ledger(turns)), ("heavy", heavy_ledger(turns, body_bytes))):
        conversation = Conversation(f"heavy-{name}", 1, ledger)
        plan = plan_compaction(conversation, KEEP_TAIL, "plan-1")
        envelope = create_summary_envelope(plan, conversation, "summary-1", POLICY, "summary")
        assert envelope is not None
        result[name] = (ledger, conversation, envelope)
    return result


#: Medians of the tiny-body variants in this run: the heavy variants' `tiny_bodies` anchor is
#: the very same pytest-benchmark measurement, not a second, differently-timed one.
TINY_MEDIANS: dict[str, float] = {}


def tiny_median(test: str, config: pytest.Config, call: Callable[[], object]) -> float:
    """The tiny-body median of `test` from this run; measured here if it did not run."""
    if test in TINY_MEDIANS:
        return TINY_MEDIANS[test]
    calls = 100 if full_size(config) else 1
    times = []
    for _ in range(9 if full_size(config) else 1):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def remember_tiny(benchmark: Any, test: str) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        TINY_MEDIANS[test] = stats.stats.median


def body_stream(ledger: list[Turn]) -> bytes:
    return "".join(turn.body for turn in ledger).encode()


@pytest.mark.parametrize("bodies", ["tiny", "heavy"])
def test_check_summary_body_size(
    benchmark: Any, cases: dict[str, Case], bodies: str, request: pytest.FixtureRequest
) -> None:
    ledger, conversation, envelope = cases[bodies]
    config = request.config
    result = benchmark(check_summary, envelope, conversation, POLICY)
    assert result.current
    stream = body_stream(ledger)
    benchmark.extra_info.update(sources=len(envelope.source_ids), body_bytes=len(stream))
    record_ratio(
        benchmark,
        "reference",
        anchor_seconds(
            config,
            lambda: reference.check_summary(envelope, conversation.id, ledger, POLICY),
            rounds=3,
        ),
    )
    record_ratio(
        benchmark,
        "raw_blake3_one_stream_of_bodies",
        anchor_seconds(config, lambda: blake3.blake3(stream).digest(), rounds=3),
    )
    target(benchmark, "reference", min_speedup=50)
    if bodies == "tiny":
        remember_tiny(benchmark, "check_summary")
    else:
        _, tiny_conversation, tiny_envelope = cases["tiny"]
        assert len(tiny_envelope.source_ids) == len(envelope.source_ids)
        record_ratio(
            benchmark,
            "tiny_bodies",
            tiny_median(
                "check_summary",
                config,
                lambda: check_summary(tiny_envelope, tiny_conversation, POLICY),
            ),
        )
        target(benchmark, "tiny_bodies", max_ratio=1.5)


@pytest.mark.parametrize("bodies", ["tiny", "heavy"])
def test_fingerprint_turns_body_size(
    benchmark: Any, cases: dict[str, Case], bodies: str, request: pytest.FixtureRequest
) -> None:
    ledger = cases[bodies][0]
    config = request.config
    result = benchmark(fingerprint_turns, ledger)
    assert result == reference.fingerprint_turns(ledger)
    bodies_text = [turn.body for turn in ledger]
    stream = body_stream(ledger)
    benchmark.extra_info.update(turns=len(ledger), body_bytes=len(stream))

    def python_loop() -> None:
        for body in bodies_text:
            blake3.blake3(body.encode()).digest()

    record_ratio(benchmark, "python_blake3_loop", anchor_seconds(config, python_loop))
    record_ratio(
        benchmark,
        "raw_blake3_one_stream_of_bodies",
        anchor_seconds(config, lambda: blake3.blake3(stream).digest(), rounds=3),
    )
    if bodies == "tiny":
        remember_tiny(benchmark, "fingerprint_turns")
    else:
        tiny = cases["tiny"][0]
        assert len(tiny) == len(ledger)
        record_ratio(
            benchmark,
            "tiny_bodies",
            tiny_median("fingerprint_turns", config, lambda: fingerprint_turns(tiny)),
        )
        target(benchmark, "tiny_bodies", max_ratio=1.5)
