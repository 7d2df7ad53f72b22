"""`inspect` of a conversation whose every turn was purged says so plainly: that the turns
through the boundary were purged and what remains of them (the sealed summary, or nothing),
instead of "0 turns", an empty table and "sequences none" (SPEC §15.5). `context` of one
with no summary left says the context is empty and why, instead of an empty table and
"every turn raw"."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


def _ok(*args: str) -> str:
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        for conversation in ("summarised", "bare"):
            store.append_many(
                conversation,
                [
                    {"role": "user" if n % 2 else "assistant", "body": f"turn {n}"}
                    for n in range(1, 11)
                ],
            )
    _ok("compact", str(path), "--conversation", "summarised", "--keep-tail", "1")
    for conversation in ("summarised", "bare"):
        _ok("purge", str(path), conversation, "--through", "10", "--reason", "gdpr", "--force")
    return path


def test_a_wholly_purged_conversation_with_its_summary(db: Path) -> None:
    with SQLiteStore(db, read_only=True) as store:
        summary = store.current_summary("summarised")
        revision = store.load("summarised").revision
    assert summary is not None
    lines = _ok("inspect", str(db), "summarised").splitlines()
    assert lines[0] == (
        f"conversation summarised: revision {revision}, no live turn:"
        " every turn through sequence 10 was purged"
    )
    covers = next(line for line in lines if line.startswith("current summary "))
    assert covers.endswith(
        f"covers {len(summary.source_ids)} turns, all purged: sealed by their stored digests"
    )
    assert "sequences" not in covers
    assert lines[-1] == f"what remains: summary {summary.id} (sealed), the whole context"


def test_a_wholly_purged_conversation_without_a_summary(db: Path) -> None:
    with SQLiteStore(db, read_only=True) as store:
        revision = store.load("bare").revision
    lines = _ok("inspect", str(db), "bare").splitlines()
    assert lines[0] == (
        f"conversation bare: revision {revision}, no live turn:"
        " every turn through sequence 10 was purged"
    )
    assert "summary versions: none" in lines  # not a table of no rows
    assert "id\tstatus\treason\tcreated_at\tsources\tfingerprint" not in lines
    assert lines[-1] == (
        "what remains: nothing (no summary covers the purged turns); the context is empty"
    )


def test_the_empty_context_of_a_wholly_purged_conversation(db: Path) -> None:
    assert _ok("context", str(db), "bare").splitlines() == [
        "context of bare: empty: every turn through sequence 10 was purged (gdpr)"
        " and no summary covers them"
    ]
    # Its summary unusable under another policy: the same, and why the summary is not used.
    assert _ok("context", str(db), "summarised", "--policy-version", "v9").splitlines() == [
        "context of summarised: empty: every turn through sequence 10 was purged (gdpr)"
        " and the summary is not used (stale-summary:policy-mismatch)"
    ]


def test_the_inspector_page_of_a_wholly_purged_conversation_says_the_context_is_empty(
    db: Path, tmp_path: Path
) -> None:
    """Its page says so too: the fallback alert does not claim every turn is sent raw."""
    page = tmp_path / "bare.html"
    _ok("inspect", str(db), "bare", "--html", str(page))
    text = page.read_text(encoding="utf-8")
    assert "Fallback: no-summary — the context is empty." in text
    assert "every turn is sent raw" not in text


def test_a_partly_purged_summary_says_which_sequences_are_live(tmp_path: Path) -> None:
    """The sequences listed are those of the live sources only: "covers 8 turns (sequences
    6-9; 4 purged, sealed)" read as if 8 turns lay within 6-9."""
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(1, 11)])
    _ok("compact", str(path), "--conversation", "c", "--keep-tail", "2")
    _ok("purge", str(path), "c", "--through", "4", "--reason", "gdpr")
    covers = next(
        line
        for line in _ok("inspect", str(path), "c").splitlines()
        if line.startswith("current summary ")
    )
    assert covers.endswith("covers 8 turns (sequences 5-8 live; 4 purged, sealed)"), covers
