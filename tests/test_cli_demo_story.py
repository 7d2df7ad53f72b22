"""`ledgerfold demo` tells its story so that a newcomer can follow it: the edit that makes
the summary stale is shown (it said only "edited m11"), and the summary's place in the
context is said as it is (at its last source's sequence; it said "after sequence 24")."""

from __future__ import annotations

from cli_support import run


def test_the_demo_shows_the_edit_and_where_the_summary_stands() -> None:
    result = run("demo")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert (
        "edited m11 (seq 11), one of the summary's sources, from 'report.md is the Q3 report:"
        " revenue grew 12% and costs fell 3%.' to 'report.md is the Q3 report: revenue grew"
        " 15%, not 12%.'; the summary citing it:"
    ) in text
    assert "the summary stands where its last source was (sequence 24)" in text
    assert "slot after sequence" not in text
