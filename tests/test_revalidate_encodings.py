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

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.revalidate import RevalidationReport, revalidate_database
from ledgerfold.store._schema import CURRENT, TURN_LIVE

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402
from revalidate_support import POLICY, encoded_file  # noqa: E402

ENCODINGS = ["UTF-16le", "UTF-16be"]
# Every way revalidation can be run: worker threads, hashing threads, small runs.
OPTIONS = [
    {"workers": 1},
    {"workers": 2},
    {"workers": 1, "threads": 2},
    {"workers": 2, "batch_turns": 50},
]


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
    encoded_file(path, request.param)
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


# ------------------------------------------------------------------ text that is not text

_SMALL_POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
#: A stored text that is not valid in the file's encoding: a byte that is not UTF-8, a lone
#: surrogate in UTF-16 (SQLite converts it to bytes that are not UTF-8 either).
_NOT_TEXT = {"UTF-8": "X'ff'", "UTF-16le": "X'00d8'", "UTF-16be": "X'd800'"}
_NOT_TEXT_DAMAGE = {
    "tail-body": "UPDATE turns SET body = CAST({} AS TEXT) WHERE id = 'c1-tail2'",
    "cited-body": "UPDATE turns SET body = CAST({} AS TEXT) WHERE id = 'c1-u2'",
    "tail-id": "UPDATE turns SET id = CAST({} AS TEXT) WHERE id = 'c1-tail2'",
    "tail-role": "UPDATE turns SET role = CAST({} AS TEXT) WHERE id = 'c1-tail2'",
    "cited-meta": "UPDATE turns SET meta = CAST({} AS TEXT) WHERE id = 'c1-u1'",
    "conversation-key": "UPDATE turns SET conversation_id = CAST({} AS TEXT)"
    " WHERE conversation_id = 'c2'",
    "conversation-key-everywhere": "UPDATE turns SET conversation_id = CAST({} AS TEXT)"
    " WHERE conversation_id = 'c2'; UPDATE conversations SET id = CAST({} AS TEXT)"
    " WHERE id = 'c2'; UPDATE summaries SET conversation_id = CAST({} AS TEXT)"
    " WHERE conversation_id = 'c2'",
}


def _small_ledger(path: Path, encoding: str) -> Path:
    """Two conversations, each with a summary over its older turns and a raw tail; one tail
    turn changed behind the store's back (a wrong digest the audit must find)."""
    if encoding != "UTF-8":
        encoded_file(path, encoding)
    with SQLiteStore(path) as store:
        for c in ("c1", "c2"):
            store.append(c, "system", "sys prompt")
            store.append(c, "user", "hello", id=f"{c}-u1", meta={"k": "v"})
            store.append(c, "user", "more", id=f"{c}-u2")
            for n in range(3):
                store.append(c, "user", f"tail {n}", id=f"{c}-tail{n}")
            assert Compactor(store, _SMALL_POLICY).compact(c, force=True).status == "accepted"
    conn = sqlite3.connect(path)
    conn.execute("UPDATE turns SET body = 'changed' WHERE id IN ('c1-tail1', 'c2-tail1')")
    conn.commit()
    conn.close()
    assert _encoding(path) == encoding
    return path


def _not_text(path: Path, encoding: str, damage: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.executescript(_NOT_TEXT_DAMAGE[damage].format(*[_NOT_TEXT[encoding]] * 3))
    conn.close()


@pytest.mark.parametrize("damage", sorted(_NOT_TEXT_DAMAGE))
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_text_not_valid_in_a_utf16_database_is_damage_not_an_error(
    tmp_path: Path, encoding: str, damage: str
) -> None:
    """A stored text that is not valid UTF-16 (a lone surrogate) is what text that is not
    UTF-8 is in a UTF-8 file: a damaged row or a stale summary, never an exception (the row
    read of a UTF-16 file failed the whole revalidation), and the live turns under a
    conversation key that is not text are still audited (they were not found)."""
    expected_path = _small_ledger(tmp_path / "utf8.db", "UTF-8")
    _not_text(expected_path, "UTF-8", damage)
    path = _small_ledger(tmp_path / "utf16.db", encoding)
    _not_text(path, encoding, damage)
    for options in OPTIONS:
        expected = _comparable(revalidate_database(expected_path, mark_stale=False, **options))
        report = _comparable(revalidate_database(path, mark_stale=False, **options))
        # The key that is not text is reported with its bad bytes replaced: not the same
        # bytes in the two files.
        for found in (expected, report):
            found["wrong_digests"] = [
                (c if c in ("c1", "c2") else "?", t) for c, t in found["wrong_digests"]
            ]
            found["stale"] = [
                (c if c in ("c1", "c2") else "?", *rest) for c, *rest in found["stale"]
            ]
        # (A damaged cited body is hashed as its bytes: not as many in the two files.)
        del expected["bytes_hashed"], report["bytes_hashed"]
        assert report == expected
        assert expected["wrong_digests"]  # the tail turn changed behind the store's back


# ------------------------------------------------------------------ the order of keys

#: Conversation keys whose order as UTF-16 bytes is not their code point order.
_KEYS = ["a", "\u0100", "b", "\uff01", "\U0001f600", "z\u00e9", "\u00e9t\u00e9"]


def _keyed_ledger(path: Path, encoding: str) -> Path:
    if encoding != "UTF-8":
        encoded_file(path, encoding)
    with SQLiteStore(path) as store:
        for c in _KEYS:
            for n in range(6):
                store.append(c, "user", f"turn {n}", id=f"t{n}")
            assert Compactor(store, _SMALL_POLICY).compact(c, force=True).status == "accepted"
        store.append("\u0101 without a summary", "user", "raw")
    conn = sqlite3.connect(path)  # one turn no summary covers changed behind the store's back
    conn.execute("UPDATE turns SET body = 'changed' WHERE id = 't5'")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_conversation_keys_are_read_in_the_order_of_a_utf16_file(
    tmp_path: Path, encoding: str
) -> None:
    """Runs read a range of conversation keys and each worker audits one: SQLite orders keys
    by their stored bytes, which in UTF-16 is not code point order. Conversations outside
    the range a run read had their summaries found `source-missing` (and marked stale), and
    rows were audited twice or not at all."""
    expected_path = _keyed_ledger(tmp_path / "utf8.db", "UTF-8")
    path = _keyed_ledger(tmp_path / "utf16.db", encoding)
    for options in [*OPTIONS, {"workers": 3}, {"workers": 3, "batch_turns": 1}]:
        expected = _comparable(revalidate_database(expected_path, mark_stale=False, **options))
        assert expected["stale"] == [] and expected["digests_wrong"] == len(_KEYS)
        assert _comparable(revalidate_database(path, mark_stale=False, **options)) == expected
    before = _current_summaries(path)
    assert len(before) == len(_KEYS)
    revalidate_database(path)
    assert _current_summaries(path) == before


# ------------------------------------------------------------------ random damage


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_random_damage_in_a_utf16_file_is_reported_as_in_a_utf8_one(
    tmp_path: Path, encoding: str, seed: int
) -> None:
    """The audit's random databases (split units, wrong digests, damaged rows and records,
    conversations without a summary), built and damaged alike in a UTF-8 and a UTF-16 file:
    the same report, whatever the workers and runs."""
    from test_revalidate_audit import _build, _damage

    expected_path = tmp_path / "utf8.db"
    _build(expected_path, seed)
    _damage(expected_path, seed)
    path = tmp_path / "utf16.db"
    encoded_file(path, encoding)
    _build(path, seed)
    _damage(path, seed)
    assert _encoding(path) == encoding
    for options in ({"workers": 1}, {"workers": 2}, {"workers": 3, "batch_turns": 7}):
        expected = _by_sequence(
            expected_path, revalidate_database(expected_path, mark_stale=False, **options)
        )
        report = _by_sequence(path, revalidate_database(path, mark_stale=False, **options))
        assert report == expected


def _by_sequence(path: Path, report: RevalidationReport) -> dict[str, Any]:
    """`_comparable`, each turn named by its sequence (the store generated the IDs)."""
    conn = sqlite3.connect(path)
    try:

        def sequence(conversation_id: str, turn_id: str | None) -> object:
            if turn_id is None:
                return None
            row = conn.execute(
                "SELECT sequence FROM turns WHERE conversation_id = ? AND id = ?",
                (conversation_id, turn_id),
            ).fetchone()
            return None if row is None else row[0]

        found = _comparable(report)
        found["stale"] = [(c, reason, sequence(c, t)) for c, reason, t in found["stale"]]
        found["wrong_digests"] = sorted(
            (c, sequence(c, t))
            for c, t in found["wrong_digests"]  # type: ignore[type-var]
        )
        return found
    finally:
        conn.close()
