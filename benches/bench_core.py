"""Core hot paths on a 200k-turn ledger of real transcripts, each beside its anchor.

Anchors in the same run: the hand-written Python way (a blake3-package loop over the
bodies), raw BLAKE3 over the same bytes in one stream (the physical limit), and the slow
pure-Python reference of tests/reference.py (the differential oracle).
"""

from __future__ import annotations

from typing import Any

import blake3
import pytest

import reference  # tests/reference.py, put on sys.path by conftest
from conftest import full_size, median_seconds, record_ratio
from ledgerfold import (
    Conversation,
    Turn,
    assemble_context,
    check_summary,
    create_summary_envelope,
    fingerprint_turns,
    plan_compaction,
)

POLICY = "bench-v1"


@pytest.fixture(scope="module")
def compacted(ledger: list[Turn]) -> tuple[Conversation, Any]:
    """A conversation whose summary covers all but the newest 1,000 turns."""
    conversation = Conversation("bench", 1, ledger)
    plan = plan_compaction(conversation, min(1_000, len(ledger) // 2), "plan-1")
    envelope = create_summary_envelope(plan, conversation, "summary-1", POLICY, "summary")
    assert envelope is not None
    return conversation, envelope


def anchor_rounds(config: pytest.Config, full: int) -> int:
    return full if full_size(config) else 1


def test_fingerprint_turns(
    benchmark: Any, ledger: list[Turn], request: pytest.FixtureRequest
) -> None:
    bodies = [turn.body for turn in ledger]
    digests = b"".join(turn.digest for turn in ledger)
    rounds = anchor_rounds(request.config, 5)

    def python_loop() -> None:
        for body in bodies:
            blake3.blake3(body.encode()).digest()

    result = benchmark(fingerprint_turns, ledger)
    assert result == reference.fingerprint_turns(ledger)
    record_ratio(benchmark, "python_blake3_loop", median_seconds(python_loop, rounds=rounds))
    record_ratio(
        benchmark,
        "raw_blake3_one_stream_of_digests",
        median_seconds(lambda: blake3.blake3(digests).digest(), rounds=rounds),
    )


def test_check_summary(
    benchmark: Any, compacted: tuple[Conversation, Any], request: pytest.FixtureRequest
) -> None:
    conversation, envelope = compacted
    result = benchmark(check_summary, envelope, conversation, POLICY)
    assert result.current
    turns = list(conversation.turns)
    expected = reference.check_summary(envelope, conversation.id, turns, POLICY)
    assert expected == (True, None, None)
    record_ratio(
        benchmark,
        "reference",
        median_seconds(
            lambda: reference.check_summary(envelope, conversation.id, turns, POLICY),
            rounds=anchor_rounds(request.config, 3),
        ),
    )


def test_assemble_context(
    benchmark: Any, compacted: tuple[Conversation, Any], request: pytest.FixtureRequest
) -> None:
    conversation, envelope = compacted
    context = benchmark(assemble_context, conversation, envelope, POLICY)
    assert context.fallback is None
    turns = list(conversation.turns)
    record_ratio(
        benchmark,
        "reference",
        median_seconds(
            lambda: reference.assemble_context(conversation.id, turns, envelope, POLICY),
            rounds=anchor_rounds(request.config, 3),
        ),
    )


def test_assemble_context_raw_fallback(
    benchmark: Any, compacted: tuple[Conversation, Any], request: pytest.FixtureRequest
) -> None:
    """The worst case: a stale summary, so every turn goes raw."""
    conversation, envelope = compacted
    context = benchmark(assemble_context, conversation, envelope, "other-policy")
    assert context.fallback == "stale-summary:policy-mismatch"
    turns = list(conversation.turns)
    record_ratio(
        benchmark,
        "reference",
        median_seconds(
            lambda: reference.assemble_context(conversation.id, turns, envelope, "other-policy"),
            rounds=anchor_rounds(request.config, 3),
        ),
    )


def test_build_turns(benchmark: Any, ledger: list[Turn], request: pytest.FixtureRequest) -> None:
    """Building Turns hashes every body once; compare with the Python loop that only hashes."""
    rows = [(t.id, t.sequence, t.role, t.body) for t in ledger]
    bodies = [row[3] for row in rows]

    def build() -> list[Turn]:
        return [Turn(*row) for row in rows]

    def python_loop() -> None:
        for body in bodies:
            blake3.blake3(body.encode()).digest()

    built = benchmark(build)
    assert built == ledger
    record_ratio(
        benchmark,
        "python_blake3_loop",
        median_seconds(python_loop, rounds=anchor_rounds(request.config, 3)),
    )
