"""Core hot paths on ledgers of 10k, 200k and 1M real-transcript turns, each beside its anchors.

Anchors, measured in the same run: raw BLAKE3 over the same bytes in one stream (the
physical limit), the hand-written Python way (a blake3-package loop over the bodies), and the
slow pure-Python reference of tests/reference.py (the differential oracle). The LangChain
peer is in bench_peer.py, heavy bodies in bench_heavy.py.

Targets (judged by benches/report.py): `fingerprint_turns` over built Turns >= 20x the Python
blake3 loop over the same bodies; `check_summary` >= 50x the reference; `assemble_context`
on 200k turns >= 20x the reference; a `TurnItem` of a 50 MB text >= 100x a `Turn` of it (the
item does not hash).
"""

from __future__ import annotations

import json
from typing import Any

import blake3
import pytest
from bench_conftest import (
    anchor_seconds,
    full_size,
    interleaved,
    real_turns,
    record_ratio,
    size_of,
    target,
)

import reference  # tests/reference.py, put on sys.path by conftest
from ledgerfold import (
    Conversation,
    Turn,
    TurnItem,
    assemble_context,
    check_summary,
    create_summary_envelope,
    fingerprint_turns,
    plan_compaction,
)

POLICY = "bench-v1"


@pytest.fixture(scope="module")
def compacted(sized_ledger: list[Turn]) -> tuple[Conversation, Any]:
    """A conversation whose summary covers all but the newest 1,000 turns."""
    conversation = Conversation("bench", 1, sized_ledger)
    plan = plan_compaction(conversation, min(1_000, len(sized_ledger) // 2), "plan-1")
    envelope = create_summary_envelope(plan, conversation, "summary-1", POLICY, "summary")
    assert envelope is not None
    return conversation, envelope


def python_blake3_loop(bodies: list[str]) -> None:
    """The hand-written Python way: hash every body with the blake3 package."""
    for body in bodies:
        blake3.blake3(body.encode()).digest()


def _reference_rounds(turns: int) -> int:
    """Rounds for a benchmark timed in turn with the pure-Python reference (about 10 s a call
    at 1M turns)."""
    return 20 if turns <= 10_000 else 5 if turns <= 200_000 else 3


def test_fingerprint_turns(
    benchmark: Any, sized_ledger: list[Turn], request: pytest.FixtureRequest
) -> None:
    ledger = sized_ledger
    bodies = [turn.body for turn in ledger]
    digests = b"".join(turn.digest for turn in ledger)
    config = request.config

    rounds = {10_000: 30, 200_000: 10}.get(len(ledger), 5)
    result = interleaved(
        benchmark,
        config,
        lambda: fingerprint_turns(ledger),
        {"python_blake3_loop": lambda: python_blake3_loop(bodies)},
        rounds=rounds,
    )
    # The full reference re-encodes every turn (seconds at 1M); the digests are checked by the
    # reference on a prefix, the fingerprint over them by hand.
    assert [t.digest for t in ledger[:500]] == [reference.turn_digest(t) for t in ledger[:500]]
    material = len(ledger).to_bytes(8, "little") + digests
    context = "ledgerfold v1 fingerprint"
    assert result == "lf1:" + blake3.blake3(material, derive_key_context=context).hexdigest()
    benchmark.extra_info.update(
        turns=len(ledger), body_bytes=sum(map(len, map(str.encode, bodies)))
    )
    record_ratio(
        benchmark,
        "raw_blake3_one_stream_of_digests",
        anchor_seconds(config, lambda: blake3.blake3(digests).digest()),
    )
    target(benchmark, "python_blake3_loop", min_speedup=20)


def test_check_summary(
    benchmark: Any, compacted: tuple[Conversation, Any], request: pytest.FixtureRequest
) -> None:
    conversation, envelope = compacted
    turns = list(conversation.turns)
    expected = reference.check_summary(envelope, conversation.id, turns, POLICY)
    assert expected == (True, None, None)
    result = interleaved(
        benchmark,
        request.config,
        lambda: check_summary(envelope, conversation, POLICY),
        {"reference": lambda: reference.check_summary(envelope, conversation.id, turns, POLICY)},
        rounds=_reference_rounds(len(turns)),
    )
    assert result.current
    digests = b"".join(conversation.get(i).digest for i in envelope.source_ids)  # type: ignore[union-attr]
    benchmark.extra_info.update(turns=len(turns), sources=len(envelope.source_ids))
    record_ratio(
        benchmark,
        "raw_blake3_one_stream_of_digests",
        anchor_seconds(request.config, lambda: blake3.blake3(digests).digest()),
    )
    target(benchmark, "reference", min_speedup=50)


def test_assemble_context(
    benchmark: Any,
    compacted: tuple[Conversation, Any],
    request: pytest.FixtureRequest,
) -> None:
    conversation, envelope = compacted
    turns = list(conversation.turns)
    context = interleaved(
        benchmark,
        request.config,
        lambda: assemble_context(conversation, envelope, POLICY),
        {"reference": lambda: reference.assemble_context(conversation.id, turns, envelope, POLICY)},
        rounds=_reference_rounds(len(turns)),
    )
    assert context.fallback is None
    benchmark.extra_info.update(turns=len(turns), items=len(context.items))
    if request.node.callspec.id == "200k":
        target(benchmark, "reference", min_speedup=20)


def test_assemble_context_raw_fallback(
    benchmark: Any, compacted: tuple[Conversation, Any], request: pytest.FixtureRequest
) -> None:
    """The worst case: a stale summary, so every turn goes raw."""
    conversation, envelope = compacted
    context = benchmark(assemble_context, conversation, envelope, "other-policy")
    assert context.fallback == "stale-summary:policy-mismatch"
    turns = list(conversation.turns)
    benchmark.extra_info.update(turns=len(turns), items=len(context.items))
    record_ratio(
        benchmark,
        "reference",
        anchor_seconds(
            request.config,
            lambda: reference.assemble_context(conversation.id, turns, envelope, "other-policy"),
            rounds=3,
        ),
    )


def test_build_turns(
    benchmark: Any, sized_ledger: list[Turn], request: pytest.FixtureRequest
) -> None:
    """Building Turns hashes every body once; compare with the Python loop that only hashes."""
    rows = [(t.id, t.sequence, t.role, t.body) for t in sized_ledger]
    bodies = [row[3] for row in rows]
    stream = "".join(bodies).encode()

    def build() -> list[Turn]:
        return [Turn(*row) for row in rows]

    # A 1M-turn build takes seconds a round: a fixed 3 rounds, not pytest-benchmark's >= 5.
    built = benchmark.pedantic(build, rounds=3 if full_size(request.config) else 1)
    assert built == sized_ledger
    benchmark.extra_info.update(turns=len(rows), body_bytes=len(stream))
    record_ratio(
        benchmark,
        "python_blake3_loop",
        anchor_seconds(request.config, lambda: python_blake3_loop(bodies), rounds=3),
    )
    record_ratio(
        benchmark,
        "raw_blake3_one_stream_of_bodies",
        anchor_seconds(request.config, lambda: blake3.blake3(stream).digest()),
    )


def test_turn_item_of_a_large_text(benchmark: Any, request: pytest.FixtureRequest) -> None:
    """A `TurnItem` validates its fields but does not hash its text; a `Turn` of the same
    body hashes it. The body is ASCII, whose UTF-8 view CPython has for free (a non-ASCII str
    is encoded once by either, and CPython caches that on the str)."""
    body = "x" * (50_000_000 if full_size(request.config) else 1_000_000)
    item = interleaved(
        benchmark,
        request.config,
        lambda: TurnItem("m1", "user", body, 1),
        {"turn": lambda: Turn("m1", 1, "user", body)},
        rounds=20,
    )
    assert item.text is body
    benchmark.extra_info.update(body_bytes=len(body))
    target(benchmark, "turn", min_speedup=100)


def test_conversation_from_rows(benchmark: Any, request: pytest.FixtureRequest) -> None:
    """10k stored rows to a `Conversation` in one call, the stored digests trusted, against
    a `Turn` per row from keyword arguments (every body hashed again, meta through
    `json.loads`) and a `Conversation` over them: how store/sqlite.py loads today."""
    turns = [
        t.replace(meta={"tool_call_id": f"call-{t.sequence}", "name": "lookup"})
        if t.role == "tool"
        else t
        for t in real_turns(size_of(request.config, "10k"))
    ]
    rows = [
        (
            t.id,
            t.sequence,
            t.role,
            t.body,
            int(t.protected),
            t.protection_reason,
            t.group,
            None if t.meta is None else json.dumps(t.meta, sort_keys=True, ensure_ascii=False),
            t.digest,
        )
        for t in turns
    ]

    def per_turn() -> Conversation:
        return Conversation(
            "c",
            1,
            [
                Turn(
                    turn_id,
                    sequence,
                    role,
                    body,
                    protected=bool(protected),
                    protection_reason=reason,
                    group=group,
                    meta=None if meta is None else json.loads(meta),
                )
                for turn_id, sequence, role, body, protected, reason, group, meta, _ in rows
            ],
        )

    built = interleaved(
        benchmark,
        request.config,
        lambda: Conversation._from_rows("c", 1, rows),
        {"turn_per_row": per_turn},
        rounds=20,
    )
    assert built == per_turn() == Conversation("c", 1, turns)
    benchmark.extra_info.update(turns=len(rows), with_meta=sum(row[7] is not None for row in rows))
