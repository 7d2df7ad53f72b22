"""An imported turn ID repeats its conversation's (`openhands/multi-swe-bench/ponyc-4588:94`):
in a terminal table of `context` and `search` it took three folded lines a row. The terminal
shows `…:94` and says under the table what `…:N` stands for; piped rows keep the whole ID."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold._cli.render import context_table, print_table

CID = "openhands/multi-swe-bench/ponylang__ponyc-4588"


def _tables(tmp_path: Path) -> tuple[str, str]:
    with SQLiteStore(tmp_path / "agent.db") as store:
        store.append_many(
            CID,
            [
                {"id": f"{CID}:{n}", "role": "user", "body": f"turn {n}"}
                if n != 11
                else {"id": "plain-id", "role": "user", "body": "turn 11"}
                for n in range(1, 13)
            ],
        )
        Compactor(store, CompactionPolicy("v1", keep_tail=3, min_new_turns=1)).compact(CID)
        context, conversation = store.context(CID, "v1"), store.load(CID)
    shown = []
    for terminal in (True, False):
        out = io.StringIO()
        console = Console(file=out, force_terminal=terminal, width=120, color_system=None)
        table = context_table(context, conversation, title=f"context of {CID}", preview=True)
        print_table(console, table)
        shown.append(out.getvalue())
    return shown[0], shown[1]


def test_a_terminal_shows_the_turn_ids_tail_and_says_what_it_stands_for(tmp_path: Path) -> None:
    terminal, _ = _tables(tmp_path)
    rows = [line for line in terminal.splitlines() if "after the summary" in line]
    assert len(rows) == 3
    assert " …:10 " in rows[0] and " plain-id " in rows[1] and " …:12 " in rows[2]
    assert f"{CID}:1" not in terminal.replace(f"…:N is turn {CID}:N", "")
    assert f"…:N is turn {CID}:N" in terminal


def test_piped_rows_keep_the_whole_id(tmp_path: Path) -> None:
    _, piped = _tables(tmp_path)
    rows = [line.split("\t") for line in piped.splitlines() if "after the summary" in line]
    assert [row[2] for row in rows] == [f"{CID}:10", "plain-id", f"{CID}:12"]
    assert "…:N is turn" not in piped and "\t…:" not in piped
