"""The built-in summarizer against its slow reference (`extractive_reference.py`, its code
before the per-turn work was cut): the same request gives the same text, byte for byte.

Checked on every real transcript of tests/data (rolling summaries, tight budgets, `max_turns`,
a purge), and on random turns and previous summaries (line breaks of every kind, U+2028,
tool call lines, empty bodies, tool turns, omitted markers, budgets of a few tokens, another
token counter). `approx_tokens` and the line helpers are checked against theirs too."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ledgerfold import ExtractiveSummarizer, SummaryRequest, TurnItem
from ledgerfold._transcripts import load_transcripts
from ledgerfold.summarizers import _extractive
from ledgerfold.tokens import approx_tokens, wide_chars

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import extractive_reference as ref  # noqa: E402

DATA = _HERE / "data" / "transcripts"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def words(text: str) -> int:
    """A counter other than the default one: the new code composes the text for it."""
    return len(text.split()) + text.count("…")


def _pair(**options: Any) -> tuple[ExtractiveSummarizer, ref.ReferenceExtractiveSummarizer]:
    return ExtractiveSummarizer(**options), ref.ReferenceExtractiveSummarizer(**options)


def _same(options: dict[str, Any], request: SummaryRequest) -> str:
    new, old = _pair(**options)
    expected = old(request)
    assert new(request) == expected
    return expected


# -- every real transcript -----------------------------------------------------------------

OPTIONS: list[dict[str, Any]] = [
    {},
    {"max_chars_per_turn": 8, "tool_head_chars": 0},
    {"max_chars_per_turn": 40, "max_turns": 5, "tool_head_chars": 12},
    {"token_counter": words},
]


@pytest.mark.parametrize("options", OPTIONS, ids=["default", "narrow", "max_turns", "words"])
def test_every_real_transcript_summarised_alike(options: dict[str, Any]) -> None:
    """Each transcript summarised in rolling chunks of 7 turns (the previous summary carried
    on), the budget cycling from none to one token, a purge below the chunk now and then."""
    budgets = (None, 1000, 200, 60, 7, 1)
    compared = 0
    for number, transcript in enumerate(load_transcripts(sorted(DATA.glob("*.jsonl")))):
        items = [
            TurnItem(turn.id, turn.role, turn.body, turn.sequence, turn.meta)
            for turn in transcript.turns
        ]
        previous: str | None = None
        for step, start in enumerate(range(0, len(items), 7)):
            chunk = tuple(items[start : start + 7])
            purged = chunk[0].sequence - 1 if previous is not None and step % 3 == 2 else None
            request = SummaryRequest(
                transcript.conversation_id,
                "p",
                "v1",
                chunk,
                previous_summary=previous,
                max_summary_tokens=budgets[(number + step) % len(budgets)],
                purged_through=purged,
            )
            previous = _same(options, request)
            compared += 1
    assert compared > 1000


# -- random requests -------------------------------------------------------------------------

# Line breaks of every kind `str.splitlines` knows, other whitespace, sentence ends (Latin and
# CJK), wide characters at the edges of `approx_tokens`' ranges, and the marker's dash.
SPECIAL = (
    "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\t \u00a0\u3000\u200b"
    '.!?。！？…–[]{}:"\\,'
    "\u10ff\u1100\u11ff\u1200\u2e7f\u2e80\u9fff\ua000\uac00\ud7ff\uff00\uffef"
    "\U0001b000\U0001b16f\U00020000\U0003ffff\U00040000é中"
)
CHARS = st.one_of(
    st.sampled_from(SPECIAL), st.sampled_from("aZ0 .seqtool"), st.characters(codec="utf-8")
)
TEXT = st.text(CHARS, max_size=60)
NAME = st.one_of(st.sampled_from(["bash", "get_order", " ", ""]), st.text(CHARS, max_size=12))


@st.composite
def call_lines(draw: st.DrawFn) -> str:
    """A transcript's tool call line: valid (with or without an ID, repeated IDs), or not."""
    call = {"name": draw(NAME), "arguments": draw(TEXT)}
    if draw(st.booleans()):
        call["id"] = draw(st.sampled_from(["c1", "c2"]))
    line = json.dumps({"tool_call": call}, ensure_ascii=draw(st.booleans()))
    return draw(st.sampled_from([line, line[:-1], '{"tool_call": 3}', line + " x"]))


@st.composite
def bodies(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.one_of(TEXT, call_lines()), max_size=6))
    breaks = draw(st.lists(st.sampled_from(["\n", "\r\n", "\u2028", "\x85", "\n\n  "]), min_size=6))
    return "".join(line + brk for line, brk in zip(lines, breaks, strict=False)) + draw(TEXT)


@st.composite
def metas(draw: st.DrawFn) -> dict[str, str] | None:
    meta: dict[str, str] = {}
    if draw(st.booleans()):
        calls = [
            {"id": draw(st.sampled_from(["c1", "c3"])), "function": {"name": draw(NAME)}}
            for _ in range(draw(st.integers(0, 2)))
        ]
        meta["tool_calls"] = draw(st.sampled_from([json.dumps(calls), "[{", "{}"]))
    if draw(st.booleans()):
        parts = draw(st.lists(st.sampled_from(["image_url", "file", "reasoning", "X", 3])))
        meta["omitted_content_parts"] = draw(st.sampled_from([json.dumps(parts), "", "[x"]))
    if draw(st.booleans()):
        meta["name"] = draw(NAME)
    if draw(st.booleans()):
        meta["status"] = "error"
    return meta or None


@st.composite
def turns(draw: st.DrawFn) -> tuple[TurnItem, ...]:
    sequences = sorted(draw(st.sets(st.integers(1, 60), max_size=8)))
    return tuple(
        TurnItem(
            f"t{sequence}",
            draw(st.sampled_from(["system", "user", "assistant", "tool"])),
            draw(st.one_of(bodies(), st.just(""), st.just("recall_history result: 3 passages"))),
            sequence,
            draw(metas()),
        )
        for sequence in sequences
    )


@st.composite
def previous_summaries(draw: st.DrawFn) -> str | None:
    """Lines as the summarizer writes them (some about the request's turns), omitted markers
    of each form, notes, blank lines."""
    line = st.one_of(
        st.builds(
            "[seq {} {}] {}".format,
            st.integers(1, 70),
            st.sampled_from(["user", "assistant", "tool", "system"]),
            TEXT,
        ),
        st.builds(
            "[{} {}turn lines omitted{}{}]".format,
            st.integers(1, 99),
            st.sampled_from(["", "earlier "]),
            st.sampled_from(["", ": sequence 4", ": sequences 2–9", " among sequences 1–30"]),
            st.sampled_from(
                [
                    "",
                    "; recall_history returns them",
                    "; purged: recall_history cannot return them",
                    "; recall_history returns only those after sequence 5",
                ]
            ),
        ),
        TEXT,
        st.just(""),
    )
    lines = draw(st.lists(line, max_size=10))
    return draw(st.sampled_from([None, "\n".join(lines), "\r\n".join(lines)]))


COUNTERS: list[Callable[[str], int] | None] = [None, words, len]


@SETTINGS
@given(
    items=turns(),
    previous=previous_summaries(),
    budget=st.one_of(st.none(), st.integers(0, 120)),
    purged=st.one_of(st.none(), st.integers(0, 70)),
    max_chars=st.integers(8, 90),
    max_turns=st.one_of(st.none(), st.integers(1, 6)),
    tool_head=st.integers(0, 40),
    counter=st.sampled_from(COUNTERS),
)
def test_random_requests_summarised_alike(
    items: tuple[TurnItem, ...],
    previous: str | None,
    budget: int | None,
    purged: int | None,
    max_chars: int,
    max_turns: int | None,
    tool_head: int,
    counter: Callable[[str], int] | None,
) -> None:
    request = SummaryRequest(
        "c", "p", "v1", items, previous, max_summary_tokens=budget, purged_through=purged
    )
    options = {
        "max_chars_per_turn": max_chars,
        "max_turns": max_turns,
        "tool_head_chars": tool_head,
        "token_counter": counter,
    }
    _same(options, request)


# -- the helpers -----------------------------------------------------------------------------


def test_every_character_is_wide_or_not_as_in_the_reference() -> None:
    differ = [
        code
        for code in range(sys.maxunicode + 1)
        if wide_chars(chr(code)) != len(ref._WIDE.findall(chr(code)))
    ]
    assert differ == []


@SETTINGS
@given(text=st.text(CHARS, max_size=400))
def test_approx_tokens_counts_as_the_reference(text: str) -> None:
    assert approx_tokens(text) == ref.approx_tokens(text)
    assert wide_chars(text) == len(ref._WIDE.findall(text))


SENTENCES = [
    "请帮我改签。明天出发。",
    "改签！",
    "好？ 是",
    "a.b. c",
    "Done!\u3000Next",
    "why?\u2028then",
    "e.g.x",
    "...",
    "x 。",
    "  lead. trail  ",
]


@SETTINGS
@example(text="\n\u2028  \x1c first. line\x85second", limit=8)
@given(
    text=st.one_of(st.sampled_from(SENTENCES), st.text(CHARS, max_size=400)),
    limit=st.integers(0, 50),
)
def test_line_helpers_cut_as_the_reference(text: str, limit: int) -> None:
    assert _extractive._one_line(text, limit) == ref._one_line(text, limit)
    prose = [line for line in text.splitlines() if line.strip()]
    assert _extractive._first_line(text).strip() == (prose[0].strip() if prose else "")
    if prose:
        assert _extractive._first_sentence(prose[0]) == ref._first_sentence(prose[0])
