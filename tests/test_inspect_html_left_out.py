"""The inspector's "raw in context" card counts the raw turns the model is sent: a tool call
left without its results while later messages follow, or a result whose call was purged,
is in the context but not in its chat messages (SPEC §17.2), and the page says so instead
of "every turn is sent raw"."""

from __future__ import annotations

from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore, to_chat_messages


def _page(db: Path, tmp_path: Path) -> str:
    out = tmp_path / "out.html"
    result = run("inspect", str(db), "c", "--html", str(out))
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def test_a_call_without_its_result_is_not_counted_as_sent(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with SQLiteStore(db) as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "Look it up."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "user", "content": "Never mind."},  # the call gets no result
            ],
        )
        context = store.context("c", "v1")
        assert context.dropped == 1 and len(to_chat_messages(context)) == 2
    page = _page(db, tmp_path)
    assert '<div class="stat"><b>2</b>raw in context</div>' in page
    assert '<div class="stat"><b>2</b>context messages</div>' in page
    assert "1 raw turn left out of the messages" in page
    assert "every turn is sent raw" not in page


def test_a_result_whose_call_was_purged_is_not_counted_as_sent(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with SQLiteStore(db) as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
                {"role": "user", "content": "Thanks."},
            ],
        )
        store.purge_through("c", 1, "gdpr", force=True)  # the call goes, its result stays
        assert store.context("c", "v1").dropped == 1
    page = _page(db, tmp_path)
    assert '<div class="stat"><b>1</b>raw in context</div>' in page
    assert "1 raw turn left out of the messages" in page


def test_context_in_the_terminal_marks_the_turns_not_sent(tmp_path: Path) -> None:
    """`ledgerfold context` lists the context's items: the call left without its result was
    listed like any raw turn, though `--json` (the chat messages) leaves it out."""
    db = tmp_path / "agent.db"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with SQLiteStore(db) as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "Look it up.", "id": "u1"},
                {"role": "assistant", "content": None, "tool_calls": [call], "id": "a1"},
                {"role": "user", "content": "Never mind.", "id": "u2"},
            ],
        )
    result = run("context", str(db), "c")
    assert result.exit_code == 0, result.output
    rows = {line.split("\t")[2]: line for line in result.stdout.splitlines() if "\t" in line}
    assert "not sent" in rows["a1"]
    assert "not sent" not in rows["u1"] and "not sent" not in rows["u2"]
