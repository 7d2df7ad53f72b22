"""The inspector page's "turns" card counts the live turns, as `inspect` (text and JSON)
does: it counted the timeline's rows, purged and retracted turns included, so the page said
121 turns where `inspect` said 37. Those are tiles of their own."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore


def test_the_turns_card_is_inspect_s_count_and_the_gone_ones_are_their_own(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        turns = [store.append("c", "user", f"message {n}") for n in range(1, 8)]
        store.purge_through("c", 3, "retention")
        store.retract("c", turns[5].id)
    shown = run("inspect", str(db), "c", "--json")
    assert shown.exit_code == 0, shown.output
    live = json.loads(shown.output)["turns"]
    assert live == 3  # 7 appended, 3 purged, 1 retracted
    out = tmp_path / "c.html"
    assert run("inspect", str(db), "c", "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert f'<div class="stat"><b>{live}</b>turns</div>' in page
    assert '<div class="stat"><b>3</b>purged turns</div>' in page
    assert '<div class="stat"><b>1</b>retracted turn</div>' in page


def test_no_gone_tiles_when_nothing_was_purged_or_retracted(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append("c", "user", "one")
    out = tmp_path / "c.html"
    assert run("inspect", str(db), "c", "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert '<div class="stat"><b>1</b>turn</div>' in page
    assert "purged turn" not in page and "retracted turn" not in page
