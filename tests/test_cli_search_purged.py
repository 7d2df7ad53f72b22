"""`search` of a conversation whose every turn was purged: purged text is found by no
search, so a miss says so (the sequence they were purged through) instead of suggesting
`--all`, which searches the live turns the context shows raw: there are none."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run, run_json
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many(
            "c", [{"role": "user", "body": f"Locker {n} holds the spare keys."} for n in range(10)]
        )
        policy = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert Compactor(store, policy).compact("c").status == "accepted"
    return path


def _purge_all(db: Path) -> None:
    run_json("purge", str(db), "c", "--through", "10", "--reason", "retention", "--force", "--json")


@pytest.mark.parametrize("flags", [[], ["--all"]])
def test_a_miss_after_every_turn_was_purged_says_so(db: Path, flags: list[str]) -> None:
    _purge_all(db)
    result = run("search", str(db), "c", "locker", *flags)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "no turn of c matches: every turn through sequence 10 was purged, and search finds"
        " only live turns\n"
    )
    assert "--all" not in result.stdout


def test_with_live_turns_the_miss_still_offers_all(db: Path) -> None:
    result = run("search", str(db), "c", "nowhere")
    assert result.exit_code == 0, result.output
    assert "--all also searches" in result.stdout
