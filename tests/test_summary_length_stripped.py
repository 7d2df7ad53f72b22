"""SPEC §17.4 with §5: the summary length rule measures the text that would be stored — the
summarizer's reply stripped — so whitespace around a reply within the limit (a model's
trailing newlines) does not fail the compaction, while a reply over it still does. On a
real SQLite file."""

from __future__ import annotations

from pathlib import Path

import ledgerfold as lf


def _words(text: str) -> int:
    return len(text.split(" "))  # every space counts: padding costs tokens


def _store(tmp_path: Path) -> lf.SQLiteStore:
    store = lf.SQLiteStore(tmp_path / "ledger.db")
    for n in range(12):
        store.append("c", "user", f"turn {n}", id=f"t{n}")
    return store


def _policy() -> lf.CompactionPolicy:
    # The limit is 10 * 1.25 = 12.5 tokens: 12 words fit.
    return lf.CompactionPolicy(
        "v1", keep_tail=2, min_new_turns=1, max_summary_tokens=10, token_counter=_words
    )


def test_whitespace_around_a_reply_within_the_limit_is_not_counted(tmp_path: Path) -> None:
    reply = "   " + " ".join(["w"] * 12) + "   \n\n"
    with _store(tmp_path) as store:
        outcome = lf.Compactor(store, _policy(), lambda request: reply).compact("c")
        assert outcome.status == "accepted", outcome.reason
        assert outcome.summary is not None and outcome.summary.text == reply.strip()
        current = store.current_summary("c")
        assert current is not None and current.text == reply.strip()


def test_a_reply_over_the_limit_still_fails_and_changes_nothing(tmp_path: Path) -> None:
    with _store(tmp_path) as store:
        first = lf.Compactor(store, _policy(), lambda request: "short").compact("c")
        assert first.status == "accepted"
        store.append("c", "user", "more", id="t12")
        overlong = " ".join(["w"] * 13)
        outcome = lf.Compactor(store, _policy(), lambda request: overlong).compact("c")
        assert (outcome.status, outcome.reason) == ("failed", "summary-too-long")
        current = store.current_summary("c")
        assert current is not None and current.text == "short"
