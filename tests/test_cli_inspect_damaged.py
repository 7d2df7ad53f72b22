"""`ledgerfold inspect` (text and `--json`) of a conversation with a row changed outside
ledgerfold so that the store cannot read it back: a live turn (a body or ID that is not
UTF-8, a meta that is not JSON) or a summary record (its text not UTF-8, its rejected
sources not JSON, a source ID that is not text). It failed with one error line (exit 2),
showing nothing of the conversation; it now shows it, the damaged turn named (ID, sequence,
column) in `damaged_turns` and the unreadable record's error in `summary_damage`, the
versions listed as stored, never the content; exit 0, as `list` and `report` do."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
SECRET = "secret-stored-text"
_NOT_UTF8 = f"CAST(X'{SECRET.encode().hex()}ff' AS TEXT)"
_CURRENT = "pk = (SELECT current_summary FROM conversations WHERE id = 'damaged')"
_TURN = "conversation_id = 'damaged' AND id = "
#: Each damage, and the damaged turn it names (ID, sequence, column) or None: a record's.
DAMAGE = {
    "cited-body": (f"UPDATE turns SET body = {_NOT_UTF8} WHERE {_TURN}'t2'", ("t2", 3, "body")),
    "tail-meta": (f"UPDATE turns SET meta = 'not json' WHERE {_TURN}'t6'", ("t6", 7, "meta")),
    "tail-id": (f"UPDATE turns SET id = CAST(X'ff' AS TEXT) WHERE {_TURN}'t6'", (None, 7, "id")),
    "summary-text": (f"UPDATE summaries SET text = {_NOT_UTF8} WHERE {_CURRENT}", None),
    "rejected-ids": (
        f"UPDATE summaries SET rejected_source_ids = 'not json' WHERE {_CURRENT}",
        None,
    ),
    "source-id": (
        f"UPDATE run_sources SET turn_id = {_NOT_UTF8} WHERE position = 1"
        f" AND run_pk = (SELECT source_run FROM summaries WHERE {_CURRENT})",
        None,
    ),
}


def _ledger(path: Path, damage: str) -> None:
    with SQLiteStore(path) as store:
        for cid in ("damaged", "fine"):
            store.append(cid, "system", "sys prompt", id="t0")
            for n in range(1, 7):
                store.append(cid, "user" if n % 2 else "assistant", f"turn {n}", id=f"t{n}")
            assert Compactor(store, POLICY).compact(cid, force=True).accepted
    with sqlite3.connect(path) as conn:  # another tool's write
        assert conn.execute(DAMAGE[damage][0]).rowcount == 1
    conn.close()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_inspect_shows_the_conversation_and_names_the_damage(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "agent.db"
    _ledger(db, damage)
    done = run("inspect", str(db), "damaged", "--json")
    assert done.exit_code == 0, done.output
    assert SECRET not in done.output
    report = json.loads(done.stdout)
    named = DAMAGE[damage][1]
    if named is None:
        assert report["damaged_turns"] == []
        assert report["summary_damage"] and "summar" in report["summary_damage"]
    else:
        turn_id, sequence, column = named
        (found,) = report["damaged_turns"]
        assert (found["sequence"], found["column"]) == (sequence, column)
        assert found["turn"] == (turn_id or "\ufffd")
        assert report["summary_damage"] is None
        assert report["turns"] == 6  # the live turns the store reads back
    assert len(report["versions"]) == 1
    text = run("inspect", str(db), "damaged")
    assert text.exit_code == 0, text.output
    assert "damaged" in text.stdout and SECRET not in text.output
    sound = json.loads(run("inspect", str(db), "fine", "--json").stdout)
    assert (sound["damaged_turns"], sound["summary_damage"]) == ([], None)
