"""`inspect --html` and `report --html` over a plan whose `preserve_roles` another tool
changed into something that is not a JSON list of roles (not JSON, a list of numbers): both
crashed with a traceback (`JSONDecodeError`). The page now shows the conversation. Its
current summary is a damaged record, as the context has it (`_plan_roles`: the context falls
back, `stale-summary:damaged-record`): the page judged its layout by the default roles (the
system prompt "preserved", the sources "compacted" into a summary the context does not use);
it now names the damaged plan, marks the record, shows no summary in use and the roles as
unreadable, every live turn raw as the context sends it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
DAMAGE = {
    "not-json": "'not json'",
    "not-roles": "'[1, 2]'",
}


def _ledger(path: Path, damage: str) -> None:
    with SQLiteStore(path) as store:
        for cid in ("damaged", "fine"):
            store.append(cid, "system", "sys prompt")
            for n in range(6):
                store.append(cid, "user" if n % 2 == 0 else "assistant", f"turn {n}")
            assert Compactor(store, POLICY).compact(cid, force=True).accepted
    with sqlite3.connect(path) as conn:  # another tool's write
        conn.execute(
            f"UPDATE plans SET preserve_roles = {DAMAGE[damage]} WHERE conversation_id = 'damaged'"
        )
    conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_pages_render_over_a_plan_whose_roles_cannot_be_read(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "agent.db"
    _ledger(db, damage)
    page = tmp_path / "damaged.html"
    done = run("inspect", str(db), "damaged", "--html", str(page))
    assert done.exit_code == 0, done.output
    fine = tmp_path / "fine.html"
    assert run("inspect", str(db), "fine", "--html", str(fine)).exit_code == 0
    html, sound = page.read_text(encoding="utf-8"), fine.read_text(encoding="utf-8")
    # The sound plan's page: its summary in use, the system prompt preserved by role.
    assert 'id="summary-damage"' not in sound and 'class="card" id="summary"' in sound
    assert "preserved roles: system" in sound and "· preserved: system role" in sound
    # The damaged one: the record named and marked, no summary in use, no role known.
    assert 'id="summary-damage"' in html and "column preserve_roles: plan" in html
    assert "damaged-record" in html  # the context's fallback and the record's mark
    assert "record changed outside ledgerfold" in html
    assert 'class="card" id="summary"' not in html
    assert "preserved roles: unreadable" in html
    assert "· preserved:" not in html and "· compacted:" not in html
    report = tmp_path / "report.html"
    done = run("report", str(db), "--html", str(report))
    assert done.exit_code == 0, done.output
    assert len(list((tmp_path / "report.pages").iterdir())) == 2


def test_inspect_says_what_the_page_says(tmp_path: Path) -> None:
    """`inspect` (its `--json`, printed with the page too) named the summary as current, its
    sources and no damage, where the page and the context treat it as a damaged record."""
    db = tmp_path / "agent.db"
    _ledger(db, "not-json")
    page = tmp_path / "damaged.html"
    done = run("inspect", str(db), "damaged", "--json", "--html", str(page))
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    assert found["current_summary"] is None and found["sources"] == []
    assert "column preserve_roles: plan" in found["summary_damage"]
    assert [version["status"] for version in found["versions"]] == ["current"]
    text = run("inspect", str(db), "damaged")
    assert text.exit_code == 0 and "damaged summary record" in text.stdout
    sound = json.loads(run("inspect", str(db), "fine", "--json").stdout)
    assert sound["current_summary"] is not None and sound["summary_damage"] is None
