"""`ledgerfold inspect --html` and `ledgerfold report --html`: the page's content, escaping of
everything from the ledger, and the size of a 100k-turn conversation's page."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cli_support import run
from html_ledgers import CONVERSATION, POLICY, SCRIPT, build_purged_db, build_states_db
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold._cli.html_data import MAX_MARKS, aggregate


class _Tags(HTMLParser):
    """Element counts, the classes of the timeline marks and the text of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.classes: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attrs += attrs
        for name, value in attrs:
            if name == "class" and value:
                self.classes.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


def inspect_page(db: Path, conversation: str, tmp_path: Path) -> str:
    out = tmp_path / "out.html"
    result = run("inspect", str(db), conversation, "--html", str(out))
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stdout
    return out.read_text(encoding="utf-8")


@pytest.fixture
def states_page(tmp_path: Path) -> str:
    db = tmp_path / "states.db"
    build_states_db(db)
    return inspect_page(db, CONVERSATION, tmp_path)


def test_every_turn_state_has_a_mark_and_a_legend_entry(states_page: str) -> None:
    tags = parse(states_page)
    marks = Counter(c.split()[1] for c in tags.classes if c.startswith("m "))
    for state in ("raw", "protected", "preserved", "compacted", "retracted"):
        assert marks[state] >= 1, (state, marks)
        assert f'<span class="sw {state}"></span>' in states_page
    text = "".join(tags.text)
    # Reasons show on the marks: the protection reason, and each preserved kind.
    titles = " ".join(v or "" for k, v in tags.attrs if k == "title")
    assert "system role" in titles and "open tool-call group" in titles
    assert "group pinned" in titles and "protected: active-constraint" in titles
    assert "into summary " in titles
    assert "raw tail" in text and "history boundary" in text


def test_band_versions_and_context(tmp_path: Path) -> None:
    db = tmp_path / "states.db"
    build_states_db(db)
    page = inspect_page(db, CONVERSATION, tmp_path)
    with SQLiteStore(db) as store:
        current = store.current_summary(CONVERSATION)
        history = store.summary_history(CONVERSATION)
        assembled = store.context(CONVERSATION, POLICY)
        # The page shows the chat messages: items a request cannot carry are left out (§17.2).
        context_len = len(assembled.items) - assembled.dropped
    assert current is not None
    tags = parse(page)
    assert 'id="band"' in page and f"summary {current.id}" in page
    assert f"{len(current.source_ids)} turns" in page
    # One row per version (plus the header row), with status, fingerprint prefix, parent.
    versions = page.split('id="versions"')[1].split("</table>")[0]
    assert versions.count("<tr") == len(history) + 1
    statuses = {record.status for record in history}
    assert {"stale", "failed", "current"} <= statuses
    for status in statuses:
        assert f"st-{status}" in versions
    assert current.source_fingerprint[:12] in versions
    if current.parent_id:
        assert current.parent_id in versions
    context = page.split('id="context"')[1]
    assert context.count('class="msg') == context_len
    assert 'class="msg summary"' in context
    assert tags.tags["script"] == 0


def test_ledger_text_is_escaped(states_page: str) -> None:
    tags = parse(states_page)
    assert tags.tags["script"] == 0 and tags.tags["img"] == 0
    assert not any(name.startswith("on") for name, _ in tags.attrs)
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in states_page
    # The conversation ID and the failure reason are data too.
    assert "c&lt;b&gt;1&lt;/b&gt;" in states_page and "c<b>1</b>" not in states_page
    assert "model timed out &lt;script&gt;" in states_page
    # Defence in depth: the page allows no script at all.
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'" in states_page


def test_no_network_and_one_file(states_page: str) -> None:
    tags = parse(states_page)
    assert not [name for name, _ in tags.attrs if name in ("src", "srcset")]
    # The only links are to elements of the page itself (a cited line to its source).
    assert all((value or "").startswith("#") for name, value in tags.attrs if name == "href")
    assert tags.tags["link"] == 0 and tags.tags["iframe"] == 0
    assert (
        "http:" not in states_page and "https:" not in states_page and "@import" not in states_page
    )
    assert "url(" not in states_page


def test_each_cited_line_links_to_its_sources(tmp_path: Path) -> None:
    """SPEC §16.3: the summary's lines, each with links to the source turns it cites; the
    links lead to the sources shown below it, which are `cited_sources` exactly."""
    db = tmp_path / "states.db"
    build_states_db(db)
    page = inspect_page(db, CONVERSATION, tmp_path)
    with SQLiteStore(db) as store:
        current = store.current_summary(CONVERSATION)
        assert current is not None
        cited = store.cited_sources(current.id)
    assert cited
    block = page.split('id="summary-text">')[1].split('<details id="sources"')[0]
    lines = block.split('<div class="sline">')[1:]
    assert len(lines) == len(current.text.split("\n"))
    tags = parse(page)
    targets = [value for name, value in tags.attrs if name == "href"]
    ids = {value for name, value in tags.attrs if name == "id"}
    assert targets and all(target is not None and target[1:] in ids for target in targets)
    sources = page.split('<details id="sources" open>')[1].split("</details>")[0]
    for turn in cited:
        assert f"seq {turn.sequence} · {turn.role} · <code>" in sources
        # A cited line carries a link named after the turn it cites.
        assert f'title="{turn.id}">seq {turn.sequence} {turn.role}</a>' in block
    assert sources.count('class="msg') == len(cited)


def test_history_boundary_and_purged_marks(tmp_path: Path) -> None:
    db = tmp_path / "purged.db"
    conversation = build_purged_db(db)
    page = inspect_page(db, conversation, tmp_path)
    tags = parse(page)
    purged = [c for c in tags.classes if c == "m purged t"]
    assert len(purged) == 10  # a small conversation: one mark per turn, named
    assert 'title="seq 1 · p1 · purged: below the history boundary"' in page
    assert 'id="boundary" style="left:25.0000%"' in page  # 10 of 40 turns
    assert "turns through sequence <b>10</b> were purged (retention &lt;script&gt;" in page


def test_aggregate_runs_and_mixed_marks() -> None:
    turns = [(n, "raw", "raw") for n in range(1, 4)] + [
        (4, "protected", "a"),
        (5, "protected", "b"),
    ]
    marks = aggregate(turns)
    assert [(m.state, m.first, m.last, m.start, m.count) for m in marks] == [
        ("raw", 1, 3, 0, 3),
        ("protected", 4, 4, 3, 1),
        ("protected", 5, 5, 4, 1),
    ]
    alternating = [(n, "raw" if n % 2 else "protected", "") for n in range(1, 10_001)]
    long_run = [(n, "compacted", "s") for n in range(10_001, 20_001)]
    marks = aggregate(alternating + long_run, max_marks=100)
    assert len(marks) <= 2 * 100
    assert sum(m.count for m in marks) == 20_000
    assert marks[-1].state == "compacted" and marks[-1].count == 10_000  # long runs stay exact
    mixed = [m for m in marks if m.state == "mixed"]
    assert mixed and all(dict(m.mix).keys() == {"raw", "protected"} for m in mixed)
    # Marks tile the axis: each starts where the previous ended.
    assert all(a.start + a.count == b.start for a, b in itertools.pairwise(marks))


def test_100k_turn_conversation_page_stays_small(tmp_path: Path) -> None:
    db = tmp_path / "big.db"
    turns = [
        {
            "id": f"b{n}",
            "role": "user" if n % 2 else "assistant",
            "body": f"turn {n} " + "x" * 40,
            "protected": n > 5_000 and n % 7 == 0,
            "protection_reason": "audit-evidence" if n > 5_000 and n % 7 == 0 else None,
        }
        for n in range(1, 100_001)
    ]
    with SQLiteStore(db) as store:
        store.append_many("big", turns)
        store.purge_through("big", 5_000, "retention")
    page = inspect_page(db, "big", tmp_path)
    size = len(page.encode("utf-8"))
    tags = parse(page)
    elements = sum(tags.tags.values())
    assert size < 2_000_000, size
    assert elements < 6 * MAX_MARKS, elements
    assert "95,000</b>turns" in page and "5,000</b>purged turns" in page
    assert 'title="seq 1–5000 · 5,000 turns · purged: below the history boundary"' in page
    assert 'class="m mixed"' in page  # every seventh turn protected: runs merged
    assert "messages not shown" in page  # the context is cut to its head and tail


def test_report_lists_conversations_and_problems(tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    build_states_db(db)
    build_purged_db(db)
    out = tmp_path / "report.html"
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    tags = parse(page)
    assert tags.tags["script"] == 0 and tags.tags["img"] == 0
    # The conversation whose last attempt failed needs attention, and so does "p": its
    # turns were purged before it was summarised, so the summary covers none of them
    # (`stats().sealed_lost`). Each links to its inspector page.
    attention = page.split('id="attention"')[1].split("</table>")[0]
    assert attention.count("<tr") == 3 and ">c&lt;b&gt;1&lt;/b&gt;</a>" in attention
    assert "1 failed since the last accepted summary (newest: model timed out &lt;script&gt;" in (
        attention
    )
    assert ">p</a></td>" in attention
    assert "purged turns the current summary does not cover" in attention
    assert 'id="conversations">None.' in page
    problems = page.split('id="problems"')[1].split("</table>")[0]
    assert "st-stale" in problems and "st-failed" in problems
    assert "model timed out &lt;script&gt;" in problems
    assert "revalidation" not in page  # the store keeps no log of revalidation runs


def test_html_errors_are_one_line(tmp_path: Path) -> None:
    db = tmp_path / "purged.db"
    build_purged_db(db)
    result = run("inspect", str(db), "p", "--html", str(tmp_path / "no" / "out.html"))
    assert result.exit_code == 2
    assert result.stderr.startswith("ledgerfold: error: ") and "does not exist" in result.stderr
    result = run("report", str(tmp_path / "missing.db"), "--html", str(tmp_path / "r.html"))
    assert result.exit_code == 2 and "no such database" in result.stderr
    assert SCRIPT not in result.stderr


def test_a_stale_summary_page_gives_the_reason_it_went_stale(tmp_path: Path) -> None:
    """With no current summary, the page assembles the context for the policy version of
    the newest summary (not "v1"), so the fallback it shows is the one `stats()` and the
    report give (`source-modified`), not `policy-mismatch`."""
    db = tmp_path / "stale.db"
    with SQLiteStore(db) as store:
        store.append_many(
            "c", [{"id": f"t{k}", "role": "user", "body": f"b{k}"} for k in range(10)]
        )
        compactor = Compactor(store, CompactionPolicy("prod-7", keep_tail=2, min_new_turns=1))
        assert compactor.compact("c").accepted
        store.edit("c", "t1", body="corrected")
        assert store.stats("c").fallbacks == {"stale-summary:source-modified": 1}
    page = inspect_page(db, "c", tmp_path)
    assert "Fallback: stale-summary:source-modified" in page
    assert "policy-mismatch" not in page


def test_a_current_summary_the_context_cannot_use_is_not_counted_as_compacted(
    tmp_path: Path,
) -> None:
    """`preserved-missing` (SPEC §17.3): the context sends every live turn raw, so the page's
    "raw in context" card counts them all, as its context section shows."""
    db = tmp_path / "missing.db"
    with SQLiteStore(db) as store:
        store.append("c", "system", "prompt", id="sys")
        turns = [{"id": f"t{k}", "role": "user", "body": f"b{k}"} for k in range(8)]
        store.append_many("c", turns)
        compactor = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=1))
        assert compactor.compact("c").accepted
        store.retract("c", "sys")
        assert store.context("c", "v1").fallback == "preserved-missing"
    page = inspect_page(db, "c", tmp_path)
    assert "Fallback: preserved-missing" in page
    assert '<div class="stat"><b>8</b>raw in context</div>' in page


def test_inspect_json_with_html_prints_json_and_writes_the_page(tmp_path: Path) -> None:
    """`--json` output is strict JSON (SPEC §15.7), also when `--html` writes the page."""
    db = tmp_path / "states.db"
    build_states_db(db)
    out = tmp_path / "page.html"
    plain = run("inspect", str(db), CONVERSATION, "--json")
    both = run("inspect", str(db), CONVERSATION, "--json", "--html", str(out))
    assert both.exit_code == 0, both.output
    report = json.loads(both.stdout)
    assert report == {**json.loads(plain.stdout), "html": str(out)}
    assert "<html" in out.read_text(encoding="utf-8")


def test_a_message_that_only_calls_tools_shows_no_null(tmp_path: Path) -> None:
    # Sent with `content: null`; the inspector shows its calls and "(no text)", not "null".
    db = tmp_path / "calls.db"
    with SQLiteStore(db) as store:
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "w", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ],
        )
    page = parse(inspect_page(db, "c", tmp_path))
    text = "".join(page.text)
    assert "tool_calls" in text and "(no text)" in text
    assert "null" not in text


def test_a_conversation_never_compacted_is_not_an_alarm(tmp_path: Path) -> None:
    """Every imported transcript falls back with `no-summary` until it is compacted: the page
    says so as a note, not in the red alert box a stale summary gets."""
    db = tmp_path / "raw.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"b{k}"} for k in range(4)])
    page = inspect_page(db, "c", tmp_path)
    assert (
        '<p class="note" id="fallback">Fallback: no-summary — every turn is sent raw'
        " (not compacted yet).</p>"
    ) in page
    assert 'class="alert"' not in page
    # Nor is every turn of it a "raw tail" in the timeline's key.
    assert "<b>raw</b> 4 <small>sent to the model as written (no summary yet)</small>" in page
    assert "raw tail" not in page
