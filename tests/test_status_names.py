"""Summary status names have one spelling (issue 26 item 4): `ledgerfold.store._schema`
defines them, the public `SUMMARY_STATUSES` is that tuple, the table's CHECK constraint
allows exactly those, and no other module spells one in quotes in its SQL."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import ledgerfold
from ledgerfold import SQLiteStore
from ledgerfold.store import SUMMARY_STATUSES
from ledgerfold.store import _schema as schema

PACKAGE = Path(ledgerfold.__file__).parent


def test_the_public_statuses_are_the_schemas() -> None:
    assert SUMMARY_STATUSES is schema.SUMMARY_STATUSES
    assert SUMMARY_STATUSES == ("current", "superseded", "stale", "failed", "rejected")


def test_the_check_constraint_allows_exactly_the_statuses(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db"):
        pass
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'summaries'").fetchone()
    finally:
        conn.close()
    allowed = re.search(r"CHECK \(status IN \(([^)]*)\)\)", sql)
    assert allowed is not None
    assert tuple(name.strip(" '") for name in allowed.group(1).split(",")) == SUMMARY_STATUSES


def test_no_module_spells_a_status_in_its_sql() -> None:
    quoted = re.compile("'(" + "|".join(SUMMARY_STATUSES) + ")'")
    spelt = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "_schema.py"
        # SQL strings only: a comment naming a status is prose.
        and any(
            quoted.search(line) and not line.lstrip().startswith("#") and "#" not in line
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    )
    assert spelt == []


def test_no_store_module_compares_a_status_spelt_in_python() -> None:
    """The store's Python compares statuses with the `_schema` names too (`== CURRENT`)."""
    quoted = re.compile('"(' + "|".join(SUMMARY_STATUSES) + ')"')
    spelt = sorted(
        f"{path.name}:{number}"
        for path in (PACKAGE / "store").glob("*.py")
        if path.name != "_schema.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if quoted.search(line)
    )
    assert spelt == []
