"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. The default (extractive) summarizer stays within `max_summary_tokens` (SPEC
§15.2, §15.8), counted by the policy's token counter, listing each call once and keeping the
head of tool results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    SQLiteStore,
    SummaryRequest,
    Turn,
    TurnItem,
)
from ledgerfold.tokens import approx_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import CONV, spec_of, transcripts  # noqa: E402

# -- the default summarizer (§15.2) -----------------------------------------------------------


def test_extractive_summarizer_bounds_lists_calls_once_and_keeps_tool_heads() -> None:
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 30)
    items = tuple(_item(turn) for turn in transcript.turns if turn.role != "system")
    unbounded = ExtractiveSummarizer()(SummaryRequest(CONV, "p", "v1", items))
    called = [
        call["function"]["name"]
        for turn in transcript.turns
        for call in json.loads((turn.meta or {}).get("tool_calls", "[]"))
    ]
    assert called
    for name in set(called):
        assert unbounded.count(name) == called.count(name)  # each call once, not twice
    tool = next(turn for turn in transcript.turns if turn.role == "tool" and len(turn.body) > 200)
    assert " ".join(tool.body.split())[:40] in unbounded  # a head, not only "N chars"
    for budget in (400, 60, 5, 1):
        request = SummaryRequest(CONV, "p", "v1", items, max_summary_tokens=budget)
        text = ExtractiveSummarizer()(request)
        assert text.strip() and approx_tokens(text) <= budget
    # A long previous summary is bounded too.
    request = SummaryRequest(
        CONV,
        "p",
        "v1",
        items[-4:],
        previous_summary=unbounded,
        covered_count=len(items) - 4,
        max_summary_tokens=100,
    )
    assert approx_tokens(ExtractiveSummarizer()(request)) <= 100


def test_the_default_summarizer_honours_max_summary_tokens_by_the_policy_counter(
    store: SQLiteStore,
) -> None:
    """§15.8: the policy's `token_counter` is what `max_summary_tokens` is counted in."""
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 30)
    store.append_many(CONV, [spec_of(turn) for turn in transcript.turns])
    policy = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, max_summary_tokens=200, token_counter=len
    )
    summary = Compactor(store, policy).compact(CONV).summary
    assert summary is not None and 0 < len(summary.text) <= 200


def _item(turn: Turn) -> Any:
    from ledgerfold import TurnItem

    return TurnItem(turn.id, turn.role, turn.body, turn.sequence, turn.meta)


def test_the_default_summarizer_fits_a_counter_charging_several_tokens_per_character(
    store: SQLiteStore,
) -> None:
    """§15.8, §17.4: with a counter that charges more than a token per character (a real
    tokenizer does for many CJK characters and emoji), text cut to fit is cut by that
    counter, not to `max_summary_tokens` characters, so the compaction is accepted instead
    of failing `summary-too-long` on every attempt."""

    def two_per_char(text: str) -> int:
        return 2 * len(text)

    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 30)
    items = tuple(_item(turn) for turn in transcript.turns if turn.role != "system")
    summarizer = ExtractiveSummarizer(token_counter=two_per_char)
    for budget in (40, 10, 3, 2):
        request = SummaryRequest(CONV, "p", "v1", items, max_summary_tokens=budget)
        text = summarizer(request)
        assert text.strip() and two_per_char(text) <= budget, budget
    store.append_many(CONV, [spec_of(turn) for turn in transcript.turns])
    policy = CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, max_summary_tokens=40, token_counter=two_per_char
    )
    outcome = Compactor(store, policy).compact(CONV)
    assert outcome.status == "accepted", outcome.reason
    assert outcome.summary is not None and two_per_char(outcome.summary.text) <= 40


def test_a_previous_summary_line_with_a_huge_number_is_a_note() -> None:
    """A previous summary from another summarizer (a model's text) may start a line with
    `[seq ` or `[` and more digits than any sequence has (Python refuses to read 4,300 of
    them): such a line is no turn line nor omission marker but a note, kept as it is,
    never a `ValueError` that would fail every later compaction of the conversation."""
    huge = "1" * 5000
    previous = f"[seq 1 user] a fact.\n[seq {huge} user] b\n[{huge} earlier turn lines omitted]"
    request = SummaryRequest(
        "c", "p", "v1", (TurnItem("t9", "user", "hello there.", 9, None),), previous
    )
    text = ExtractiveSummarizer()(request)
    lines = text.splitlines()
    assert f"[seq {huge} user] b" in lines
    assert f"[{huge} earlier turn lines omitted]" in lines
    assert "[seq 1 user] a fact." in lines
    assert any(line.startswith("[seq 9 user]") for line in lines)


def test_a_long_request_pauses_every_few_turn_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a store's worker the summarizer lets the event loop take the GIL between turn
    lines (`pause`): a request of many turns never writes more than 4 lines without one."""
    from ledgerfold.summarizers import _extractive

    events: list[str] = []
    write = ExtractiveSummarizer._turn_line

    def counted(self: ExtractiveSummarizer, turn: Any) -> str:
        events.append("line")
        return write(self, turn)

    monkeypatch.setattr(_extractive, "pause", lambda: events.append("pause"))
    monkeypatch.setattr(ExtractiveSummarizer, "_turn_line", counted)
    transcript = next(t for t in transcripts("tau_bench.jsonl") if len(t.turns) >= 30)
    items = tuple(_item(turn) for turn in transcript.turns)
    ExtractiveSummarizer()(SummaryRequest(CONV, "p", "v1", items))
    assert events.count("line") == len(items) and events[0] == "pause"
    runs = "".join("p" if event == "pause" else "l" for event in events).split("p")
    assert max(map(len, runs)) <= 4
