"""How revalidation reads the database: runs of conversations read packed (one row per
column) or, when a packing cannot hold them, by rows, with the same verdicts on every kind of
damage; only the turns a summary can cite; UTF-16 files; summaries superseded while a run
waits; jobs in SQLite's key order and runs of at most 256 summaries."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    InvalidInput,
    SQLiteStore,
    _native,
    fingerprint_turns,
)
from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold._model import PROTECTION_REASONS, ROLES
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store._rows import turn_from_row

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402
from revalidate_support import POLICY, TAMPERS, _current_jobs, cited_rows, native_verdicts, oracle  # noqa: E402

# Damage of every kind at once, one per summary, for the packed-vs-rows comparison: a
# sequence that is not an integer (the packed form reads it as no sequence, the row form as a
# wrong type: both an invalid turn), and one holding a comma, which misaligns the packed
# integers so that batch falls back to rows.
DAMAGE = [
    *(statement for statement, _ in TAMPERS.values()),
    "UPDATE turns SET sequence = 'x' WHERE pk = ?",
    "UPDATE turns SET protected = 0.5 WHERE pk = ?",
    "UPDATE turns SET role = 7 WHERE pk = ?",
    "UPDATE turns SET body = CAST(body AS BLOB) WHERE pk = ?",
    "UPDATE turns SET role = CAST(role AS BLOB), meta = CAST(meta AS BLOB) WHERE pk = ?",
    "UPDATE turns SET grp = CAST('g-blob' AS BLOB) WHERE pk = ?",
    "UPDATE turns SET grp = 'g-new' WHERE pk = ?",
    "UPDATE turns SET meta = NULL WHERE pk = ?",
]


COMMA_SEQUENCE = "UPDATE turns SET sequence = '1,2' WHERE pk = ?"


def _runs_both_ways(path: Path, batch_turns: int) -> tuple[list[object], list[object], int]:
    """Each run of conversations checked from the packed read and from the row read."""
    conn = batch_reads.open_readonly(str(path))
    packed_runs = 0
    try:
        jobs = revalidate_runs.current_jobs(conn)
        packed, rows = [], []
        for run in revalidate_runs.runs(jobs, batch_turns):
            summaries = [job[:4] for job in run]
            # Every live turn of the run, packed (the check reads up to each summary's bound
            # first, and all of them when a cited turn is missing there).
            turn_columns = batch_reads.packed_turns(conn, run, bounded=False)
            source_columns = batch_reads.packed_sources(conn, run)
            direct = _native.revalidate_columns(turn_columns, source_columns, summaries, 2)
            packed_runs += direct is not None
            packed.append(revalidate_runs.check_run(conn, run, 2, utf8=True))
            rows.append(revalidate_runs.check_run(conn, run, 2, utf8=True, packed=False))
            assert direct is None or direct == packed[-1]
    finally:
        conn.close()
    return packed, rows, packed_runs


def _verdicts_with_one_run_read_by_rows(path: Path) -> dict[str, str | None]:
    """Verdicts by summary ID, after checking that exactly one run fell back to rows and
    that packed and row reads agree."""
    packed, rows, packed_runs = _runs_both_ways(path, batch_turns=500)
    assert packed == rows and packed_runs == len(packed) - 1
    return {v[1]: v[2] for found, _, _ in packed for v in found}


def test_packed_and_row_reads_agree_on_every_kind_of_damage(db: Path) -> None:
    targets = cited_rows(db, len(DAMAGE) * 6 + 1, seed=11, below_slot=True)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    for index, (pk, _, _) in enumerate(targets[1:]):
        conn.execute(DAMAGE[index % len(DAMAGE)], (pk,))
    conn.commit()
    conn.close()
    packed, rows, packed_runs = _runs_both_ways(db, batch_turns=500)
    assert packed == rows
    assert packed_runs == len(packed) > 10  # every run was read packed
    verdicts = {v[1]: v[2] for found, _, _ in packed for v in found}
    for index, (_, _, summary_id) in enumerate(targets[1:]):
        statement = DAMAGE[index % len(DAMAGE)]
        if "CAST(body AS BLOB)" in statement or "CAST(role AS BLOB)" in statement:
            # the same bytes in another storage class: the same turn
            assert verdicts[summary_id] is None, statement
        elif "meta = NULL" not in statement:  # (which may have been NULL already)
            assert verdicts[summary_id] is not None, statement
    # A comma inside an integer column misaligns that run's packing: it falls back to rows.
    conn = sqlite3.connect(db)
    conn.execute(COMMA_SEQUENCE, (targets[0][0],))
    conn.commit()
    conn.close()
    verdicts = _verdicts_with_one_run_read_by_rows(db)
    assert verdicts[targets[0][2]] in {"source-modified", "source-reordered"}


def test_a_source_position_the_packed_key_cannot_hold_reads_that_run_by_rows(db: Path) -> None:
    """Positions are keyed in 28 bits: a larger one (the last source of a summary moved past
    2^28, its order unchanged) makes that run's packing refused; read by rows, the summary
    still checks."""
    conn = sqlite3.connect(db)
    summary_pk, summary_id, last = conn.execute(
        "SELECT s.pk, s.id, max(ss.position) FROM summaries AS s"
        " JOIN summary_sources AS ss ON ss.summary_pk = s.pk WHERE s.status = 'current'"
        " GROUP BY s.pk ORDER BY s.pk LIMIT 1"
    ).fetchone()
    # A version reads the rows of its run below its count: stretch it over the moved row.
    (run_pk,) = conn.execute("SELECT source_run FROM summaries WHERE pk = ?", (summary_pk,))
    conn.execute(
        "UPDATE run_sources SET position = ? WHERE run_pk = ? AND position = ?",
        (1 << 28, run_pk[0], last),
    )
    conn.execute("UPDATE summaries SET source_count = ? WHERE pk = ?", ((1 << 28) + 1, summary_pk))
    conn.commit()
    conn.close()
    verdicts = _verdicts_with_one_run_read_by_rows(db)
    assert verdicts[summary_id] is None and set(verdicts.values()) == {None}


def test_packed_runs_read_turns_up_to_each_summarys_bound(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the turns a summary can cite are read for the check: the newest ones, above its
    `through_sequence`, are not (a run reads them all only when a cited turn is missing).
    The audit hashes every live turn the check did not (those above the bound and those
    below it that the summary does not cite), each once."""
    read: list[int] = []
    audited: list[int] = []
    real = _native.revalidate_columns
    real_audit = _native.audit_columns

    def rows(turn_columns: tuple[str | bytes | None, ...]) -> int:
        keys = turn_columns[0]  # text: the driver gives an aggregate of integers as such
        assert isinstance(keys, str | None)
        return len(keys.split(",")) if keys else 0

    def counting(turn_columns: tuple[str | bytes | None, ...], *rest: Any, **named: Any) -> Any:
        read.append(rows(turn_columns))
        return real(turn_columns, *rest, **named)

    def counting_audit(turn_columns: tuple[str | bytes | None, ...], *rest: Any) -> Any:
        audited.append(rows(turn_columns))
        return real_audit(turn_columns, *rest)

    monkeypatch.setattr(_native, "revalidate_columns", counting)
    monkeypatch.setattr(_native, "audit_columns", counting_audit)
    report = revalidate_database(db, mark_stale=False)
    assert report.stale == 0
    conn = sqlite3.connect(db)
    below, live = conn.execute(
        "SELECT sum(t.sequence <= s.through_sequence), count(*) FROM conversations AS c"
        " JOIN summaries AS s ON s.pk = c.current_summary AND s.status = 'current'"
        " JOIN turns AS t ON t.conversation_id = c.id AND t.state = 0"
    ).fetchone()
    conn.close()
    assert sum(read) == below < live
    assert sum(audited) == report.digests_checked == live - report.turns_hashed


def test_every_role_and_reason_reads_back_packed(db: Path) -> None:
    """The packed flags codes are the SPEC's: rows with every role, and protected with every
    reason, re-hash to the fingerprint the Python Turns give (a summary made to cite them)."""
    conn = sqlite3.connect(db)
    summary_pk, summary_id, conversation_id = conn.execute(
        "SELECT s.pk, s.id, s.conversation_id FROM summaries AS s"
        " JOIN summary_sources AS ss ON ss.summary_pk = s.pk WHERE s.status = 'current'"
        " GROUP BY s.pk HAVING count(*) >= 8 ORDER BY s.pk LIMIT 1"
    ).fetchone()
    cited = [
        turn_id
        for (turn_id,) in conn.execute(
            "SELECT turn_id FROM summary_sources WHERE summary_pk = ? ORDER BY position",
            (summary_pk,),
        )
    ]
    for index, turn_id in enumerate(cited):
        reason = PROTECTION_REASONS[index // 2 % 4] if index % 2 else None
        conn.execute(
            "UPDATE turns SET role = ?, protected = ?, protection_reason = ?"
            " WHERE conversation_id = ? AND id = ?",
            (ROLES[index % 4], int(reason is not None), reason, conversation_id, turn_id),
        )
    turns = []
    for turn_id in cited:
        row = conn.execute(
            "SELECT sequence, role, body, protected, protection_reason, grp, meta FROM turns"
            " WHERE conversation_id = ? AND id = ?",
            (conversation_id, turn_id),
        ).fetchone()
        turns.append(turn_from_row((turn_id, *row)))
    assert {t.role for t in turns} == set(ROLES)
    assert {t.protection_reason for t in turns} == {None, *PROTECTION_REASONS}
    conn.execute(
        "UPDATE summaries SET source_fingerprint = ? WHERE pk = ?",
        (fingerprint_turns(turns), summary_pk),
    )
    conn.commit()
    conn.close()
    packed, rows, packed_runs = _runs_both_ways(db, batch_turns=500)
    assert packed == rows and packed_runs == len(packed)
    verdicts = {v[1]: v[2] for found, _, _ in packed for v in found}
    assert set(verdicts.values()) == {None} and summary_id in verdicts


def test_packed_batch_input_is_validated() -> None:
    turn_columns: tuple[object, ...] = (None,) * 10
    source_columns: tuple[object, ...] = (None,) * 2
    assert _native.revalidate_columns(turn_columns, source_columns, [], 1) == ([], 0, 0)  # type: ignore[arg-type]
    for bad_turns, bad_sources, field in (
        ((None,) * 9, source_columns, "turn_columns"),
        ((None,) * 12, source_columns, "turn_columns"),
        ([None] * 10, source_columns, "turn_columns"),
        ((1,) + (None,) * 9, source_columns, "turn_columns"),
        (turn_columns, (None,) * 4, "source_columns"),
        (turn_columns, (None, 3.5), "source_columns"),
    ):
        with pytest.raises(InvalidInput) as caught:
            _native.revalidate_columns(bad_turns, bad_sources, [], 1)  # type: ignore[arg-type]
        assert caught.value.field == field
    with pytest.raises(InvalidInput) as caught:
        _native.revalidate_columns(turn_columns, source_columns, [], 0)  # type: ignore[arg-type]
    assert caught.value.field == "threads"
    # Columns that do not line up are refused whole: the caller reads those rows by rows.
    misaligned = (b"200", b"1,1", b"ab", *((None,) * 7))
    assert _native.revalidate_columns(misaligned, source_columns, [], 1) is None  # type: ignore[arg-type]
    # So is a row read for a summary the batch does not have.
    summary = [("c", 1, "s", "lf1:" + "0" * 64)]
    lined_up = (b"200", b"1", b"a", b"1", b"0", b"", b"-1", None, b"-1", None)
    assert _native.revalidate_columns(lined_up, source_columns, summary, 1) is not None  # type: ignore[arg-type]
    stray = (b"1200", *lined_up[1:])
    assert _native.revalidate_columns(stray, source_columns, summary, 1) is None  # type: ignore[arg-type]
    # Sources: keyed `k << 54 | position << 26 | ID length`, the IDs back to back; a key
    # naming no summary of the batch, or 'x' (a position or ID the key cannot hold), is
    # refused as well.
    cited = _native.revalidate_columns(lined_up, ("1", b"a"), summary, 1)  # type: ignore[arg-type]
    assert cited is not None and cited[1:] == (1, 0)  # the one source hashed
    for stray_sources in ((str((1 << 54) + 1), b"a"), ("x", b"a"), ("2", b"a")):
        assert _native.revalidate_columns(lined_up, stray_sources, summary, 1) is None, (
            stray_sources
        )  # type: ignore[arg-type]


def test_a_run_over_sqlites_length_limit_is_read_by_rows(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = revalidate_database(db, mark_stale=False)
    opened = batch_reads.open_readonly
    packed_reads: list[object] = []
    real = _native.revalidate_columns

    def limited(path: str | os.PathLike[str], uri: str | None = None) -> sqlite3.Connection:
        conn = opened(path, uri)
        # Smaller than the packed bodies of the larger runs, larger than any single row.
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100_000)
        return conn

    def counting(*args: Any, **named: Any) -> Any:
        packed_reads.append(args)
        return real(*args, **named)

    monkeypatch.setattr(batch_reads, "open_readonly", limited)
    monkeypatch.setattr(_native, "revalidate_columns", counting)
    report = revalidate_database(db, mark_stale=False, batch_turns=200)
    runs = len(list(revalidate_runs.runs(_current_jobs(db), 200)))
    assert 0 < len(packed_reads) < runs  # some runs packed, the large ones by rows
    assert report.stale_summaries == expected.stale_summaries
    assert (report.turns_hashed, report.bytes_hashed) == (
        expected.turns_hashed,
        expected.bytes_hashed,
    )
    assert report.digests_checked == expected.digests_checked > 0


def test_a_utf16_database_is_read_by_rows(tmp_path: Path) -> None:
    path = tmp_path / "utf16.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA encoding = 'UTF-16le'")
    conn.execute("CREATE TABLE probe (x)")  # the encoding is fixed by the first table
    conn.execute("DROP TABLE probe")
    conn.commit()
    conn.close()
    import_and_compact(path, POLICY)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA encoding").fetchone()[0] == "UTF-16le"
    target = conn.execute(
        "SELECT t.pk, s.id FROM summary_sources AS ss JOIN summaries AS s ON s.pk = ss.summary_pk"
        " AND s.status = 'current' JOIN turns AS t ON t.id = ss.turn_id"
        " AND t.conversation_id = s.conversation_id LIMIT 1"
    ).fetchone()
    conn.execute("UPDATE turns SET body = body || 'é' WHERE pk = ?", (target[0],))
    conn.commit()
    conn.close()
    report = revalidate_database(path, mark_stale=False)
    assert [(s.summary_id, s.reason) for s in report.stale_summaries] == [
        (target[1], "source-modified")
    ]
    assert report.summaries_checked > 200
    assert native_verdicts(path) == oracle(path)


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "rows"])
def test_a_summary_superseded_while_the_run_waits_is_checked_as_itself(
    db: Path, packed: bool
) -> None:
    """The jobs are read first, each run later in its own snapshot: a summary superseded in
    between is checked against its own sources (it still matches), not the new summary's
    (it used to be reported stale with `empty-source`)."""
    jobs = _current_jobs(db)
    conversation_id, _, old_summary, *_ = jobs[0]
    with SQLiteStore(db) as store:
        store.append_many(
            conversation_id, [{"id": f"late-{n}", "role": "user", "body": "more"} for n in range(8)]
        )
        outcome = Compactor(
            store, CompactionPolicy(POLICY, min_new_turns=1, keep_tail=2), ExtractiveSummarizer()
        ).compact(conversation_id, force=True)
        assert outcome.status == "accepted" and outcome.summary is not None
        assert store.current_summary(conversation_id).id == outcome.summary.id != old_summary
    conn = batch_reads.open_readonly(str(db))
    try:
        for run in revalidate_runs.runs(jobs, 500):
            found, _, _ = revalidate_runs.check_run(conn, run, 2, utf8=True, packed=packed)
            assert [verdict[2] for verdict in found] == [None] * len(run)
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_conversation_deleted_while_the_run_waits_is_not_reported(db: Path, workers: int) -> None:
    """The jobs are read first, each run later in its own snapshot: a conversation deleted in
    between has no summary left to check; its summary used to be reported stale
    (`empty-source`), counted as checked, under "now marked stale"."""
    before = revalidate_database(db, mark_stale=False, workers=workers)
    assert before.stale == 0
    conversation_id = _current_jobs(db)[3][0]

    def delete(total: int) -> None:  # called once the jobs are listed
        with SQLiteStore(db) as store:
            store.delete_conversation(conversation_id)

    report = revalidate_database(db, workers=workers, on_total=delete)
    assert report.stale_summaries == ()
    assert report.summaries_checked == report.current == before.summaries_checked - 1
    assert report.turns_damaged == report.digests_wrong == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(min_size=1, max_size=6), st.binary(max_size=4), st.none()),
        max_size=12,
    )
)
def test_jobs_sort_as_sqlite_orders_conversation_keys(keys: list[object]) -> None:
    """Runs read `BETWEEN` their first and last key, so the jobs must come in SQLite's order
    (text by UTF-8 bytes, NUL, surrogate-free astral characters and blob keys included)."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE k (id TEXT)")
    conn.executemany("INSERT INTO k VALUES (?)", [(key,) for key in keys])
    expected = [row[0] for row in conn.execute("SELECT id FROM k ORDER BY id")]
    jobs = [(key, 0, "", "", 0) for key in keys]
    assert [job[0] for job in sorted(jobs, key=revalidate_runs.sqlite_order)] == expected


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["UTF-16le", "UTF-16be"]),
    st.lists(
        # U+FFFE and U+FFFF: bound, SQLite stores them as U+FFFD in UTF-16 (such a stored key
        # is damaged-record, never a job: test_utf16_noncharacters).
        st.text(
            st.characters(codec="utf-8", exclude_characters="\ufffe\uffff"),
            min_size=1,
            max_size=6,
        ),
        max_size=12,
        unique=True,
    ),
)
def test_jobs_sort_as_sqlite_orders_keys_stored_as_utf16(encoding: str, keys: list[str]) -> None:
    """In a UTF-16 database text compares by its UTF-16 bytes: not code point order (runs
    and shards read by key ranges missed conversations, whose summaries were found
    `source-missing`)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"PRAGMA encoding = '{encoding}'")
    conn.execute("CREATE TABLE k (id TEXT)")
    conn.executemany("INSERT INTO k VALUES (?)", [(key,) for key in keys])
    expected = [row[0] for row in conn.execute("SELECT id FROM k ORDER BY id")]
    jobs = [(key, 0, "", "", 0) for key in keys]
    order = sorted(jobs, key=lambda job: revalidate_runs.sqlite_order(job, encoding))
    assert [job[0] for job in order] == expected


def test_runs_name_at_most_256_summaries_and_pad_their_parameters() -> None:
    jobs = [(f"c{n:05}", n, f"s{n}", "lf1:", 1, n + 5) for n in range(1200)]
    runs = list(revalidate_runs.runs(jobs, 10_000))
    assert [len(run) for run in runs] == [256] * 4 + [176]
    assert [job for run in runs for job in run] == jobs
    keys = batch_reads._keys(runs[4])
    assert len(keys) == 256 and keys[:176] == list(range(1024, 1200)) and set(keys[176:]) == {None}
    assert batch_reads._keys(runs[0][:1]) == [0]
    # The turns query names each summary by its index in the run, with its conversation and
    # bound, padded as the keys are, then the live state: within SQLite's oldest limit.
    parameters = batch_reads._turn_parameters(runs[4])
    assert len(parameters) == 3 * 256 + 1 <= 999
    assert parameters[:6] == [0, "c01024", 1029, 1, "c01025", 1030]
    assert parameters[3 * 175 : 3 * 176] == [175, "c01199", 1204]
    assert set(parameters[3 * 176 : -1]) == {None} and parameters[-1] == 0
    assert batch_reads._turn_parameters(runs[0][:1]) == [0, "c00000", 5, 0]
