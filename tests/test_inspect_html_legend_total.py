"""The inspector's timeline shows every turn, purged and retracted ones too, and its legend
counts what it shows; the "turns" card counts the live turns, as `inspect` does. Side by
side the two read as disagreeing (legend 101 turns in all, card 38). The legend now first
says how many turns the timeline shows and how they add up to the card's live turns. Real
transcripts, compacted, purged and retracted."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "openhands.jsonl"
CONVERSATION = "openhands/multi-swe-bench/ponylang__ponyc-4588"


def _page(db: Path, tmp_path: Path) -> str:
    out = tmp_path / "page.html"
    result = run("inspect", str(db), CONVERSATION, "--html", str(out))
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def _timeline_turns(page: str) -> int:
    """Turns the timeline draws: one mark each (no run is merged at this size)."""
    track = page.split('id="track">')[1].split('<div class="axis">')[0]
    return len(re.findall(r'class="m [a-z]+', track))


def test_the_legend_adds_up_to_the_timeline_and_the_turns_card(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    assert run("import", str(db), str(DATA)).exit_code == 0
    page = _page(db, tmp_path)
    assert 'id="legend-total"' not in page  # every turn live: the card says it all
    assert (
        run("compact", str(db), "--conversation", CONVERSATION, "--keep-tail", "6").exit_code == 0
    )
    result = run("purge", str(db), CONVERSATION, "--through", "40", "--reason", "retention")
    assert result.exit_code == 0, result.output
    with SQLiteStore(db) as store:
        store.retract(CONVERSATION, list(store.load(CONVERSATION))[-1].id)
        stats = store.stats(CONVERSATION)
    page = _page(db, tmp_path)
    shown = _timeline_turns(page)
    assert shown == stats.turns + stats.turns_purged + stats.turns_retracted
    legend = page.split('id="legend">')[1].split("</ul>")[0]
    assert sum(int(n.replace(",", "")) for n in re.findall(r"</b> ([\d,]+) <small>", legend)) == (
        shown
    )
    assert (
        f'<li id="legend-total"><b>{shown} turns</b> <small>on the timeline: {stats.turns}'
        f" live (the turns card), {stats.turns_purged} purged, {stats.turns_retracted}"
        " retracted</small></li>"
    ) in legend
    assert f'<div class="stat"><b>{stats.turns}</b>turns</div>' in page
