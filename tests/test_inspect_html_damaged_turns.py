"""The inspector page (`inspect --html`, and `report --html`'s page of each conversation)
of a conversation with a live turn row changed outside ledgerfold (a body or an ID that is
not UTF-8, a meta that is not JSON, a role the store does not know): `inspect --html` failed
with one error line naming the row and wrote no page, and `report --html` wrote none for it
(a warning). The page is now written: the conversation's other turns as before, the damaged
turn marked `damaged` on the timeline and named (ID, sequence, column) in a list above the
summary, its content never shown; when the context cannot be assembled, the page says why."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
SECRET = "secret-body-text"
#: Damage to one live turn of `damaged` (`{}` its ID), the column it names, and whether the
#: context can still be assembled (the turn is compacted: the summary stands for it).
DAMAGE = {
    "compacted-body": (
        f"body = CAST(X'{SECRET.encode().hex()}ff' AS TEXT)",
        "t2",
        "body",
        True,
    ),
    "tail-body": (f"body = CAST(X'{SECRET.encode().hex()}ff' AS TEXT)", "t6", "body", False),
    "meta": ("meta = 'not json'", "t5", "meta", False),
    "role": ("role = 'bogus'", "t6", "role", False),
    "id": ("id = CAST(X'ff' AS TEXT)", "t6", "id", False),
}


def _ledger(path: Path, damage: str) -> None:
    with SQLiteStore(path) as store:
        for cid in ("damaged", "fine"):
            store.append(cid, "system", "sys prompt", id="t0")
            for n in range(1, 7):
                role = "user" if n % 2 else "assistant"
                store.append(cid, role, f"turn {n}", id=f"t{n}")
            assert Compactor(store, POLICY).compact(cid, force=True).accepted
    change, turn_id, _, _ = DAMAGE[damage]
    with sqlite3.connect(path) as conn:  # another tool's write
        conn.execute(
            f"UPDATE turns SET {change} WHERE conversation_id = 'damaged' AND id = ?", (turn_id,)
        )
    conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_the_page_marks_the_damaged_turn(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "agent.db"
    _ledger(db, damage)
    _, turn_id, column, assembled = DAMAGE[damage]
    out = tmp_path / "damaged.html"
    done = run("inspect", str(db), "damaged", "--html", str(out))
    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    assert SECRET not in page
    named = re.search(r'<div class="alert" id="damaged">(.*?)</div>', page)
    assert named is not None
    shown = "\ufffd" if column == "id" else turn_id
    sequence = int(turn_id[1:]) + 1  # t0 is sequence 1
    assert f"turn <code>{shown}</code> (sequence {sequence}): its <code>{column}</code>" in (
        named.group(1)
    )
    assert page.count('class="m damaged t"') == 1  # on the timeline
    assert "<b>damaged</b> 1" in page  # in the legend
    assert ('id="unsendable"' not in page) == assembled
    fine = tmp_path / "fine.html"
    assert run("inspect", str(db), "fine", "--html", str(fine)).exit_code == 0
    sound = fine.read_text(encoding="utf-8")
    assert 'id="damaged"' not in sound and "<b>damaged</b>" not in sound
    report = run("report", str(db), "--html", str(tmp_path / "report.html"))
    assert report.exit_code == 0, report.output
    assert "2 inspector pages" in report.stdout and "warning" not in report.stderr
