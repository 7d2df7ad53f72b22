"""A conversation's stored revision that is not a count (text, a float, a negative number:
another tool's write) made `load()`, and a purge's check of the summary it seals, raise
`InvalidInput` ("revision: must be int") as if the caller had passed a bad argument: the
CLI then failed `list`, `report` and `inspect` of the whole database as a usage error (exit
2). It is a row damaged in storage (SPEC §15.5): `StoreError` naming the table, column and
conversation, so the commands list that conversation as damaged and go on."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

import ledgerfold as lf

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from cli_support import run  # noqa: E402

MESSAGE = (
    "damaged row in table conversations, column revision: conversation 'c'; the database"
    " was changed outside ledgerfold"
)


def _damaged(path: Path, revision: str) -> Path:
    with lf.SQLiteStore(path) as store:
        for cid in ("c", "o"):
            store.append_many(
                cid, [{"id": f"{cid}{n}", "role": "user", "body": f"turn {n}"} for n in range(6)]
            )
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert lf.Compactor(store, policy).compact("c").accepted
    with sqlite3.connect(path) as conn:  # another tool's write
        conn.execute(f"UPDATE conversations SET revision = {revision} WHERE id = 'c'")
    conn.close()
    return path


@pytest.mark.parametrize("revision", ["'three'", "2.5", "-1"])
def test_load_and_purge_name_the_damaged_revision(tmp_path: Path, revision: str) -> None:
    path = _damaged(tmp_path / "r.db", revision)
    before = path.read_bytes()
    with lf.SQLiteStore(path) as store:
        with pytest.raises(lf.StoreError) as caught:
            store.load("c")
        assert str(caught.value) == MESSAGE
        with pytest.raises(lf.StoreError) as caught:
            store.purge_through("c", 2, "retention")
        assert str(caught.value) == MESSAGE
        assert len(store.load("o").turns) == 6  # the other conversation reads
    assert path.read_bytes() == before


def test_list_names_the_conversation_damaged_and_goes_on(tmp_path: Path) -> None:
    path = _damaged(tmp_path / "l.db", "'three'")
    result = run("list", "--json", str(path))
    assert result.exit_code == 0, result.output
    rows = {row["conversation"]: row for row in json.loads(result.stdout)}
    assert rows["c"]["status"] == "damaged" and rows["c"]["reason"] == MESSAGE
    assert rows["o"]["turns"] == 6
    assert run("inspect", str(path), "o").exit_code == 0


def test_inspect_names_it_and_report_html_writes_the_others(tmp_path: Path) -> None:
    """`inspect` and the inspector page read the ledger leniently to mark damaged turns; a
    damaged revision makes no ledger there: the store's error is named (it said 'revision:
    must be int'), and `report --html` writes its page and the others'."""
    path = _damaged(tmp_path / "i.db", "'three'")
    result = run("inspect", str(path), "c")
    assert MESSAGE in result.output, result.output
    out = tmp_path / "report.html"
    result = run("report", "--html", str(out), str(path))
    assert result.exit_code == 0, result.output
    assert f"no inspector page for c: {MESSAGE}" in result.output
    assert (tmp_path / "report.pages").is_dir() and out.is_file()
