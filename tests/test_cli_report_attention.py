"""`report --html`'s "Needs attention" names every conversation its totals count as trouble
(the cards `stats()` gives: a context falling back to a stale summary, purged turns with no
current summary, purged turns the current summary does not cover), so an operator who sees a
red card finds the conversations behind it. Real transcripts, compacted, purged, then edited
so that the purged turns' summary is lost (SPEC §17.5)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, Event, SQLiteStore
from ledgerfold._cli import commands_html, html_data

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
POLICY = CompactionPolicy("attention-v1", keep_tail=4, min_new_turns=1)


def _rows(page: str, table: str) -> list[str]:
    if f'<table id="{table}">' not in page:
        return []
    body = page.split(f'<table id="{table}">')[1].split("</table>")[0]
    return body.replace("<wbr>", "").split("<tr>")[2:]  # past the head's row; IDs whole


def _build(db: Path) -> tuple[set[str], list[Event]]:
    result = run("import", str(db), str(DATA / "openhands.jsonl"))
    assert result.exit_code == 0, result.output
    events: list[Event] = []
    lost: set[str] = set()
    with SQLiteStore(db, on_event=events.append) as store:
        compactor = Compactor(store, POLICY, on_event=events.append)
        ids = store.conversation_ids()
        for cid in ids[:6]:
            assert compactor.compact(cid, force=True).accepted
        for cid in ids[:3]:
            # Purge below the summary (it keeps them sealed), then edit a live source of it:
            # with no sealed checkpoint, the next summary is rebuilt from the live turns.
            store.purge_through(cid, store.load(cid).turns[1].sequence, "retention", force=True)
            current = store.current_summary(cid)
            assert current is not None
            live = {turn.id for turn in store.load(cid).turns}
            store.edit(cid, [s for s in current.source_ids if s in live][-1], body="corrected")
            assert compactor.compact(cid, force=True).accepted
            lost.add(cid)
    return lost, events


def test_every_conversation_a_trouble_card_counts_is_listed_with_why(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    lost, events = _build(db)
    assert {e.conversation_id for e in events if e.name == "summary.sealed-lost"} == lost
    out = tmp_path / "report.html"
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    attention = _rows(page, "attention")
    flagged = {row.split("</a>")[0].rsplit(">", 1)[1] for row in attention}
    with SQLiteStore(db, read_only=True) as store:
        assert store.stats().sealed_lost == len(lost)
        trouble = set()
        for cid in store.conversation_ids():
            one = store.stats(cid)
            if (
                one.sealed_lost
                or one.purged_without_summary
                or any(r.startswith("stale-summary:") for r in one.fallbacks)
            ):
                trouble.add(cid)
    assert lost <= trouble
    assert trouble <= flagged, trouble - flagged
    for row in attention:
        if any(f">{cid}</a>" in row for cid in lost):
            assert "purged turns the current summary does not cover" in row
    assert f"Needs attention ({len(flagged)})" in page


def test_a_current_summary_the_context_cannot_use_needs_attention(tmp_path: Path) -> None:
    """A context falling back with `preserved-missing` (SPEC §17.3) or `duplicate-id` (§8)
    is served raw like a stale one: its card is red and its conversation is listed, with
    why, among those that need attention."""
    db = tmp_path / "layout.db"
    assert run("import", str(db), str(DATA / "tau_bench.jsonl")).exit_code == 0
    with SQLiteStore(db) as store:
        compactor = Compactor(store, POLICY)
        missing, clash, fine = store.conversation_ids()[:3]
        for cid in (missing, clash, fine):
            assert compactor.compact(cid, force=True).accepted
        store.retract(missing, store.load(missing).turns[0].id)  # the system prompt
        current = store.current_summary(clash)
        assert current is not None
        store.append(clash, "user", "named like the summary", id=current.id)
        assert store.context(missing, POLICY.version).fallback == "preserved-missing"
        assert store.context(clash, POLICY.version).fallback == "duplicate-id"
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    attention = _rows(page, "attention")
    flagged = {row.split("</a>")[0].rsplit(">", 1)[1]: row for row in attention}
    assert {missing, clash} <= set(flagged)
    assert fine not in flagged
    assert "preserved-missing" in flagged[missing]
    assert "duplicate-id" in flagged[clash]
    for reason in ("preserved-missing", "duplicate-id"):
        assert f'<div class="stat bad" data-stat="fallbacks.{reason}"><b>1</b>' in page


def test_totals_and_rows_are_one_snapshot_when_a_writer_commits_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report of a live database: an edit committed while the report is being read (here,
    just before the rows are read) shows in both the totals and the rows or in neither, so
    the red card's count is the number of conversations listed under it."""
    db = tmp_path / "live.db"
    assert run("import", str(db), str(DATA / "tau_bench.jsonl")).exit_code == 0
    with SQLiteStore(db) as store:
        cid = store.conversation_ids()[0]
        assert Compactor(store, POLICY).compact(cid, force=True).accepted
    real = html_data.gather_database

    def writer_commits_first(*args: Any, **kwargs: Any) -> Any:
        with SQLiteStore(db) as store:
            current = store.current_summary(cid)
            assert current is not None
            store.edit(cid, current.source_ids[-1], body="corrected")
        return real(*args, **kwargs)

    monkeypatch.setattr(commands_html, "gather_database", writer_commits_first)
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    stale = re.search(r'data-stat="fallbacks.stale-summary:source-modified"><b>(\d+)</b>', page)
    assert stale is not None and int(stale.group(1)) == 1
    assert len(_rows(page, "attention")) == 1
    assert 'data-stat="summaries.current"><b>0</b>' in page


def test_a_purge_that_purged_nothing_needs_no_attention(tmp_path: Path) -> None:
    db = tmp_path / "kept.db"
    assert run("import", str(db), str(DATA / "tau_bench.jsonl")).exit_code == 0
    with SQLiteStore(db) as store:
        plain, compacted = store.conversation_ids()[:2]
        assert Compactor(store, POLICY).compact(compacted, force=True).accepted
        for cid in (plain, compacted):
            first = store.load(cid).turns[0]
            assert first.role == "system"  # kept by the purge: nothing is purged
            store.purge_through(cid, first.sequence, "retention")
        assert store.stats().turns_purged == 0
    out = tmp_path / "report.html"
    assert run("report", str(db), "--html", str(out)).exit_code == 0
    page = out.read_text(encoding="utf-8")
    assert _rows(page, "attention") == []


def test_a_summary_damaged_outside_ledgerfold_is_listed_and_the_report_still_written(
    tmp_path: Path,
) -> None:
    """A current summary whose record the store cannot read (text that is not UTF-8, no
    fingerprint) or that names another conversation: the context falls back
    (`stale-summary:damaged-record`, `stale-summary:conversation-mismatch`), so the report
    lists the conversation with why, as `stats()` counts it, and still writes its page
    (one whose record cannot be read too, the record named on it:
    `test_inspect_html_damaged_summaries.py`)."""
    db = tmp_path / "damaged.db"
    assert run("import", str(db), str(DATA / "tau_bench.jsonl")).exit_code == 0
    with SQLiteStore(db) as store:
        compactor = Compactor(store, POLICY)
        text, fingerprint, elsewhere, fine = store.conversation_ids()[:4]
        for cid in (text, fingerprint, elsewhere, fine):
            assert compactor.compact(cid, force=True).accepted
    pointed = "pk = (SELECT current_summary FROM conversations WHERE id = ?)"
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE summaries SET text = CAST(x'ff41' AS TEXT) WHERE {pointed}", (text,))
        conn.execute(
            f"UPDATE summaries SET source_fingerprint = NULL WHERE {pointed}", (fingerprint,)
        )
        conn.execute(f"UPDATE summaries SET conversation_id = 'x' WHERE {pointed}", (elsewhere,))
    result = run("report", str(db), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    why = {row["conversation"]: " ".join(row["why"]) for row in report["attention"]}
    assert set(why) == {text, fingerprint, elsewhere}
    assert "stale summary (damaged-record" in why[text]
    assert "stale summary (damaged-record" in why[fingerprint]
    assert "stale summary (conversation-mismatch" in why[elsewhere]
    assert report["stats"]["fallbacks"]["stale-summary:damaged-record"] == 2
    out = tmp_path / "report.html"
    result = run("report", str(db), "--html", str(out))
    assert result.exit_code == 0, result.output
    flagged = {
        row.split("</a>")[0].rsplit(">", 1)[1]
        for row in _rows(out.read_text("utf-8"), "attention")
        if "</a>" in row
    }
    assert flagged == {text, fingerprint, elsewhere}  # each linked to its page
    assert len(_rows(out.read_text("utf-8"), "attention")) == 3
