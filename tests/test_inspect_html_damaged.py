"""A turn whose stored tool calls were changed outside ledgerfold into text that is not
strict JSON (`NaN`): its context cannot become chat messages (`to_chat_messages` raises
`InvalidInput`), and `report --html`, the operator's page of the whole database, failed on
it with one error line and wrote no page at all; `inspect --html`, the page to look at the
damage with, failed too. Both now write their pages; the conversation's page says why its
context has no messages."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _damaged(db: Path) -> None:
    with SQLiteStore(db) as store:
        for cid in ("damaged", "fine"):
            store.append_chat_messages(
                cid,
                [
                    {"role": "user", "content": "Look it up."},
                    {"role": "assistant", "content": None, "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "c1", "content": "found"},
                ],
            )
    raw = '[{"function": {"arguments": {"x": NaN}, "name": "f"}, "id": "c1", "type": "function"}]'
    with sqlite3.connect(db) as conn:  # another tool's write
        conn.execute(
            "UPDATE turns SET meta = ? WHERE conversation_id = 'damaged' AND role = 'assistant'",
            (json.dumps({"tool_calls": raw}),),
        )
    conn.close()


def test_report_html_writes_every_page_despite_a_damaged_turn(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    _damaged(db)
    out = tmp_path / "report.html"
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    assert out.exists()
    pages = {page.name.split("-")[0]: page for page in (tmp_path / "report.pages").iterdir()}
    assert sorted(pages) == ["damaged", "fine"]
    page = pages["damaged"].read_text(encoding="utf-8")
    assert "cannot be turned into chat messages" in page
    assert "meta.tool_calls" in page
    assert "cannot be turned into chat messages" not in pages["fine"].read_text(encoding="utf-8")


def test_inspect_html_of_the_damaged_conversation(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    _damaged(db)
    out = tmp_path / "page.html"
    result = run("inspect", str(db), "damaged", "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "cannot be turned into chat messages" in page
    assert '<div class="stat"><b>0</b>context messages</div>' in page
    assert '<div class="stat"><b>0</b>raw in context</div>' in page
    assert "left out of the messages" not in page
