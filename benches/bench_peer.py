"""`assemble_context` on 200k real turns vs LangChain's `trim_messages` doing the same job.

The job: from a 200k-turn history, produce what goes to the model — the newest turns within
a budget. ledgerfold keeps a summary of the old turns plus the 1,000-turn tail (checking
the summary's 199k sources on the way); the peer trims the same history, as LangChain
`BaseMessage`s made by `ledgerfold.adapters._langchain`, to the same budget: the character
count of the kept tail, with a `len`-based token counter so the peer is not handicapped by
a tokenizer. Both must keep exactly the same tail turns.

Anchors in the same run: `trim_messages` (the peer), timed in turn with ours, and the
hand-written Python way (walk back from the end summing lengths). Target: `assemble_context`
>= 10x `trim_messages`.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from bench_conftest import anchor_seconds, interleaved, record_ratio, target

from ledgerfold import (
    AssembledContext,
    Conversation,
    Turn,
    assemble_context,
    create_summary_envelope,
    plan_compaction,
)

langchain_messages = importlib.import_module("langchain_core.messages")
from ledgerfold.adapters._langchain import to_langchain_messages  # noqa: E402

POLICY = "bench-v1"
TAIL = 1_000


def count_chars(messages: list[Any]) -> int:
    """A list token counter costing one `len` per message: no tokenizer in the way."""
    return sum(len(message.content) for message in messages)


def python_tail_by_budget(messages: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The hand-written way: walk back from the newest message while the budget lasts."""
    used = 0
    start = len(messages)
    while start > 0 and used + len(messages[start - 1]["content"]) <= budget:
        start -= 1
        used += len(messages[start]["content"])
    return messages[start:]


def test_assemble_context_vs_trim_messages(
    benchmark: Any, ledger: list[Turn], request: pytest.FixtureRequest
) -> None:
    conversation = Conversation("peer", 1, ledger)
    tail = min(TAIL, len(ledger) // 2)
    plan = plan_compaction(conversation, tail, "plan-1")
    envelope = create_summary_envelope(plan, conversation, "summary-1", POLICY, "summary")
    assert envelope is not None

    context = assemble_context(conversation, envelope, POLICY)
    assert context.fallback is None
    kept = [item for item in context.items if item.id != envelope.id]
    assert len(kept) == tail
    # What a chat request carries of the tail: the real transcripts hold tool turns that
    # answer no recorded call, which the adapter leaves out (SPEC §17.2).
    sent = [m.content for m in to_langchain_messages(AssembledContext(tuple(kept)))]
    budget = sum(len(text) for text in sent)

    # The peer's input: the whole history as LangChain messages (conversion not timed).
    full = assemble_context(conversation, None, POLICY)
    history = to_langchain_messages(full)
    assert len(history) == len(ledger) - full.dropped
    trimmed = langchain_messages.trim_messages(
        history, max_tokens=budget, token_counter=count_chars, strategy="last"
    )
    assert [m.content for m in trimmed] == sent
    plain = [{"role": message.type, "content": message.content} for message in history]
    assert len(python_tail_by_budget(plain, budget)) == len(sent)

    config = request.config
    # Ours timed in turn with the peer (one call of each a round), so a drift in the shared
    # machine's speed hits both alike.
    interleaved(
        benchmark,
        config,
        lambda: assemble_context(conversation, envelope, POLICY),
        {
            "langchain_trim_messages": lambda: langchain_messages.trim_messages(
                history, max_tokens=budget, token_counter=count_chars, strategy="last"
            )
        },
        rounds=30,
    )
    benchmark.extra_info.update(turns=len(ledger), kept_turns=tail, budget_chars=budget)
    record_ratio(
        benchmark,
        "python_tail_by_budget",
        anchor_seconds(config, lambda: python_tail_by_budget(plain, budget)),
    )
    target(benchmark, "langchain_trim_messages", min_speedup=10)
