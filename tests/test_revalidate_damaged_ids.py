"""Revalidation of a damaged database where IDs and sealed summaries are concerned: a turn or
source ID that is not UTF-8 text, and damaged live rows beside a sealed summary (one whose
sources were partly purged), are verdicts and counts, never an exception, whichever way the
run is read and however many workers read it; no stored text reaches the report or an
error."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.revalidate import RevalidationReport, revalidate_database

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
#: Makes the packed read of the run holding that turn refuse it: the run is read by rows.
_BY_ROWS = "UPDATE turns SET sequence = '1,2' WHERE id = ?"


def _ledger(path: Path) -> Path:
    """Two conversations, each with a tool call and a summary over its older turns."""
    with SQLiteStore(path) as store:
        for c in ("c1", "c2"):
            store.append(c, "system", "sys prompt")
            store.append(c, "user", "hello there", id=f"{c}-u1")
            calls = json.dumps([{"id": f"{c}-call", "type": "function", "function": {}}])
            store.append_many(
                c,
                [
                    {"role": "assistant", "body": "calling", "id": f"{c}-a1",
                     "meta": {"tool_calls": calls}},
                    {"role": "tool", "body": "result", "id": f"{c}-t1",
                     "meta": {"tool_call_id": f"{c}-call"}},
                ],
            )  # fmt: skip
            store.append(c, "user", "more", id=f"{c}-u2")
            for n in range(3):
                store.append(c, "user", f"tail {n}", id=f"{c}-tail{n}")
            assert Compactor(store, POLICY).compact(c, force=True).status == "accepted"
    return path


def _sql(path: Path, statement: str, *parameters: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(statement, parameters)


def _reports(path: Path) -> list[RevalidationReport]:
    return [
        revalidate_database(path, workers=workers, batch_turns=batch, mark_stale=False)
        for workers in (1, 2)
        for batch in (1, 2000)
    ]


def _same(reports: list[RevalidationReport]) -> RevalidationReport:
    """The reports agree but for the time taken and the workers used."""
    seen = {
        json.dumps({k: v for k, v in r.as_json().items() if k not in ("seconds", "workers")})
        for r in reports
    }
    assert len(seen) == 1, seen
    return reports[0]


@pytest.mark.parametrize("by_rows", [False, True])
def test_an_uncited_turn_id_that_is_not_text_is_a_damaged_row(
    tmp_path: Path, by_rows: bool
) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(path, "UPDATE turns SET id = CAST(X'ff41' AS TEXT) WHERE id = 'c2-tail2'")
    if by_rows:
        _sql(path, _BY_ROWS, "c2-u2")  # c2's summary goes stale: all its live rows audited
    report = _same(_reports(path))
    assert report.turns_damaged == (2 if by_rows else 1)  # and the '1,2' row
    assert report.stale == (1 if by_rows else 0)


@pytest.mark.parametrize("by_rows", [False, True])
def test_a_source_id_that_is_not_text_makes_its_summary_stale(
    tmp_path: Path, by_rows: bool
) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(path, "UPDATE run_sources SET turn_id = CAST(X'ff41' AS TEXT) WHERE turn_id = 'c1-u2'")
    if by_rows:
        _sql(path, _BY_ROWS, "c2-u2")
    report = _same(_reports(path))
    stale = {item.conversation_id: item.reason for item in report.stale_summaries}
    assert stale["c1"] == "source-missing"
    assert ("c2" in stale) == by_rows


SECRET = "SECRET-TEXT"
# Damage to one raw (uncited) row of a conversation whose summary is sealed.
RAW_DAMAGE = {
    "role": "UPDATE turns SET role = 7 WHERE id = ?",
    "body-not-utf8": "UPDATE turns SET body = CAST(X'ff00' AS TEXT) WHERE id = ?",
    "meta-not-json": f"UPDATE turns SET meta = '{SECRET}' WHERE id = ?",
    "meta-number": "UPDATE turns SET meta = '{\"k\": 5}' WHERE id = ?",
    "sequence-text": f"UPDATE turns SET sequence = '{SECRET}' WHERE id = ?",
    "id-not-utf8": "UPDATE turns SET id = CAST(X'ff41' AS TEXT) WHERE id = ?",
}


def _sealed(path: Path) -> Path:
    """c1's summary sealed: its first turns purged, the summary still current."""
    _ledger(path)
    with SQLiteStore(path) as store:
        store.purge_through("c1", 2, "retention")
    report = revalidate_database(path, mark_stale=False)
    assert report.stale == 0 and report.turns_damaged == 0
    return path


@pytest.mark.parametrize("damage", sorted(RAW_DAMAGE))
def test_a_sealed_summary_is_checked_past_a_damaged_raw_row(tmp_path: Path, damage: str) -> None:
    path = _sealed(tmp_path / "s.db")
    _sql(path, RAW_DAMAGE[damage], "c1-tail2")
    report = _same(_reports(path))
    assert report.stale == 0  # the sealed summary does not cite the row
    assert report.turns_damaged == 1
    assert SECRET not in json.dumps(report.as_json())


def test_a_sealed_summary_citing_a_damaged_row_is_source_modified(tmp_path: Path) -> None:
    path = _sealed(tmp_path / "s.db")
    _sql(path, f"UPDATE turns SET sequence = '{SECRET}' WHERE id = 'c1-u2'")
    report = _same(_reports(path))
    assert [(s.conversation_id, s.reason, s.turn_id) for s in report.stale_summaries] == [
        ("c1", "source-modified", "c1-u2")
    ]
    assert SECRET not in json.dumps(report.as_json())


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
@pytest.mark.parametrize("column", ["sequence", "protected"])
def test_a_number_stored_as_text_that_is_not_utf8_is_damage_not_an_error(
    tmp_path: Path, column: str, sealed: bool
) -> None:
    """A sequence or protection flag stored as text whose bytes are not UTF-8 (they are read
    as numbers, not cast) made every read of its run fail: revalidation raised StoreError
    for the whole database. It is a damaged row, and its summary stale when it cites it: a
    sequence as one stored as other text, a flag as `source-modified`."""
    for turn_id, cited in (("c1-tail2", False), ("c1-u2", True)):
        reports = []
        for value in ("CAST(X'ff' AS TEXT)", "'x'"):
            path = (_sealed if sealed else _ledger)(
                tmp_path / f"{column}-{turn_id}-{len(value)}.db"
            )
            _sql(path, f"UPDATE turns SET {column} = {value} WHERE id = ?", turn_id)
            reports.append(_same(_reports(path)))
        report = reports[0]
        assert report.turns_damaged == 1
        stale = [(s.conversation_id, s.reason) for s in report.stale_summaries]
        assert [c for c, _ in stale] == (["c1"] if cited else [])
        if column == "sequence":
            assert [(s.reason, s.turn_id) for s in report.stale_summaries] == [
                (s.reason, s.turn_id) for s in reports[1].stale_summaries
            ]
        else:
            assert [reason for _, reason in stale] == (["source-modified"] if cited else [])


def test_a_through_sequence_that_is_not_utf8_is_a_damaged_record(tmp_path: Path) -> None:
    """A summary's `through_sequence` stored as text that is not UTF-8 was bound back into
    the run's read and failed it: revalidation raised StoreError for the whole database. The
    store cannot read that record: it is `damaged-record`, marked stale, and its
    conversation's rows are audited."""
    path = _ledger(tmp_path / "s.db")
    _sql(
        path,
        "UPDATE summaries SET through_sequence = CAST(X'ff' AS TEXT)"
        " WHERE pk = (SELECT current_summary FROM conversations WHERE id = 'c1')",
    )
    _sql(path, "UPDATE turns SET body = 'changed' WHERE id = 'c1-tail2'")
    report = _same(_reports(path))
    assert [(s.conversation_id, s.reason) for s in report.stale_summaries] == [
        ("c1", "damaged-record")
    ]
    assert report.wrong_digests == (("c1", "c1-tail2"),)
    revalidate_database(path)
    with sqlite3.connect(path) as conn:
        assert conn.execute(
            "SELECT status, reason FROM summaries WHERE typeof(through_sequence) = 'text'"
        ).fetchall() == [("stale", "damaged-record")]
    conn.close()


@pytest.mark.parametrize("column", ["id", "source_count", "source_fingerprint", "through_sequence"])
def test_the_sources_of_a_damaged_record_are_audited(tmp_path: Path, column: str) -> None:
    """A current summary whose record is damaged verifies nothing: every live row of its
    conversation is audited. One whose ID is not UTF-8 could not be named among the damaged
    (it was reported as '?'), so its sources counted as verified: a changed one went
    unreported."""
    path = _ledger(tmp_path / "s.db")
    _sql(path, "UPDATE turns SET body = 'changed' WHERE id IN ('c1-u2', 'c2-u2')")
    _sql(
        path,
        f"UPDATE summaries SET {column} = CAST(X'ff' AS TEXT)"
        " WHERE pk = (SELECT current_summary FROM conversations WHERE id = 'c1')",
    )
    report = _same(_reports(path))
    assert [(s.conversation_id, s.reason) for s in report.stale_summaries] == [
        ("c1", "damaged-record"),
        ("c2", "source-modified"),
    ]
    assert sorted(report.wrong_digests) == [("c1", "c1-u2"), ("c2", "c2-u2")]
    with SQLiteStore(path) as store:
        every_row = len(store.load("c1").turns) + len(store.load("c2").turns)
    assert report.digests_checked == every_row


def test_a_wrong_digest_under_a_blob_key_is_reported_and_the_others_repaired(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        for c in ("a", "e"):
            store.append(c, "user", f"{c} body", id=f"{c}1")
    _sql(path, "UPDATE turns SET body = body || '!'")  # both digests now wrong
    _sql(path, "UPDATE turns SET conversation_id = CAST(conversation_id AS BLOB) WHERE id = 'e1'")
    _sql(path, "UPDATE conversations SET id = CAST(id AS BLOB) WHERE id = 'e'")
    report = revalidate_database(path)  # repairs what it can reach
    assert report.digests_wrong == 2 and report.digests_repaired == 1
    assert json.loads(json.dumps(report.as_json()))["wrong_digests"] == [
        {"conversation": "a", "turn": "a1"},
        {"conversation": "e", "turn": "e1"},
    ]
    again = revalidate_database(path, mark_stale=False)
    assert again.wrong_digests == (("e", "e1"),)


def test_a_current_summary_recording_another_conversation_is_conversation_mismatch(
    tmp_path: Path,
) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(
        path,
        "UPDATE summaries SET conversation_id = 'c2'"
        " WHERE pk = (SELECT current_summary FROM conversations WHERE id = 'c1')",
    )
    with SQLiteStore(path) as store:  # the store's own check says so too
        assert store.context("c1", "v1").fallback == "stale-summary:conversation-mismatch"
    report = _same(_reports(path))
    assert [(s.conversation_id, s.reason) for s in report.stale_summaries] == [
        ("c1", "conversation-mismatch")
    ]
    with SQLiteStore(path) as store:
        c2_summary = store.current_summary("c2")
        assert c2_summary is not None
        raw_in_c2 = len(store.load("c2").turns) - len(c2_summary.source_ids)
        every_row_of_c1 = len(store.load("c1").turns)
    assert report.digests_checked == every_row_of_c1 + raw_in_c2  # c1 audited whole
    revalidate_database(path)  # marks it stale
    with SQLiteStore(path) as store:
        assert store.context("c1", "v1").fallback == "stale-summary:conversation-mismatch"
        assert store.context("c2", "v1").fallback is None


def test_a_pointer_to_another_conversations_summary_leaves_that_summary_alone(
    tmp_path: Path,
) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(
        path,
        "UPDATE conversations SET current_summary ="
        " (SELECT current_summary FROM conversations WHERE id = 'c2') WHERE id = 'c1'",
    )
    report = revalidate_database(path)  # marks what is stale
    assert [(s.conversation_id, s.reason) for s in report.stale_summaries] == [
        ("c1", "conversation-mismatch")
    ]
    with SQLiteStore(path) as store:
        assert store.context("c2", "v1").fallback is None  # c2's own summary is still current
        assert store.context("c1", "v1").fallback == "stale-summary:conversation-mismatch"


def test_a_conversation_key_stored_as_a_blob_is_reported_as_text_and_not_marked(
    tmp_path: Path,
) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(path, "UPDATE conversations SET id = CAST(id AS BLOB) WHERE id = 'c1'")
    report = revalidate_database(path)  # nothing to mark it by: no error either
    stale = json.loads(json.dumps(report.as_json()))["stale_summaries"]
    assert [(item["conversation"], item["reason"]) for item in stale] == [
        ("c1", "conversation-mismatch")
    ]


def test_a_source_id_stored_as_a_blob_reads_as_its_text_in_the_store_too(tmp_path: Path) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(path, "UPDATE run_sources SET turn_id = CAST(turn_id AS BLOB) WHERE turn_id = 'c1-u2'")
    assert _same(_reports(path)).stale == 0
    with SQLiteStore(path) as store:
        assert store.context("c1", "v1").fallback is None  # it raised TypeError
    _sql(path, "UPDATE run_sources SET turn_id = X'ff41' WHERE turn_id = CAST('c1-u2' AS BLOB)")
    with SQLiteStore(path) as store:
        assert store.context("c1", "v1").fallback == "stale-summary:damaged-record"


# A conversation key that is not UTF-8 text: stored as text of bytes that are not UTF-8
# (SQLite stores what it is given), or as a blob. `c1\xff` sorts between c1 and c2, so the
# read by rows of a run holding both (one run: `batch_turns=2000`) reads it.
_NOT_TEXT = "CAST(X'ff41' AS TEXT)"
KEY_DAMAGE: dict[str, list[str]] = {
    "conversation-not-utf8": [f"UPDATE conversations SET id = {_NOT_TEXT} WHERE id = 'c2'"],
    "turns-not-utf8": [
        f"UPDATE turns SET conversation_id = {_NOT_TEXT} WHERE conversation_id = 'c2'"
    ],
    "one-turn-in-range-not-utf8": [
        "UPDATE turns SET conversation_id = CAST(X'6331ff' AS TEXT) WHERE id = 'c1-tail2'"
    ],
    "every-key-not-utf8": [
        f"UPDATE conversations SET id = {_NOT_TEXT} WHERE id = 'c2'",
        f"UPDATE summaries SET conversation_id = {_NOT_TEXT} WHERE conversation_id = 'c2'",
        f"UPDATE turns SET conversation_id = {_NOT_TEXT} WHERE conversation_id = 'c2'",
    ],
    "every-key-a-blob": [
        "UPDATE conversations SET id = X'ff00' WHERE id = 'c2'",
        "UPDATE summaries SET conversation_id = X'ff00' WHERE conversation_id = 'c2'",
        "UPDATE turns SET conversation_id = X'ff00' WHERE conversation_id = 'c2'",
    ],
    "every-key-a-utf8-blob": [
        "UPDATE conversations SET id = CAST(id AS BLOB) WHERE id = 'c2'",
        "UPDATE summaries SET conversation_id = CAST(conversation_id AS BLOB)"
        " WHERE conversation_id = 'c2'",
        "UPDATE turns SET conversation_id = CAST(conversation_id AS BLOB)"
        " WHERE conversation_id = 'c2'",
    ],
}
# What each gives c2's summary: its conversation row no longer points at it by its own key,
# its turns are gone from under its key, or (every key damaged alike) no API call can name
# the conversation, so its summary is never served: a damaged record.
KEY_VERDICT = {
    "conversation-not-utf8": ("\ufffdA", "conversation-mismatch"),
    "turns-not-utf8": ("c2", "source-missing"),
    "one-turn-in-range-not-utf8": None,
    "every-key-not-utf8": ("\ufffdA", "damaged-record"),
    "every-key-a-blob": ("\ufffd\x00", "damaged-record"),
    "every-key-a-utf8-blob": ("c2", "damaged-record"),
}


@pytest.mark.parametrize("by_rows", [False, True])
@pytest.mark.parametrize("damage", sorted(KEY_DAMAGE))
def test_a_conversation_key_that_is_not_text_is_a_verdict_not_an_error(
    tmp_path: Path, damage: str, by_rows: bool
) -> None:
    """It raised `StoreError` (text that is not UTF-8 failed the read) or `InvalidInput` (a
    key that is not `str` reached the native check). Now c2 is reported and every row is
    still hashed, whatever the workers, batches and the way the run is read."""
    path = _ledger(tmp_path / "s.db")
    if by_rows:
        _sql(path, _BY_ROWS, "c1-u2")  # c1's summary goes stale: all its live rows audited
    for statement in KEY_DAMAGE[damage]:
        _sql(path, statement)
    report = _same(_reports(path))
    stale = {(item.conversation_id, item.reason) for item in report.stale_summaries}
    expected = {KEY_VERDICT[damage]} - {None}
    if by_rows:
        expected.add(("c1", "source-reordered"))
    assert stale == expected
    assert report.summaries_checked == 2
    # Each conversation has 8 live rows, 5 of them cited: the audit hashes the 3 others of a
    # conversation whose summary is current, and every row of any other.
    c1_rows = 8 if by_rows else 3
    c2_rows = 3 if KEY_VERDICT[damage] is None else 8
    assert report.digests_checked == c1_rows + c2_rows
    assert report.turns_damaged == (1 if by_rows else 0)  # the '1,2' row
    assert report.digests_wrong == 0


def test_a_wrong_digest_under_a_key_that_is_not_utf8_is_reported_not_repaired(
    tmp_path: Path,
) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(path, "UPDATE turns SET body = body || '!' WHERE id IN ('c1-tail2', 'c2-tail2')")
    for statement in KEY_DAMAGE["every-key-not-utf8"]:
        _sql(path, statement)
    report = revalidate_database(path)  # marks and repairs what it can reach
    assert report.wrong_digests == (("c1", "c1-tail2"), ("\ufffdA", "c2-tail2"))
    assert report.digests_repaired == 1
    assert [(s.conversation_id, s.reason) for s in report.stale_summaries] == [
        ("\ufffdA", "damaged-record")
    ]
    again = revalidate_database(path, mark_stale=False)
    assert again.wrong_digests == (("\ufffdA", "c2-tail2"),)
    with SQLiteStore(path) as store:
        assert store.context("c1", "v1").fallback is None
