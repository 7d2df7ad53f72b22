"""Counts of one read as one: "1 conversation", "1 turn", never "1 conversations" nor
"worker(s)", in every command's terminal output (and the pages `report --html` writes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_support import run
from ledgerfold import SQLiteStore

# A count of one followed (within two words) by a plural noun, or a "(s)" plural.
_WRONG = re.compile(
    r"(?<![\d.,])1 (?:[\w-]+ ){0,2}(?:conversations|turns|summaries|hits|versions|rows|parts"
    r"|pages|workers|bytes|sources|messages|characters)\b|\w\(s\)"
)


def _one_of_each(db: Path) -> None:
    """One conversation: a system prompt, a protected turn, and so on, compacted so that its
    summary covers one turn; purging through 3 takes one raw turn and keeps one of each."""
    with SQLiteStore(db) as store:
        store.append_many(
            "c",
            [
                {"role": "system", "body": "be brief"},
                {
                    "role": "user",
                    "body": "mango please",
                    "protected": True,
                    "protection_reason": "active-constraint",
                },
                {"role": "assistant", "body": "a mango"},
                {"role": "user", "body": "thanks"},
            ],
        )


def test_a_count_of_one_is_singular(tmp_path: Path) -> None:
    db = tmp_path / "one.db"
    _one_of_each(db)
    transcript = tmp_path / "one.jsonl"
    turn = {"id": "x1", "sequence": 1, "role": "user", "body": "hi", "tool_call_ids": []}
    line = {"conversation_id": "imported", "source": "s", "turns": [turn]}
    transcript.write_text(json.dumps(line) + "\n", encoding="utf-8")
    commands = [
        ["compact", str(db), "--keep-tail", "1"],
        ["import", str(tmp_path / "fresh.db"), str(transcript)],
        ["import", str(tmp_path / "fresh.db"), str(transcript)],  # one already present
        ["list", str(tmp_path / "fresh.db")],
        ["inspect", str(tmp_path / "fresh.db"), "imported"],
        ["context", str(db), "c"],
        ["inspect", str(db), "c"],
        ["search", str(db), "c", "mango"],
        ["revalidate", str(db), "--workers", "1"],
        ["export", str(db), "--parquet", str(tmp_path / "pq")],
        ["purge", str(db), "c", "--through", "3", "--reason", "r", "--dry-run"],
        ["report", str(db), "--html", str(tmp_path / "r.html")],
        ["inspect", str(db), "c", "--html", str(tmp_path / "i.html")],
    ]
    for args in commands:
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
        output = result.stdout + result.stderr
        assert _WRONG.search(output) is None, (args, _WRONG.search(output), output)
    for page in [tmp_path / "r.html", tmp_path / "i.html"]:
        # The totals' cards too: a number over its label reads "1 conversation".
        text = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
        assert _WRONG.search(" ".join(text.split())) is None, (page, _WRONG.search(text))
    totals = re.findall(r'data-stat="([^"]+)"><b>1</b>([^<]+)<', (tmp_path / "r.html").read_text())
    assert ("conversations", "conversation") in totals
    assert ("summaries.current", "current summary") in totals


def test_counts_of_a_thousand_or_more_are_grouped(tmp_path: Path) -> None:
    """`1,010 turns` in every summary line, as `list` and `report` print them (it was
    `1010 turns` after `imported`, `exported`, `re-hashed` and `rebuilt`)."""
    transcript = tmp_path / "big.jsonl"
    turns = [
        {"id": f"t{n}", "sequence": n, "role": "user", "body": f"turn {n}"} for n in range(1, 1011)
    ]
    line = {"conversation_id": "c", "source": "s", "turns": turns}
    transcript.write_text(json.dumps(line) + "\n", encoding="utf-8")
    db = str(tmp_path / "big.db")
    shown = {
        "import": run("import", db, str(transcript)).stdout,
        "compact": run("compact", db, "--keep-tail", "2").stdout,
        "revalidate": run("revalidate", db, "--workers", "1").stdout,
        "export": run("export", db, "--parquet", str(tmp_path / "pq")).stdout,
        "reindex": run("reindex", db).stdout,
    }
    assert "1,010 turns" in shown["import"], shown["import"]
    assert "re-hashed 1,008 turns" in shown["revalidate"], shown["revalidate"]
    assert "1,010 turns" in shown["export"], shown["export"]
    assert "(1,010 turns)" in shown["reindex"], shown["reindex"]
    for command, text in shown.items():
        assert re.search(r"\b\d{4,} (?:turns|conversations|summaries)", text) is None, command


def test_one_covered_sequence_is_singular(tmp_path: Path) -> None:
    """`inspect` of a summary of one turn said "covers 1 turn (sequences 1)"."""
    db = tmp_path / "one.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(2)])
    assert run("compact", str(db), "--keep-tail", "1").exit_code == 0
    output = run("inspect", str(db), "c").stdout
    assert "covers 1 turn (sequence 1)" in output, output


def test_the_inspector_page_groups_counts_as_the_report_page_does(tmp_path: Path) -> None:
    """The inspector's cards and legend showed `1010 turns` beside the report's `1,010`."""
    db = tmp_path / "big.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(1010)])
    assert run("compact", str(db), "--keep-tail", "2").exit_code == 0
    out = tmp_path / "page.html"
    assert run("inspect", str(db), "c", "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert "<b>1,010</b>turns" in page and "<b>1,008</b>compacted" in page
    assert "<b>compacted</b> 1,008 " in page
    assert re.search(r"\b\d{4,}</b>|</b> \d{4,} ", page) is None
