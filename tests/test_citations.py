"""Evidence in summaries (SPEC §16.3, §16.5 "Citations"): `ledgerfold.citations` and
`SQLiteStore.cited_sources` give the sources a summary's text cites (`[seq N`, the first
number in a bracket), each once, in ascending sequence; a cited non-source is not evidence,
purged and retracted sources are left out. Checked against a slow hand-written reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    Conversation,
    ExtractiveSummarizer,
    InvalidInput,
    SQLiteStore,
    SummaryEnvelope,
    SummaryItem,
    Turn,
    citations,
    fingerprint_turns,
)

TURNS = tuple(Turn(f"t{n}", n, "user" if n % 2 else "assistant", f"body {n}") for n in range(1, 8))
CONVERSATION = Conversation("c", 7, TURNS)


def envelope(text: str, source_ids: tuple[str, ...] = ("t2", "t3", "t4", "t5")) -> SummaryEnvelope:
    return SummaryEnvelope(
        id="s1",
        plan_id="p1",
        conversation_id="c",
        source_revision=7,
        source_ids=source_ids,
        source_fingerprint=fingerprint_turns(t for t in TURNS if t.id in source_ids),
        policy_version="v1",
        text=text,
    )


def reference_sequences(text: str) -> set[int]:
    """The slow way: find each "[seq " by hand and read the digits after it."""
    found: set[int] = set()
    start = 0
    while (at := text.find("[seq ", start)) != -1:
        index = at + len("[seq ")
        digits = ""
        while index < len(text) and text[index] in "0123456789":
            digits += text[index]
            index += 1
        if digits:
            found.add(int(digits))
        start = at + 1
    return found


def reference(
    text: str, source_ids: tuple[str, ...], conversation: Conversation
) -> tuple[str, ...]:
    cited = reference_sequences(text)
    turns = [conversation.get(turn_id) for turn_id in dict.fromkeys(source_ids)]
    present = [turn for turn in turns if turn is not None and turn.sequence in cited]
    return tuple(turn.id for turn in sorted(present, key=lambda turn: turn.sequence))


def test_cited_sources_in_sequence_order_each_once() -> None:
    text = (
        "[seq 4 user] the budget is 300\n"
        "Refund approved [seq 2] [seq 4]; see also [seq 7] (not a source)\n"
        "[seq 3, 5] only the first number counts; [Seq 5] is not a citation; [seq 12] is not 1"
    )
    assert citations(envelope(text), CONVERSATION) == ("t2", "t3", "t4")


def test_a_summary_item_is_accepted_too() -> None:
    item = SummaryItem("s1", "[seq 5 user] x [seq 2]", 5, ("t2", "t5"))
    assert citations(item, CONVERSATION) == ("t2", "t5")


def test_sources_gone_from_the_conversation_are_left_out() -> None:
    without_t3 = Conversation("c", 8, tuple(t for t in TURNS if t.id != "t3"))
    assert citations(envelope("[seq 2] [seq 3] [seq 4]"), without_t3) == ("t2", "t4")


def test_no_citation_no_evidence() -> None:
    assert citations(envelope("nothing cited here, not even [seq] or [seq x]"), CONVERSATION) == ()


@pytest.mark.parametrize(
    ("summary", "conversation", "field"),
    [
        ("text", CONVERSATION, "summary"),
        (None, CONVERSATION, "summary"),
        (envelope("[seq 2]"), TURNS, "conversation"),
        (envelope("[seq 2]"), None, "conversation"),
    ],
)
def test_bad_arguments_name_their_field(summary: object, conversation: object, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        citations(summary, conversation)  # type: ignore[arg-type]
    assert caught.value.field == field


PIECES = ["[seq ", "[seq", "[Seq ", "[", "]", " ", ",", "seq ", "0", "1", "2", "3", "4", "5", "7"]


@settings(max_examples=500)
@given(
    text=st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=30).map(
        "".join
    ),
    sources=st.lists(st.sampled_from([t.id for t in TURNS]), max_size=7, unique=True),
)
def test_citations_agree_with_the_reference(text: str, sources: list[str]) -> None:
    if not sources:
        sources = ["t1"]
    summary = envelope(text or "x", tuple(sources))
    assert citations(summary, CONVERSATION) == reference(text or "x", tuple(sources), CONVERSATION)


# --- the store -------------------------------------------------------------------------------


def _compacted(path: Path, max_turns: int | None = None) -> SQLiteStore:
    store = SQLiteStore(path)
    for n in range(1, 13):
        store.append("c", "user" if n % 2 else "assistant", f"turn {n} says a thing.", id=f"t{n}")
    policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
    Compactor(store, policy, ExtractiveSummarizer(max_turns=max_turns)).compact("c")
    return store


def test_store_cited_sources_are_the_live_cited_turns(tmp_path: Path) -> None:
    with _compacted(tmp_path / "ledger.db") as store:
        summary = store.current_summary("c")
        assert summary is not None
        cited = store.cited_sources(summary.id)
        # Every line of the extractive summary cites its turn.
        assert [turn.id for turn in cited] == list(summary.source_ids)
        assert tuple(turn.id for turn in cited) == citations(summary, store.load("c"))
        assert cited == store.get_turns("c", summary.source_ids)
        store.retract("c", "t3")
        assert "t3" not in [turn.id for turn in store.cited_sources(summary.id)]
        assert tuple(t.id for t in store.cited_sources(summary.id)) == citations(
            summary, store.load("c")
        )


def test_omitted_lines_are_not_cited(tmp_path: Path) -> None:
    """The omission marker names a range but cites nothing (SPEC §16.5)."""
    with _compacted(tmp_path / "ledger.db", max_turns=3) as store:
        summary = store.current_summary("c")
        assert summary is not None and "omitted" in summary.text
        cited = [turn.id for turn in store.cited_sources(summary.id)]
        lines = [line for line in summary.text.splitlines() if line.startswith("[seq ")]
        assert len(cited) == len(lines) == 3
        assert cited == [f"t{line.split()[1]}" for line in lines]


def test_store_cited_sources_of_an_unknown_summary(tmp_path: Path) -> None:
    with _compacted(tmp_path / "ledger.db") as store:
        with pytest.raises(InvalidInput) as caught:
            store.cited_sources("no-such-summary")
        assert caught.value.field == "summary_id"
        with pytest.raises(InvalidInput) as caught:
            store.cited_sources(3)  # type: ignore[arg-type]
        assert caught.value.field == "summary_id"


@pytest.mark.parametrize(
    "text",
    [
        "[seq 3 user] a fact. [seq " + "9" * 5000 + "] a number no sequence has",
        "[seq 3] and [seq " + "0" * 5000 + "3]",  # leading zeros: still 3
        "[seq 3] [seq 9223372036854775808]",  # one more than the largest sequence
    ],
)
def test_a_number_no_sequence_can_have_cites_nothing(tmp_path: Path, text: str) -> None:
    """A summarizer's text (a model's) may hold any digits after `[seq `: a number larger
    than any sequence (one of more than 4,300 digits, which Python refuses to read as an
    int) is no citation, never an exception from `citations` or `cited_sources`."""
    assert citations(envelope(text), CONVERSATION) == ("t3",)
    with SQLiteStore(tmp_path / "ledger.db") as store:
        for n in range(1, 7):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1, max_summary_tokens=10**5)
        assert Compactor(store, policy, lambda request: text).compact("c").status == "accepted"
        summary = store.current_summary("c")
        assert summary is not None
        assert [turn.id for turn in store.cited_sources(summary.id)] == ["t3"]


def test_only_ascii_digits_cite() -> None:
    """`[seq ٣]` (Arabic-Indic three) is not `[seq 3]`: a citation's number is ASCII, as
    summarizers write it."""
    assert citations(envelope("[seq \u0663] [seq ३]"), CONVERSATION) == ()
    assert citations(envelope("[seq 3\u0663]"), CONVERSATION) == ("t3",)
