"""A body's control characters on the inspector page: the CTF transcripts of
tests/data/transcripts (docent) hold NUL, ESC and other C0 bytes in tool output. Written
raw into the page they are HTML parse errors, and a NUL is dropped by the parser: the page
silently showed less than the turn holds. They are spelled out as on the terminal (`\\x00`);
tabs, newlines and right-to-left marks stay as they are."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore

BODY = "Decoded: E\x1e\nDecoded: \x7f\x1a\tend\x00 \x1b[31mred\x1b[0m \x9b \u05e9\u200fok"
CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def test_control_characters_of_a_body_are_spelled_out(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append("c", "user", "Decode the file.")
        store.append("c", "assistant", BODY)
    out = tmp_path / "page.html"
    result = run("inspect", str(db), "c", "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert CONTROLS.search(page) is None
    assert (
        "Decoded: E\\x1e\nDecoded: \\x7f\\x1a\tend\\x00 \\x1b[31mred\\x1b[0m \\x9b \u05e9\u200fok"
        in page
    )
