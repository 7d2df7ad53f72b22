"""Revalidation gives a current summary whose own record the store cannot read the store's
verdict, `damaged-record`: its text (or any other column) stored as text that is not UTF-8,
a text that is no text, a field the store's envelope refuses. The oracle is the store
itself: its context on the same file falls back with `stale-summary:damaged-record`, or
uses the summary. Checked whichever way the run is read and however many workers read it,
in a UTF-8 file and in both UTF-16 ones."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold.revalidate import RevalidationReport, revalidate_database
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store import _summaries as summaries
from revalidate_support import encoded_file

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
ENCODINGS = ["UTF-8", "UTF-16le", "UTF-16be"]
_OF_C1 = " WHERE pk = (SELECT current_summary FROM conversations WHERE id = 'c1')"

#: Changes to c1's current summary the store cannot read past.
DAMAGE = {
    "text-not-utf8": "text = CAST(X'ff41' AS TEXT)",
    "text-not-utf8-after-a-nul": "text = CAST(X'4100ff' AS TEXT)",
    "text-null": "text = NULL",
    "text-a-blob": "text = CAST(text AS BLOB)",
    "plan-not-utf8": "plan_id = CAST(X'ff41' AS TEXT)",
    "reason-not-utf8": "reason = CAST(X'ff41' AS TEXT)",
    "created-at-not-utf8": "created_at = CAST(X'ff41' AS TEXT)",
    "policy-not-utf8": "policy_version = CAST(X'ff41' AS TEXT)",
    "parent-not-utf8": "parent_id = CAST(X'ff41' AS TEXT)",
    "revision-not-utf8": "source_revision = CAST(X'ff41' AS TEXT)",
    "rejected-not-utf8": "rejected_source_ids = CAST(X'ff41' AS TEXT)",
    "rejected-not-json": "rejected_source_ids = 'not json'",
    "policy-null": "policy_version = NULL",
    "plan-a-blob": "plan_id = CAST(plan_id AS BLOB)",
    "plan-blank": "plan_id = char(12288)",
    "parent-blank": "parent_id = ' '",
    "revision-negative": "source_revision = -1",
    "revision-not-an-integer": "source_revision = 1.5",
}
#: Changes the store reads past: the summary stays current.
SOUND = {
    "text-empty": "text = ''",
    "text-blank": "text = char(12288)",
    "text-not-ascii": "text = char(25919, 31574, 8230)",
    "ids-not-ascii": "id = char(25919, 31574), plan_id = char(35745)",
    "parent-not-ascii": "parent_id = char(25919)",
    "reason-a-blob": "reason = X'ff'",
}


def _ledger(path: Path, encoding: str = "UTF-8") -> Path:
    """Two conversations, each with a summary over its older turns and a raw tail."""
    encoded_file(path, encoding)
    with SQLiteStore(path) as store:
        for c in ("c1", "c2"):
            for n in range(6):
                store.append(c, "user", f"hello {n}", id=f"{c}-u{n}")
            assert Compactor(store, POLICY).compact(c, force=True).status == "accepted"
    return path


def _sql(path: Path, statement: str, *parameters: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, parameters)
    conn.close()


def _store_fallback(path: Path) -> str | None:
    with SQLiteStore(path, read_only=True) as store:
        return store.context("c1", POLICY.version).fallback


def _report(path: Path) -> RevalidationReport:
    """The reports of every way of reading the runs agree (time and workers aside)."""
    reports = [
        revalidate_database(path, workers=workers, batch_turns=batch, mark_stale=False)
        for workers in (1, 2)
        for batch in (1, 2000)
    ]
    seen = {
        json.dumps({k: v for k, v in r.as_json().items() if k not in ("seconds", "workers")})
        for r in reports
    }
    assert len(seen) == 1, seen
    return reports[0]


def _verdicts(report: RevalidationReport) -> list[tuple[str, str]]:
    return [(s.conversation_id, s.reason) for s in report.stale_summaries]


@pytest.mark.parametrize("change", list(DAMAGE.values()), ids=list(DAMAGE))
def test_a_record_the_store_cannot_read_is_a_damaged_record(tmp_path: Path, change: str) -> None:
    """Revalidation read a current summary's IDs, fingerprint and bounds only: one whose
    text was not UTF-8 (or no text, or any of these) was reported current, and stayed
    current, while every context of its conversation fell back."""
    path = _ledger(tmp_path / "s.db")
    _sql(path, f"UPDATE summaries SET {change}{_OF_C1}")
    assert _store_fallback(path) == "stale-summary:damaged-record"
    report = _report(path)
    assert _verdicts(report) == [("c1", "damaged-record")]
    assert report.current == 1 and report.summaries_checked == 2
    revalidate_database(path)
    with sqlite3.connect(path) as conn:
        marked = conn.execute(f"SELECT status, reason FROM summaries{_OF_C1}").fetchall()
    conn.close()
    assert marked == [("stale", "damaged-record")]


@pytest.mark.parametrize("change", list(SOUND.values()), ids=list(SOUND))
def test_a_record_the_store_reads_stays_current(tmp_path: Path, change: str) -> None:
    path = _ledger(tmp_path / "s.db")
    _sql(path, f"UPDATE summaries SET {change}{_OF_C1}")
    assert _store_fallback(path) is None
    report = _report(path)
    assert report.stale == 0 and report.current == 2


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_text_that_is_not_text_in_the_file_s_encoding_is_a_damaged_record(
    tmp_path: Path, encoding: str
) -> None:
    """In a UTF-16 file, a text ending in half a surrogate pair cannot be read as UTF-8
    (SQLite converts it so): the store falls back, and revalidation says so."""
    path = _ledger(tmp_path / "s.db", encoding)
    unit = {"UTF-8": "ff41", "UTF-16le": "4100", "UTF-16be": "0041"}[encoding]
    surrogate = {"UTF-8": "ed", "UTF-16le": "00d8", "UTF-16be": "d800"}[encoding]
    _sql(path, f"UPDATE summaries SET text = CAST(X'{unit}{surrogate}' AS TEXT){_OF_C1}")
    assert _store_fallback(path) == "stale-summary:damaged-record"
    assert _verdicts(_report(path)) == [("c1", "damaged-record")]


def test_a_sound_record_is_judged_in_sql_and_only_a_suspect_one_in_python(
    tmp_path: Path,
) -> None:
    """In a UTF-8 file the store's rule runs in Python only on a record the SQL cannot
    vouch for (here, IDs that do not start with printable ASCII); in a UTF-16 file, on
    every record."""
    from ledgerfold.store import _current_summaries as listing

    judged: list[tuple[object, ...]] = []

    def readable(record: tuple[object, ...]) -> bool:
        judged.append(record[1:2])
        return summaries.readable_record(record)

    for encoding, expected in (("UTF-8", [("\u6458",)]), ("UTF-16le", [("\u6458",), ("s-c2",)])):
        path = _ledger(tmp_path / f"{encoding}.db", encoding)
        _sql(path, f"UPDATE summaries SET id = char(25688){_OF_C1}")
        _sql(path, "UPDATE summaries SET id = 's-c2' WHERE conversation_id = 'c2'")
        conn = batch_reads.open_readonly(path)
        try:
            found = listing.current_summaries(conn, readable)
        finally:
            conn.close()
        assert [readable for _, _, readable in found] == [True, True]
        assert sorted(judged) == sorted(expected)
        judged.clear()


_COLUMNS = (
    "id",
    "conversation_id",
    "plan_id",
    "reason",
    "created_at",
    "source_revision",
    "source_fingerprint",
    "policy_version",
    "text",
    "rejected_source_ids",
    "parent_id",
)
_PIECES = ["", " ", "\t", "\u3000", "\u2028", "\xa0", "!", "~", "\x7f", "a", "\u6458", "\x00"]
#: (stored as text made from these bytes, value): any type SQLite stores, and text that is
#: not UTF-8.
_VALUE = st.one_of(
    st.tuples(
        st.just(False), st.none() | st.integers(-2, 2) | st.just(1.5) | st.binary(max_size=2)
    ),
    st.tuples(st.just(False), st.lists(st.sampled_from(_PIECES), max_size=3).map("".join)),
    st.tuples(st.just(True), st.sampled_from([b"\xff", b"a\xed", b"\xc3", b"ok"])),
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger in one file (no WAL), copied afresh for each example."""
    path = _ledger(tmp_path_factory.mktemp("records") / "pristine.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    return path


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_COLUMNS), _VALUE, max_size=4))
def test_the_sql_vouches_only_for_records_the_store_reads(
    pristine: Path, changes: dict[str, tuple[bool, object]]
) -> None:
    """Whatever a record holds, the verdict `current_summaries` gives (most records judged by
    the SQL alone) is the store's rule on the record read whole."""
    from ledgerfold.store import _current_summaries as listing

    path = pristine.with_name("example.db")
    shutil.copyfile(pristine, path)
    assignments = ", ".join(
        f"{column} = CAST(? AS TEXT)" if as_text else f"{column} = ?"
        for column, (as_text, _) in changes.items()
    )
    try:
        if changes:
            _sql(
                path,
                f"UPDATE summaries SET {assignments}{_OF_C1}",
                *[value for _, value in changes.values()],
            )
    except sqlite3.IntegrityError:  # a NOT NULL or UNIQUE column
        return
    conn = batch_reads.open_readonly(path)
    try:
        (pk,) = conn.execute(f"SELECT pk FROM summaries{_OF_C1}").fetchone()
        verdicts = {
            job[1]: readable
            for job, _, readable in listing.current_summaries(conn, summaries.readable_record)
        }
        (record,) = batch_reads.lenient_rows(conn, listing._RECORD_AT, (pk,))
        assert verdicts[pk] == summaries.readable_record(record)
    finally:
        conn.close()
