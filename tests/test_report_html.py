"""`ledgerfold report --html` as an operator's page (SPEC §17.8): the store's
totals first (exactly `stats()`), then the conversations that need attention, each with why,
then the rest; every listed conversation linked to its own inspector page, written beside
the report under a safe, unique file name; every ID and reason escaped.

The database is real: the repository's agent transcripts imported into a file, some
compacted, edited (stale), failed, purged; plus conversations with hostile IDs."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, ExtractiveSummarizer, SQLiteStore
from ledgerfold._cli import _page_names, html, html_data, html_report
from ledgerfold._cli._page_names import page_names

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
POLICY = CompactionPolicy("report-v1", keep_tail=4, min_new_turns=1)
LONG_UNICODE = "Überprüfung/計画/" + "ß" * 200 + "/🙂"
HOSTILE = ("../x", "a/b", "<script>alert(1)</script>", LONG_UNICODE, "..", "A", "a")
FAILURE = "model said <script>alert('why')</script>"
NAME = re.compile(r"^[a-z0-9_-]{1,40}-[0-9a-f]{16}\.html$")


class _Page(HTMLParser):
    """Links, tags, and the text of each table's rows by table ID."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.tags: list[str] = []
        self.rows: dict[str, list[str]] = {}
        self.stats: dict[str, str] = {}
        self._table: str | None = None
        self._stat: str | None = None
        self._text: list[str] = []
        self._glue = False  # after a <wbr>: the text goes on

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        self._glue = tag == "wbr"
        if tag == "a" and values.get("href"):
            self.hrefs.append(values["href"] or "")
        if tag == "table":
            self._table = values.get("id")
            self.rows[self._table or ""] = []
        if tag == "tr":
            self._text = []
        if tag == "div" and values.get("data-stat"):
            self._stat = values["data-stat"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self._table is not None:
            self.rows[self._table].append("|".join(self._text))
        if tag == "table":
            self._table = None
        if tag == "div":
            self._stat = None

    def handle_data(self, data: str) -> None:
        if self._glue and self._text:
            self._text[-1] += data
        else:
            self._text.append(data)
        self._glue = False
        if self._stat is not None and self._stat not in self.stats:
            self.stats[self._stat] = data


def parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def build_db(path: Path) -> dict[str, set[str]]:
    """Import the transcripts and make every kind of trouble; returns the IDs of each kind."""
    files = [str(DATA / f"{name}.jsonl") for name in ("docent_inspect", "openhands", "swe_agent")]
    result = run("import", str(path), *files)
    assert result.exit_code == 0, result.output
    kinds: dict[str, set[str]] = {"stale": set(), "failed": set(), "purged": set()}
    with SQLiteStore(path) as store:
        ids = store.conversation_ids()
        compactor = Compactor(store, POLICY, ExtractiveSummarizer())
        for cid in ids[:12]:
            compactor.compact(cid, force=True)
        for cid in ids[:2]:  # an edit of a covered turn: the summary goes stale
            current = store.current_summary(cid)
            assert current is not None
            store.edit(cid, current.source_ids[1], body="corrected")
            kinds["stale"].add(cid)
        for cid in ids[2:4]:  # failed after the last accepted summary
            plan = store.start_plan(cid, 4, POLICY.version)
            store.record_failure(plan.plan_id, FAILURE)
            kinds["failed"].add(cid)
        # Failed, then compacted again: the failure is history, not a problem now.
        plan = store.start_plan(ids[4], 4, POLICY.version)
        store.record_failure(plan.plan_id, "transient")
        store.append_many(
            ids[4], [{"id": f"late{k}", "role": "user", "body": "one more thing"} for k in range(6)]
        )
        assert compactor.compact(ids[4], force=True).status == "accepted"
        # Purged with a current summary (fine), and without one (attention).
        store.purge_through(ids[5], 2, "retention", force=True)
        for cid in ids[20:22]:
            store.purge_through(cid, 3, "retention <b>", force=True)
            kinds["purged"].add(cid)
        for n, cid in enumerate(HOSTILE):
            store.append_many(
                cid, [{"id": f"h{k}", "role": "user", "body": f"body {k}"} for k in range(6)]
            )
            if n < 3:
                plan = store.start_plan(cid, 2, POLICY.version)
                store.record_failure(plan.plan_id, FAILURE)
                kinds["failed"].add(cid)
    return kinds


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, set[str]]]:
    directory = tmp_path_factory.mktemp("report")
    db = directory / "agents.db"
    kinds = build_db(db)
    out = directory / "out" / "report.html"
    out.parent.mkdir()
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    assert "inspector pages in" in result.stdout
    return db, out, kinds


def _flatten(stats: dict[str, object]) -> dict[str, int]:
    flat: dict[str, int] = {}
    for key, value in stats.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            assert isinstance(value, int)
            flat[key] = value
    return flat


def test_totals_are_the_stores_stats(report: tuple[Path, Path, dict[str, set[str]]]) -> None:
    db, out, _ = report
    with SQLiteStore(db, read_only=True) as store:
        expected = _flatten(store.stats().as_dict())
    text = out.read_text(encoding="utf-8")
    shown = {key: int(value.replace(",", "")) for key, value in parse(text).stats.items()}
    # The fallbacks are shown by reason and as one total.
    assert shown.pop("fallbacks") == sum(
        n for key, n in expected.items() if key.startswith("fallbacks.")
    )
    assert shown == expected
    assert expected["fallbacks.no-summary"] > 0  # never-compacted transcripts
    # The trouble made above shows in them: nothing vacuous.
    assert expected["summaries.stale"] >= 2 and expected["summaries.failed"] == 6
    assert expected["purged_without_summary"] == 2 and expected["turns_purged"] > 0
    assert text.index('id="totals"') < text.index('id="attention"')


def test_attention_first_each_with_why(report: tuple[Path, Path, dict[str, set[str]]]) -> None:
    db, out, kinds = report
    text = out.read_text(encoding="utf-8")
    page = parse(text)
    attention = page.rows["attention"][1:]
    others = page.rows["conversations"][1:]
    assert text.index('id="attention"') < text.index('id="conversations"')
    flagged = {row.split("|")[0] for row in attention}
    assert flagged == kinds["stale"] | kinds["failed"] | kinds["purged"]
    with SQLiteStore(db, read_only=True) as store:
        everyone = set(store.conversation_ids())
        assert {row.split("|")[0] for row in others} == everyone - flagged
        # The oracle per conversation: stats() of that one, and its summary history.
        for cid in everyone:
            one = store.stats(cid)
            stale = any(r.startswith("stale-summary:") for r in one.fallbacks)
            assert stale == (cid in kinds["stale"]), cid
            assert bool(one.purged_without_summary) == (cid in kinds["purged"]), cid
        for row in attention:
            cid = row.split("|")[0]
            if cid in kinds["stale"]:
                (reason,) = [r.reason for r in store.summary_history(cid) if r.status == "stale"]
                assert f"stale summary ({reason})" in row
            if cid in kinds["failed"]:
                since = (
                    ", no summary accepted yet"
                    if cid in HOSTILE
                    else " since the last accepted summary"
                )
                assert f"1 failed{since} (newest: {FAILURE})" in row
            if cid in kinds["purged"]:
                assert "purged turns but no current summary" in row
    # The page says how many need attention; nothing was left out.
    assert f"Needs attention ({len(flagged)})" in text and 'id="left-out"' not in text


def test_every_link_resolves_to_its_inspector_page(
    report: tuple[Path, Path, dict[str, set[str]]],
) -> None:
    db, out, _ = report
    page = parse(out.read_text(encoding="utf-8"))
    folder = out.parent / "report.pages"
    with SQLiteStore(db, read_only=True) as store:
        everyone = store.conversation_ids()
    assert len(page.hrefs) == len(everyone)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        unquote(h).split("/")[-1] for h in page.hrefs
    )
    linked: dict[str, str] = {}
    rows = page.rows["attention"][1:] + page.rows["conversations"][1:]
    for href, row in zip(page.hrefs, rows, strict=True):
        assert not urlsplit(href).scheme and not href.startswith("/")
        target = (out.parent / unquote(href)).resolve()
        assert target.parent == folder.resolve() and target.is_file()
        assert NAME.match(target.name), target.name
        inspector = target.read_text(encoding="utf-8")
        cid = row.split("|")[0]
        linked[cid] = target.name
        # It is that conversation's inspector page, linking back to the report.
        inner = parse(inspector)
        assert f"<h1>Conversation <code>{html._e(cid)}</code></h1>" in inspector
        assert 'class="timeline"' in inspector and 'id="context"' in inspector
        assert (target.parent / unquote(inner.hrefs[0])).resolve() == out.resolve()
    assert set(linked) == set(everyone)
    assert len(set(linked.values())) == len(linked)  # "A" and "a" included


def test_hostile_ids_give_safe_names_and_escaped_text(
    report: tuple[Path, Path, dict[str, set[str]]],
) -> None:
    _, out, _ = report
    text = out.read_text(encoding="utf-8")
    page = parse(text)
    assert "script" not in page.tags and "img" not in page.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert html._e(FAILURE) in text and "retention &lt;b&gt;" not in text  # no reason: no row
    for cid in HOSTILE:
        assert f">{html._e(cid)}</a>" in text.replace("<wbr>", "")
    names = [p.name for p in (out.parent / "report.pages").iterdir()]
    assert all(NAME.match(name) for name in names)
    # No page was written outside the folder ("../x" stays inside; "a/b" made no directory).
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html", "report.pages"]
    assert all(p.is_file() for p in (out.parent / "report.pages").iterdir())
    # Never a turn body or a summary text on the report page.
    assert "body 3" not in text and "corrected" not in text and "one more thing" not in text


def test_rows_and_pages_are_capped_and_the_rest_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "agents.db"
    kinds = build_db(db)
    flagged = kinds["stale"] | kinds["failed"] | kinds["purged"]
    monkeypatch.setattr(html_data, "REPORT_ROWS", 5)
    monkeypatch.setattr(html_report, "REPORT_ROWS", 5)
    out = tmp_path / "r.html"
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    page = parse(text)
    with SQLiteStore(db, read_only=True) as store:
        total = len(store.conversation_ids())
    # Problems first: the five listed all need attention; the rest are counted.
    assert len(page.rows["attention"]) == 6 and "conversations" not in page.rows
    assert len(page.hrefs) == 5 and len(list((tmp_path / "r.pages").iterdir())) == 5
    assert (
        f"{total - 5} more conversations not listed ({len(flagged) - 5} of them need attention)"
        in text
    )


def test_a_file_where_the_pages_go_is_one_error_line(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    with SQLiteStore(db) as store:
        store.append("c", "user", "hello")
    (tmp_path / "r.pages").write_text("mine")
    result = run("report", str(db), "--html", str(tmp_path / "r.html"))
    assert result.exit_code == 2 and result.stderr.startswith("ledgerfold: error: ")
    assert "not a directory" in result.stderr
    assert (tmp_path / "r.pages").read_text() == "mine" and not (tmp_path / "r.html").exists()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=300), unique=True, max_size=30))
def test_page_names_are_safe_and_unique(ids: list[str]) -> None:
    names = page_names(ids)
    assert set(names) == set(ids)
    assert len({name.lower() for name in names.values()}) == len(ids)
    assert all(NAME.match(name) and len(name) <= 62 for name in names.values())
    assert all(_page_names.PAGE_NAME.fullmatch(name) for name in names.values())
    assert page_names(ids) == names  # stable: the same ID gets the same name


def test_a_hash_collision_still_gives_distinct_names(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _page_names._name
    # Every first try collides; the salted retry must tell them apart.
    monkeypatch.setattr(
        _page_names,
        "_name",
        lambda cid, salt: "x-" + "0" * 16 + ".html" if salt == 0 else real(cid, salt),
    )
    names = page_names(["a", "b", "c"])
    assert len(set(names.values())) == 3


def test_a_row_names_only_a_current_summary_as_current(
    report: tuple[Path, Path, dict[str, set[str]]],
) -> None:
    """The "current summary" and "covered" cells say what `current_summary()` says: a stale
    summary is not current (its turns are served raw), so it is not named there."""
    db, out, kinds = report
    text = out.read_text(encoding="utf-8")
    rows = re.findall(r"<tr><td class=mono><a [^>]*>(.*?)</a></td>(.*?)</tr>", text)
    seen = set()
    with SQLiteStore(db, read_only=True) as store:
        for shown_id, cells in rows:
            shown_id = shown_id.replace("<wbr>", "")
            cid = next(c for c in store.conversation_ids() if html._e(c) == shown_id)
            current = store.current_summary(cid)
            (named,) = re.findall(r"<td class=mono>([^<]*)</td>", cells)
            (covered,) = re.findall(r'<td>(\d+)</td><td><div class="bar">', cells)
            assert named == (html._e(current.id) if current else "—"), cid
            assert int(covered) == (len(current.source_ids) if current else 0), cid
            seen.add(cid)
    assert kinds["stale"] <= seen


def test_the_page_claims_nothing_of_revalidation_runs(tmp_path: Path) -> None:
    """The store keeps no log of revalidation runs: after `ledgerfold revalidate` the page
    said "last revalidation: never recorded". It says nothing of them."""
    db = tmp_path / "revalidated.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(8)])
        assert Compactor(store, POLICY, ExtractiveSummarizer()).compact("c").status == "accepted"
    assert run("revalidate", str(db)).exit_code == 0
    page = tmp_path / "report.html"
    result = run("report", str(db), "--html", str(page))
    assert result.exit_code == 0, result.output
    text = page.read_text(encoding="utf-8")
    assert "revalidation" not in text and "never recorded" not in text


def test_a_long_id_wraps_between_its_parts(tmp_path: Path) -> None:
    """An imported ID (`docent/intercode-ctf/gpt-4o/sample15-epoch1`) wraps after a `/`,
    not inside a word ("sampl|e15"): each `/` is a line-break opportunity and a cell breaks
    a word only when a part alone is wider than the column."""
    db = tmp_path / "ids.db"
    cid = "docent/intercode-ctf/gpt-4o/sample15-epoch1"
    with SQLiteStore(db) as store:
        store.append(cid, "user", "hello")
    out = tmp_path / "r.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert ">docent/<wbr>intercode-ctf/<wbr>gpt-4o/<wbr>sample15-epoch1</a>" in text
    assert "word-break:break-all" not in text and "td.mono{overflow-wrap:anywhere}" in text


def test_the_mini_bars_raw_part_is_not_called_the_tail(tmp_path: Path) -> None:
    """A conversation of 12 turns, never compacted: its bar's raw part is all 12 turns, which
    the tooltip called "12 raw tail" (the tail is the newest few)."""
    db = tmp_path / "raw.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    out = tmp_path / "r.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    text = out.read_text(encoding="utf-8")
    assert 'title="12 raw (not covered)"' in text and "raw tail" not in text
