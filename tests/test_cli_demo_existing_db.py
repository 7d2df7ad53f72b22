"""`ledgerfold demo --db PATH` on a database that already held conversations (a user's own
ledger, say) silently added a `demo` conversation, its summaries and made-up protected
constraints to it, where `report`, `stats()` and exports count them. It is now refused with
one error line naming the path, writing nothing; `--append` adds the demo conversation under
a fresh name (`demo-2`, ...) and says so. A new or empty file is the demo's, as before."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cli_support import run

DATA = Path(__file__).resolve().parent / "data" / "transcripts" / "openhands.jsonl"


def _ledger(tmp_path: Path) -> Path:
    db = tmp_path / "agent.db"
    result = run("import", str(db), str(DATA))
    assert result.exit_code == 0, result.output
    return db


def _listed(db: Path) -> list[str]:
    result = run("list", str(db), "--json")
    assert result.exit_code == 0, result.output
    return [row["conversation"] for row in json.loads(result.stdout)]


def test_demo_refuses_a_database_that_holds_conversations(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    before = _listed(db)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    result = run("demo", "--db", str(db))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr == (
        f"ledgerfold: error: {db}: holds 5 conversations already; the demo writes its own"
        " database: give a new path, or --append to add the demo conversation to it\n"
    )
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert _listed(db) == before and "demo" not in before


def test_append_adds_it_under_a_fresh_name_and_says_so(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    result = run("demo", "--db", str(db), "--append")
    assert result.exit_code == 0, result.output
    assert f"database kept at {db} (conversation demo, beside its 5 other conversations)" in (
        " ".join(result.stdout.split())
    )
    again = run("demo", "--db", str(db), "--append", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["conversation"] == "demo-2"
    assert {"demo", "demo-2"} < set(_listed(db))


def test_a_new_or_empty_file_is_the_demo_s(tmp_path: Path) -> None:
    for db in (tmp_path / "new.db", tmp_path / "empty.db"):
        if db.name == "empty.db":
            db.touch()  # as `mktemp` leaves it
        result = run("demo", "--db", str(db))
        assert result.exit_code == 0, result.output
        assert f"database kept at {db} (conversation demo)" in " ".join(result.stdout.split())
        assert _listed(db) == ["demo"]
