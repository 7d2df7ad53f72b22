"""IDs and reasons on the HTML pages read as what they are (SPEC §15.7's rule for the
terminal, on the page): a bidirectional override, an isolate, a line separator or a control
character in a conversation ID, a turn ID or a reason is spelled out (`\\u202e`), never
applied. Applied, `"\\u202eevil\\u202c"` shows as "live", another conversation's name — one an
operator may then purge or delete. Bodies and summary text keep their characters (right-to-
left text needs its marks)."""

from __future__ import annotations

from pathlib import Path

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("identifiers-v1", keep_tail=2, min_new_turns=1)
SPOOF = "\u202eevil\u202c"  # shows as "live"
# (A newline is the page's own layout too: `two\nlines` is checked by its spelling.)
HIDDEN = ("\u202e", "\u202c", "\u2066", "\u2069", "\u200f", "\u2028", "\x1b")
IDS = (SPOOF, "live", "\u2066ab\u2069", "two\nlines", "esc\x1b[31mred", "sep\u2028x")
RTL_BODY = "\u05e9\u05dc\u05d5\u05dd \u200fok\u200f"


def _build(db: Path) -> None:
    with SQLiteStore(db) as store:
        for cid in IDS:
            store.append_many(
                cid,
                [{"id": f"t\u202e{n}", "role": "user", "body": RTL_BODY} for n in range(6)],
            )
            assert Compactor(store, POLICY).compact(cid).accepted
        store.purge_through(SPOOF, 1, "retention \u202edeifitrec\u202c", force=True)
        store.edit("live", "t\u202e3", body="changed")  # stale: a row with why


def test_report_and_inspector_pages_spell_out_hidden_characters(tmp_path: Path) -> None:
    db = tmp_path / "ids.db"
    _build(db)
    out = tmp_path / "report.html"
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    report = out.read_text(encoding="utf-8")
    assert not any(char in report for char in HIDDEN)
    assert ">\\u202eevil\\u202c</a>" in report and ">live</a>" in report
    assert ">two\\nlines</a>" in report and ">esc\\x1b[31mred</a>" in report
    pages = sorted((tmp_path / "report.pages").iterdir())
    assert len(pages) == len(IDS)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        head = text.split('<div id="context">')[0].split('<div class="summary-text"')[0]
        assert not any(char in head for char in HIDDEN), page.name
    spoof = next(p for p in pages if p.name.startswith("evil-"))
    text = spoof.read_text(encoding="utf-8")
    assert "<h1>Conversation <code>\\u202eevil\\u202c</code></h1>" in text
    assert "retention \\u202edeifitrec\\u202c" in text
    assert "t\\u202e4" in text  # a turn ID in the timeline's titles and the sources
    assert RTL_BODY in text  # a body keeps its right-to-left marks


def test_inspect_html_spells_them_out_too(tmp_path: Path) -> None:
    db = tmp_path / "ids.db"
    _build(db)
    out = tmp_path / "one.html"
    result = run("inspect", str(db), SPOOF, "--html", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "<title>ledgerfold · \\u202eevil\\u202c</title>" in text
    assert "<h1>Conversation <code>\\u202eevil\\u202c</code></h1>" in text


def test_a_very_long_id_is_cut_in_the_report_and_whole_on_its_page(tmp_path: Path) -> None:
    """One 3,000-character ID filled the first screen of the report (a hundred lines of it
    above every other conversation that needs attention); it is cut there, counted, and
    shown whole on its own inspector page."""
    long_id = "x" * 2_000 + "/" + "y" * 1_000
    db = tmp_path / "long.db"
    with SQLiteStore(db) as store:
        for cid in (long_id, "short"):
            store.append_many(cid, [{"role": "user", "body": f"turn {n}"} for n in range(6)])
            assert Compactor(store, POLICY).compact(cid).accepted
            current = store.current_summary(cid)
            assert current is not None
            store.edit(cid, current.source_ids[0], body="changed")  # both need attention
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    report = out.read_text(encoding="utf-8")
    shown = "x" * 256 + "<span class=note> … 2,745 more characters</span></a>"
    assert shown in report
    assert report.count(shown) == 1 and "x" * 257 not in report
    assert ">short</a>" in report
    [page] = [p for p in (tmp_path / "report.pages").iterdir() if p.name.startswith("x")]
    assert f"<h1>Conversation <code>{long_id}</code></h1>" in page.read_text(encoding="utf-8")
