"""After a retention purge, the summary the purge sealed keeps its marker of omitted turn
lines as written ("[59 turn lines omitted among sequences 3–95; recall_history returns
them]"), though recall never returns purged text (SPEC §16.1). The marker is stored summary
text, and the context frames it as SPEC §16.5 says: the inspector page, where an operator
reads it, now says beside it which of those lines recall can no longer return. Real
transcripts, compacted and purged through the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_support import run

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "openhands.jsonl"
CONVERSATION = "openhands/multi-swe-bench/ponylang__ponyc-4588"
MARKER = re.compile(r"\[(\d+) (?:earlier )?turn lines omitted[^\]]*sequences (\d+)–(\d+);")


def _compacted(tmp_path: Path) -> tuple[Path, int, int]:
    """The conversation compacted; the range of the lines its summary's marker omits."""
    db = tmp_path / "agent.db"
    assert run("import", str(db), str(DATA)).exit_code == 0
    result = run("compact", str(db), "--conversation", CONVERSATION, "--keep-tail", "6")
    assert result.exit_code == 0, result.output
    shown = run("context", str(db), CONVERSATION, "--json")
    text = json.loads(shown.stdout)["messages"][1]["content"]
    found = MARKER.search(text)
    assert found is not None, "the summary omits lines"
    return db, int(found.group(2)), int(found.group(3))


def _page(db: Path, tmp_path: Path) -> tuple[str, str]:
    """The page's summary text and its context section."""
    out = tmp_path / "page.html"
    result = run("inspect", str(db), CONVERSATION, "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    summary = page.split('id="summary-text"')[1].split("</div></div>")[0]
    return summary, page.split("<h2>Context as the model sees it</h2>")[1]


def test_the_marker_says_what_the_purge_took(tmp_path: Path) -> None:
    db, first, last = _compacted(tmp_path)
    summary, _ = _page(db, tmp_path)
    assert "purged-note" not in summary  # nothing purged: the marker holds
    result = run(
        "purge", str(db), CONVERSATION, "--through", str((first + last) // 2), "--reason", "gdpr"
    )
    assert result.exit_code == 0, result.output
    # The purge stops before a tool call whose result it would leave (SPEC §17.2, §17.7).
    boundary = json.loads(run("inspect", str(db), CONVERSATION, "--json").stdout)
    through = boundary["history_boundary"]["through_sequence"]
    assert first < through <= (first + last) // 2
    summary, context = _page(db, tmp_path)
    marker = next(line for line in summary.split('<div class="sline">') if "omitted" in line)
    assert "recall_history returns them]" in marker  # the stored text, as written
    assert (
        f'<span class="purged-note">turns through sequence {through} were purged (gdpr):'
        f" recall_history can return only those after sequence {through}</span>"
    ) in marker
    assert "purged-note" not in context  # what the model is sent is shown as it is
    assert summary.count("purged-note") == 1


def test_a_purge_below_the_omitted_lines_adds_nothing(tmp_path: Path) -> None:
    db, first, _ = _compacted(tmp_path)
    assert first > 2
    result = run("purge", str(db), CONVERSATION, "--through", "2", "--reason", "gdpr")
    assert result.exit_code == 0, result.output
    summary, _ = _page(db, tmp_path)
    assert "purged-note" not in summary


def test_a_purge_through_every_omitted_line(tmp_path: Path) -> None:
    db, _, last = _compacted(tmp_path)
    result = run("purge", str(db), CONVERSATION, "--through", str(last), "--reason", "gdpr")
    assert result.exit_code == 0, result.output
    boundary = json.loads(run("inspect", str(db), CONVERSATION, "--json").stdout)
    assert boundary["history_boundary"]["through_sequence"] == last
    summary, _ = _page(db, tmp_path)
    assert (
        f"turns through sequence {last} were purged (gdpr): recall_history returns none of them"
    ) in summary
