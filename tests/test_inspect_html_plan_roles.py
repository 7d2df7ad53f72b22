"""`inspect --html` and `report --html` over a plan whose `preserve_roles` another tool
changed into something that is not a JSON list of roles (not JSON, a list of numbers): both
crashed with a traceback (`JSONDecodeError`). The page now shows the conversation, its turns
kept raw by role judged by the default roles, as for a conversation with no plan."""

from __future__ import annotations

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
    # The system prompt is kept raw as the default roles say, as under the sound plan.
    html, sound = page.read_text(encoding="utf-8"), fine.read_text(encoding="utf-8")
    assert html.count("preserved") == sound.count("preserved") > 0
    report = tmp_path / "report.html"
    done = run("report", str(db), "--html", str(report))
    assert done.exit_code == 0, done.output
    assert len(list((tmp_path / "report.pages").iterdir())) == 2
