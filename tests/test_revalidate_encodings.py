"""Revalidation of a database whose text is stored as UTF-16 (`PRAGMA encoding` set before the
first table: SQLite allows it, and a file made by another tool may be so). The store reads
and writes such a file; revalidation must give the verdicts, the digest audit and the
repairs a UTF-8 file with the same rows gives: no sound row counted as damaged, and every
changed or damaged row still found."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import SQLiteStore
from ledgerfold.revalidate import RevalidationReport, revalidate_database
from ledgerfold.store._schema import CURRENT, TURN_LIVE

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402
from revalidate_support import POLICY  # noqa: E402

ENCODINGS = ["UTF-16le", "UTF-16be"]
# Every way revalidation can be run: worker threads, hashing threads, small runs.
OPTIONS = [
    {"workers": 1},
    {"workers": 2},
    {"workers": 1, "threads": 2},
    {"workers": 2, "batch_turns": 50},
]


def _empty_file(path: Path, encoding: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA encoding = '{encoding}'")
    conn.execute("CREATE TABLE probe (x)")  # the encoding is fixed by the first table
    conn.execute("DROP TABLE probe")
    conn.commit()
    conn.close()


def _encoding(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        encoding: str = conn.execute("PRAGMA encoding").fetchone()[0]
        return encoding
    finally:
        conn.close()


@pytest.fixture(scope="module", params=ENCODINGS)
def utf16_compacted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Every real transcript imported through the store into a UTF-16 file and compacted."""
    path = tmp_path_factory.mktemp("utf16") / "ledger.db"
    _empty_file(path, request.param)
    import_and_compact(path, POLICY)
    assert _encoding(path) == request.param
    return path


def _copy(source_path: Path, target_path: Path) -> Path:
    source = sqlite3.connect(source_path)
    target = sqlite3.connect(target_path)
    source.backup(target)
    source.close()
    target.close()
    return target_path


@pytest.fixture
def utf16_db(utf16_compacted: Path, tmp_path: Path) -> Path:
    path = _copy(utf16_compacted, tmp_path / "utf16.db")
    assert _encoding(path) == _encoding(utf16_compacted)
    return path


def _comparable(report: RevalidationReport) -> dict[str, Any]:
    """What two files holding the same rows must both report (summary IDs are generated per
    file: stale summaries are named by conversation)."""
    return {
        "conversations": report.conversations,
        "checked": report.summaries_checked,
        "current": report.current,
        "stale": sorted(
            (item.conversation_id, item.reason, item.turn_id) for item in report.stale_summaries
        ),
        "turns_hashed": report.turns_hashed,
        "bytes_hashed": report.bytes_hashed,
        "digests_checked": report.digests_checked,
        "digests_wrong": report.digests_wrong,
        "turns_damaged": report.turns_damaged,
        "wrong_digests": sorted(report.wrong_digests),
    }


def _current_summaries(path: Path) -> dict[str, str]:
    with SQLiteStore(path) as store:
        return {
            conversation_id: summary.id
            for conversation_id in store.conversation_ids()
            if (summary := store.current_summary(conversation_id)) is not None
        }


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: repr(options))
def test_a_sound_utf16_database_has_no_damaged_row(
    utf16_db: Path, db: Path, options: dict[str, int]
) -> None:
    """Every audited row of a UTF-16 file used to be counted damaged (its text was read as
    UTF-16 bytes and decoded as UTF-8)."""
    expected = revalidate_database(db, mark_stale=False, **options)
    assert expected.turns_damaged == expected.digests_wrong == expected.stale == 0
    report = revalidate_database(utf16_db, mark_stale=False, **options)
    assert report.digests_checked > 0
    assert _comparable(report) == _comparable(expected)


def test_revalidating_a_sound_utf16_database_changes_nothing(utf16_db: Path) -> None:
    before = _current_summaries(utf16_db)
    report = revalidate_database(utf16_db)
    assert (report.stale, report.digests_wrong, report.digests_repaired) == (0, 0, 0)
    assert report.turns_damaged == 0
    assert _current_summaries(utf16_db) == before


def _pick(path: Path) -> dict[str, tuple[int, str, str]]:
    """(pk, conversation, turn) of rows to damage, each in a conversation of its own: a turn
    a current summary cites, and live turns none cites."""
    conn = sqlite3.connect(path)
    try:
        cited = conn.execute(
            "SELECT t.pk, t.conversation_id, t.id FROM conversations AS c"
            " JOIN summaries AS s ON s.pk = c.current_summary"
            " JOIN summary_sources AS ss ON ss.summary_pk = s.pk"
            " JOIN turns AS t ON t.conversation_id = c.id AND t.id = ss.turn_id"
            f" WHERE s.status = '{CURRENT}' ORDER BY t.conversation_id, t.sequence"
        ).fetchall()
        uncited = conn.execute(
            "SELECT t.pk, t.conversation_id, t.id FROM turns AS t WHERE t.state = ? AND NOT"
            " EXISTS (SELECT 1 FROM conversations AS c JOIN summaries AS s"
            " ON s.pk = c.current_summary JOIN summary_sources AS ss ON ss.summary_pk = s.pk"
            " WHERE c.id = t.conversation_id AND ss.turn_id = t.id)"
            " ORDER BY t.conversation_id, t.sequence",
            (TURN_LIVE,),
        ).fetchall()
    finally:
        conn.close()
    picked: dict[str, tuple[int, str, str]] = {}
    used: set[str] = set()
    for name, rows in (("cited", cited), ("tail-body", uncited), ("tail-role", uncited)):
        row = next(row for row in rows if row[1] not in used)
        used.add(row[1])
        picked[name] = row
    return picked


_DAMAGE = {
    "cited": "UPDATE turns SET body = body || 'é' WHERE pk = ?",
    "tail-body": "UPDATE turns SET body = body || 'é' WHERE pk = ?",
    "tail-role": "UPDATE turns SET role = 'admin' WHERE pk = ?",
}


def _damage(path: Path) -> dict[str, tuple[int, str, str]]:
    picked = _pick(path)
    conn = sqlite3.connect(path)
    for name, (pk, _, _) in picked.items():
        conn.execute(_DAMAGE[name], (pk,))
    conn.commit()
    conn.close()
    return picked


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: repr(options))
def test_a_changed_or_damaged_row_of_a_utf16_database_is_still_found(
    utf16_db: Path, db: Path, options: dict[str, int]
) -> None:
    """The same damage in a UTF-8 and a UTF-16 file gives the same report: a changed cited
    body makes its summary stale (the rest of that conversation is audited), a changed body
    no summary cites is a wrong digest, a role no turn can have is a damaged row."""
    picked = _damage(db)
    assert {name: row[1:] for name, row in _damage(utf16_db).items()} == {
        name: row[1:] for name, row in picked.items()
    }
    expected = revalidate_database(db, mark_stale=False, **options)
    report = revalidate_database(utf16_db, mark_stale=False, **options)
    assert [(item.conversation_id, item.reason) for item in report.stale_summaries] == [
        (picked["cited"][1], "source-modified")
    ]
    assert sorted(report.wrong_digests) == sorted([picked["cited"][1:], picked["tail-body"][1:]])
    assert report.turns_damaged == 1
    assert _comparable(report) == _comparable(expected)


def test_a_changed_row_of_a_utf16_database_is_repaired(utf16_db: Path) -> None:
    picked = _damage(utf16_db)
    report = revalidate_database(utf16_db)
    assert (report.stale, report.digests_wrong, report.digests_repaired) == (1, 2, 2)
    again = revalidate_database(utf16_db, mark_stale=False)
    assert (again.stale, again.digests_wrong, again.turns_damaged) == (0, 0, 1)
    with SQLiteStore(utf16_db) as store:
        assert store.current_summary(picked["cited"][1]) is None
