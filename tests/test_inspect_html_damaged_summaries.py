"""The inspector page (`inspect --html`, and `report --html`'s page of each conversation)
of a conversation with a summary record changed outside ledgerfold so that the store cannot
read it back (its text, plan or rejected source list, or a source ID of its source list,
not UTF-8 or not JSON): `inspect --html` failed with one error line and wrote no page, and
`report --html` wrote none for it (a warning). The page is now written: the store's error
named above the versions, which are listed as stored, the unreadable record marked, and the
context (which falls back past such a record) or why it cannot be assembled."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
SECRET = "secret-summary-text"
_NOT_UTF8 = f"CAST(X'{SECRET.encode().hex()}ff' AS TEXT)"
_CURRENT = "pk = (SELECT current_summary FROM conversations WHERE id = 'damaged')"
_RUN = f"run_pk = (SELECT source_run FROM summaries WHERE {_CURRENT})"
#: Damage to a summary record of `damaged`, and whether the versions table marks the record
#: (a record whose source list is damaged reads as a record; its sources do not).
DAMAGE = {
    "current-text": (f"UPDATE summaries SET text = {_NOT_UTF8} WHERE {_CURRENT}", True),
    "older-text": (
        f"UPDATE summaries SET text = {_NOT_UTF8}"
        f" WHERE conversation_id = 'damaged' AND NOT {_CURRENT}",
        True,
    ),
    "plan": (f"UPDATE summaries SET plan_id = {_NOT_UTF8} WHERE {_CURRENT}", True),
    "rejected-ids": (
        f"UPDATE summaries SET rejected_source_ids = 'not json' WHERE {_CURRENT}",
        True,
    ),
    "source-id": (
        f"UPDATE run_sources SET turn_id = {_NOT_UTF8} WHERE {_RUN} AND position = 1",
        False,
    ),
    "source-blob": (
        f"UPDATE run_sources SET turn_id = X'00ff' WHERE {_RUN} AND position = 1",
        False,
    ),
}


def _ledger(path: Path, damage: str) -> None:
    with SQLiteStore(path) as store:
        for cid in ("damaged", "fine"):
            store.append(cid, "system", "sys prompt")
            for n in range(1, 7):
                store.append(cid, "user" if n % 2 else "assistant", f"turn {n}")
                if n in (4, 6):
                    assert Compactor(store, POLICY).compact(cid, force=True).accepted
    with sqlite3.connect(path) as conn:  # another tool's write
        assert conn.execute(DAMAGE[damage][0]).rowcount == 1
    conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_page_names_the_unreadable_summary_record(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "agent.db"
    _ledger(db, damage)
    out = tmp_path / "damaged.html"
    done = run("inspect", str(db), "damaged", "--html", str(out))
    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    assert SECRET not in page
    assert 'id="summary-damage"' in page
    versions = page.split('<table id="versions">', 1)[1].split("</table>", 1)[0]
    assert versions.count("<tr") == 3  # the header and both records, as stored
    marked = versions.count("record changed outside ledgerfold")
    assert marked == (1 if DAMAGE[damage][1] else 0)
    fine = tmp_path / "fine.html"
    assert run("inspect", str(db), "fine", "--html", str(fine)).exit_code == 0
    assert 'id="summary-damage"' not in fine.read_text(encoding="utf-8")
    report = run("report", str(db), "--html", str(tmp_path / "report.html"))
    assert report.exit_code == 0, report.output
    assert "2 inspector pages" in report.stdout and "warning" not in report.stderr
