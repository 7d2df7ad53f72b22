"""Deep batch revalidation (native, streamed from SQLite): it re-hashes bodies, never trusts
stored digests, and agrees with the Python path (rebuild Turns, check_summary)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import (
    CompactionPolicy,
    Compactor,
    Conversation,
    ExtractiveSummarizer,
    InvalidInput,
    SQLiteStore,
    StoreError,
    Turn,
    _native,
    check_summary,
    fingerprint_turns,
    revalidate,
)
from ledgerfold._model import PROTECTION_REASONS, ROLES
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store._rows import turn_from_row

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402

POLICY = "v1"


@pytest.fixture(scope="module")
def compacted_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every real transcript imported and compacted once; tests work on copies."""
    path = tmp_path_factory.mktemp("revalidate") / "ledger.db"
    import_and_compact(path, POLICY)
    return path


@pytest.fixture
def db(compacted_db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.db"
    source = sqlite3.connect(compacted_db)
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    target.close()
    return copy


def oracle(path: Path) -> dict[str, str | None]:
    """The slow Python way: rebuild Turns from the rows (re-hashing), then check_summary."""
    verdicts: dict[str, str | None] = {}
    conn = sqlite3.connect(path)
    # Text fields by their bytes (whatever the storage class), decoded here: bytes that are
    # not UTF-8 are not a turn.
    # (the driver hands text over as UTF-8 whatever the database's encoding).
    conn.text_factory = bytes

    def text(value: object) -> object:
        return value.decode("utf-8") if isinstance(value, bytes) else value

    try:
        with SQLiteStore(path) as store:
            for conversation_id in store.conversation_ids():
                summary = store.current_summary(conversation_id)
                if summary is None:
                    continue
                rows = conn.execute(
                    "SELECT id, sequence, role, body, protected, protection_reason,"
                    " grp, meta FROM turns WHERE conversation_id = ? AND state = 0",
                    (conversation_id,),
                ).fetchall()
                turns, invalid = [], set()
                for raw_id, sequence, *fields in rows:
                    turn_id = text(raw_id)
                    protected = fields[2]
                    if not isinstance(protected, int):  # a damaged flag: not a turn
                        invalid.add(turn_id)
                        continue
                    try:
                        turns.append(turn_from_row((turn_id, sequence, *map(text, fields))))
                    # A damaged row reads back as a StoreError naming it (issue 16).
                    except (
                        InvalidInput,
                        StoreError,
                        UnicodeDecodeError,
                        ValueError,
                        AttributeError,
                    ):
                        invalid.add(turn_id)
                if invalid & set(summary.source_ids):
                    verdicts[summary.id] = "source-modified"
                    continue
                check = check_summary(summary, Conversation(conversation_id, 0, turns), POLICY)
                verdicts[summary.id] = check.reason
    finally:
        conn.close()
    return verdicts


def native_verdicts(path: Path, **options: object) -> dict[str, str | None]:
    report = revalidate_database(path, mark_stale=False, **options)  # type: ignore[arg-type]
    stale = {item.summary_id: item.reason for item in report.stale_summaries}
    return {summary_id: stale.get(summary_id) for summary_id in oracle_ids(path)}


def oracle_ids(path: Path) -> Iterator[str]:
    with SQLiteStore(path) as store:
        for conversation_id in store.conversation_ids():
            summary = store.current_summary(conversation_id)
            if summary is not None:
                yield summary.id


def cited_rows(path: Path, count: int, seed: int) -> list[tuple[int, str, str]]:
    """(turn pk, conversation id, summary id) of `count` random summarised turns."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT t.pk, t.conversation_id, s.id FROM summary_sources AS ss"
            " JOIN summaries AS s ON s.pk = ss.summary_pk AND s.status = 'current'"
            " JOIN turns AS t ON t.conversation_id = s.conversation_id AND t.id = ss.turn_id"
            " ORDER BY t.pk"
        ).fetchall()
    finally:
        conn.close()
    picked = random.Random(seed).sample(rows, count)
    # One tamper per summary, so each expected verdict is unambiguous.
    seen: set[str] = set()
    return [row for row in picked if not (row[2] in seen or seen.add(row[2]))]


def tamper(path: Path, count: int, seed: int) -> list[tuple[int, str, str]]:
    """Change the body of `count` random summarised turns behind the store's back; returns
    their `cited_rows`."""
    targets = cited_rows(path, count, seed)
    conn = sqlite3.connect(path)
    conn.executemany("UPDATE turns SET body = 'tampered' WHERE pk = ?", [(t[0],) for t in targets])
    conn.commit()
    conn.close()
    return targets


def test_all_current_and_counts(db: Path) -> None:
    report = revalidate_database(db)
    with SQLiteStore(db) as store:
        conversations = store.conversation_ids()
        summaries = [store.current_summary(c) for c in conversations]
    expected = [s for s in summaries if s is not None]
    assert report.conversations == len(conversations) == 244
    assert report.summaries_checked == len(expected) > 200
    assert (report.current, report.stale) == (len(expected), 0)
    assert report.turns_hashed == sum(len(s.source_ids) for s in expected)
    conn = sqlite3.connect(db)
    try:
        (bytes_cited,) = conn.execute(
            "SELECT SUM(LENGTH(CAST(t.body AS BLOB))) FROM summary_sources AS ss"
            " JOIN summaries AS s ON s.pk = ss.summary_pk AND s.status = 'current'"
            " JOIN turns AS t ON t.conversation_id = s.conversation_id AND t.id = ss.turn_id"
        ).fetchone()
    finally:
        conn.close()
    assert report.bytes_hashed == bytes_cited


TAMPERS = {
    "body": ("UPDATE turns SET body = body || 'x' WHERE pk = ?", "source-modified"),
    "role": (
        "UPDATE turns SET role = CASE role WHEN 'user' THEN 'assistant' ELSE 'user' END"
        " WHERE pk = ?",
        "source-modified",
    ),
    "protected": (
        "UPDATE turns SET protected = 1 - protected, protection_reason = NULL WHERE pk = ?",
        "source-modified",
    ),
    "meta": ('UPDATE turns SET meta = \'{"k": "v"}\' WHERE pk = ?', "source-modified"),
    "meta-not-json": ("UPDATE turns SET meta = '{\"k\": 1}' WHERE pk = ?", "source-modified"),
    "invalid-utf8": ("UPDATE turns SET body = X'ff00' WHERE pk = ?", "source-modified"),
    "unknown-role": ("UPDATE turns SET role = 'admin' WHERE pk = ?", "source-modified"),
    "retracted": ("UPDATE turns SET state = 1 WHERE pk = ?", "source-missing"),
    "deleted": ("DELETE FROM turns WHERE pk = ?", "source-missing"),
    "moved": ("UPDATE turns SET sequence = sequence + 1000000 WHERE pk = ?", "source-reordered"),
    "unknown-reason": (
        "UPDATE turns SET protected = 1, protection_reason = 'because' WHERE pk = ?",
        "source-modified",
    ),
    "protected-not-integer": ("UPDATE turns SET protected = 'yes' WHERE pk = ?", "source-modified"),
    "role-not-utf8": (
        "UPDATE turns SET role = CAST(X'ff' AS TEXT) WHERE pk = ?",
        "source-modified",
    ),
    "meta-not-utf8": (
        "UPDATE turns SET meta = CAST(X'7bff' AS TEXT) WHERE pk = ?",
        "source-modified",
    ),
}


@pytest.mark.parametrize("kind", sorted(TAMPERS))
def test_tampering_behind_the_stores_back_is_found(db: Path, kind: str) -> None:
    statement, expected = TAMPERS[kind]
    targets = cited_rows(db, 12, seed=len(kind))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    for pk, _, _ in targets:
        conn.execute(statement, (pk,))
    conn.commit()
    conn.close()
    verdicts = native_verdicts(db)
    tampered = {summary_id for _, _, summary_id in targets}
    for summary_id, reason in verdicts.items():
        if summary_id in tampered:
            # Moving the last source past the tail keeps the order: then only the sequence
            # (an encoded field) changed.
            allowed = {expected, "source-modified"} if kind == "moved" else {expected}
            assert reason in allowed, (kind, summary_id, reason)
        else:
            assert reason is None, (kind, summary_id, reason)
    assert verdicts == oracle(db)


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
        jobs = revalidate._current_jobs(conn)
        packed, rows = [], []
        for run in revalidate._runs(jobs, batch_turns):
            summaries = [job[:4] for job in run]
            # Every live turn of the run, packed (the check reads up to each summary's bound
            # first, and all of them when a cited turn is missing there).
            turn_columns = batch_reads.packed_turns(conn, run, bounded=False)
            source_columns = batch_reads.packed_sources(conn, run)
            direct = _native.revalidate_columns(turn_columns, source_columns, summaries, 2)
            packed_runs += direct is not None
            packed.append(revalidate._check_run(conn, run, 2, utf8=True))
            rows.append(revalidate._check_run(conn, run, 2, utf8=True, packed=False))
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
    targets = cited_rows(db, len(DAMAGE) * 6 + 1, seed=11)
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
    """Only the turns a summary can cite are read: the newest ones, above its
    `through_sequence`, are not (a run reads them all only when a cited turn is missing)."""
    read: list[int] = []
    real = _native.revalidate_columns

    def counting(turn_columns: tuple[str | bytes | None, ...], *rest: object) -> object:
        keys = turn_columns[0]  # text: the driver gives an aggregate of integers as such
        assert isinstance(keys, str)
        read.append(len(keys.split(",")))
        return real(turn_columns, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(_native, "revalidate_columns", counting)
    assert revalidate_database(db, mark_stale=False).stale == 0
    conn = sqlite3.connect(db)
    below, live = conn.execute(
        "SELECT sum(t.sequence <= s.through_sequence), count(*) FROM conversations AS c"
        " JOIN summaries AS s ON s.pk = c.current_summary AND s.status = 'current'"
        " JOIN turns AS t ON t.conversation_id = c.id AND t.state = 0"
    ).fetchone()
    conn.close()
    assert sum(read) == below < live


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

    def counting(*args: object) -> object:
        packed_reads.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(batch_reads, "open_readonly", limited)
    monkeypatch.setattr(_native, "revalidate_columns", counting)
    report = revalidate_database(db, mark_stale=False, batch_turns=200)
    runs = len(list(revalidate._runs(_current_jobs(db), 200)))
    assert 0 < len(packed_reads) < runs  # some runs packed, the large ones by rows
    assert report.stale_summaries == expected.stale_summaries
    assert (report.turns_hashed, report.bytes_hashed) == (
        expected.turns_hashed,
        expected.bytes_hashed,
    )


def _current_jobs(path: Path) -> list[tuple[str, int, str, str, int, int | None]]:
    conn = batch_reads.open_readonly(str(path))
    try:
        return revalidate._current_jobs(conn)
    finally:
        conn.close()


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


def test_meta_key_order_in_the_json_does_not_matter(db: Path) -> None:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT pk, meta FROM turns WHERE meta IS NOT NULL").fetchall()
    for pk, meta in rows:
        reordered = dict(reversed(list(json.loads(meta).items())))
        conn.execute(
            "UPDATE turns SET meta = ? WHERE pk = ?", (json.dumps(reordered, indent=1), pk)
        )
    conn.commit()
    conn.close()
    assert len(rows) > 1000
    assert set(native_verdicts(db).values()) == {None}


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
        for run in revalidate._runs(jobs, 500):
            found, _, _ = revalidate._check_run(conn, run, 2, utf8=True, packed=packed)
            assert [verdict[2] for verdict in found] == [None] * len(run)
    finally:
        conn.close()


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
    assert [job[0] for job in sorted(jobs, key=revalidate._sqlite_order)] == expected


def test_runs_name_at_most_256_summaries_and_pad_their_parameters() -> None:
    jobs = [(f"c{n:05}", n, f"s{n}", "lf1:", 1, n + 5) for n in range(1200)]
    runs = list(revalidate._runs(jobs, 10_000))
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


def test_workers_and_batches_do_not_change_the_verdicts(db: Path) -> None:
    targets = tamper(db, 20, seed=7)
    expected = oracle(db)
    assert sum(reason is not None for reason in expected.values()) == len(targets)
    for options in (
        {"workers": 1},
        {"workers": 2},
        {"workers": 3, "batch_turns": 1},
        {"threads": 2},
    ):
        assert native_verdicts(db, **options) == expected, options


def _database_dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_workers_are_threads_of_this_process_and_one_keeps_to_the_caller(db: Path) -> None:
    """`workers=1` checks on the calling thread (one core); `workers=2` on two threads of
    this process, each reporting its own batches; the default is one per available core."""
    summaries = sum(1 for _ in oracle_ids(db))
    for workers, expected in ((1, {threading.main_thread().name}), (2, None)):
        seen: list[tuple[str, int]] = []

        def progress(done: int, seen: list[tuple[str, int]] = seen) -> None:
            seen.append((threading.current_thread().name, done))

        report = revalidate_database(db, workers=workers, batch_turns=50, progress=progress)
        assert report.workers == workers
        assert sum(done for _, done in seen) == report.summaries_checked == summaries
        names = {name for name, _ in seen}
        if expected is not None:
            assert names == expected
        else:
            assert len(names) == 2 and all(n.startswith("ledgerfold-worker") for n in names)
    assert revalidate_database(db).workers == revalidate.available_cores()


@pytest.mark.parametrize(
    ("workers", "failing"),
    [(1, "MainThread"), (2, "ledgerfold-worker_0"), (2, "ledgerfold-worker_1")],
)
def test_a_failing_worker_stops_the_run_and_marks_nothing(
    db: Path, workers: int, failing: str
) -> None:
    """Whichever worker fails (the first shard's or a later one's), the others stop after
    the batch they are on, the error reaches the caller and nothing is marked."""
    tamper(db, 1, seed=5)
    before = _database_dump(db)
    assert len(list(revalidate._runs(_current_jobs(db), 50))) > 20
    after: list[int] = []  # batches reported once the failure happened
    failed = threading.Event()

    def progress(done: int) -> None:
        if threading.current_thread().name == failing:
            failed.set()
            raise RuntimeError("the progress display went away")
        if failed.is_set():
            after.append(done)

    with pytest.raises(RuntimeError, match="went away"):
        revalidate_database(db, workers=workers, batch_turns=50, progress=progress)
    assert failed.is_set() and len(after) <= 2
    assert _database_dump(db) == before
    assert revalidate_database(db, workers=workers).stale == 1


class _Interrupted(Exception):
    pass


def test_an_interrupt_while_workers_run_stops_them_and_marks_nothing(db: Path) -> None:
    """Ctrl-C while workers run, delivered to a worker's thread (a terminal's SIGINT goes to
    any thread): the caller's thread handles it at once, the workers stop after the batch
    they are on, the interrupt propagates and nothing is marked."""
    tamper(db, 1, seed=9)
    before = _database_dump(db)
    batches = len(list(revalidate._runs(_current_jobs(db), 50)))
    done: list[int] = []
    handled = threading.Event()
    seen: list[bool] = []  # whether the main thread handled the signal while workers ran

    def progress(count: int) -> None:
        done.append(count)
        if len(done) == 1:
            # To this worker's thread, as a terminal's Ctrl-C may be: the handler runs in
            # the main thread, once it wakes.
            signal.raise_signal(signal.SIGINT)
            seen.append(handled.wait(timeout=10))

    def interrupted(signum: int, frame: object) -> None:
        handled.set()
        raise _Interrupted

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        with pytest.raises(_Interrupted):
            revalidate_database(db, workers=2, batch_turns=50, progress=progress)
    finally:
        signal.signal(signal.SIGINT, previous)
    # Handled while the workers ran; then the first batch, and at most the batch each
    # worker was on.
    assert seen == [True]
    assert batches > 20 and len(done) <= 4
    assert _database_dump(db) == before


def test_stale_summaries_are_marked_and_contexts_fall_back(db: Path) -> None:
    ((_, conversation_id, summary_id),) = tamper(db, 1, seed=3)
    with SQLiteStore(db) as store:
        # The per-call path trusts stored digests and eager invalidation; only deep
        # revalidation can see a change made behind the store's back.
        assert store.context(conversation_id, POLICY).fallback is None
    report = revalidate_database(db)
    assert [(s.conversation_id, s.summary_id, s.reason) for s in report.stale_summaries] == [
        (conversation_id, summary_id, "source-modified")
    ]
    with SQLiteStore(db) as store:
        assert store.current_summary(conversation_id) is None
        assert store.context(conversation_id, POLICY).fallback == "stale-summary:source-modified"
        statuses = {
            r.envelope.id: (r.status, r.reason)
            for r in store.summary_history(conversation_id)
            if r.envelope
        }
        assert statuses[summary_id] == ("stale", "source-modified")
    again = revalidate_database(db)
    assert again.stale == 0 and again.summaries_checked == report.summaries_checked - 1


def test_bad_arguments(db: Path, tmp_path: Path) -> None:
    for options, field in (
        ({"workers": 0}, "workers"),
        ({"workers": True}, "workers"),
        ({"batch_turns": 0}, "batch_turns"),
        ({"threads": 0}, "threads"),
    ):
        with pytest.raises(InvalidInput) as caught:
            revalidate_database(db, **options)  # type: ignore[arg-type]
        assert caught.value.field == field
    with pytest.raises(InvalidInput):
        revalidate_database(42)  # type: ignore[arg-type]
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError):
        revalidate_database(foreign)


ROW = ("c", "a", 1, "user", b"hi", 0, None, None, None)
SUMMARY = ("c", 1, "s", "lf1:" + "0" * 64)


def test_native_batch_input_is_validated() -> None:
    verdicts, turns, size = _native.revalidate_flat([ROW], [(1, "a")], [SUMMARY], 1)
    assert verdicts == [("c", "s", "source-modified", None)] and (turns, size) == (1, 2)
    for rows, sources, summaries in (
        (5, [], []),
        ([ROW[:8]], [], []),
        ([(1, *ROW[1:])], [], []),
        ([("c", 1, *ROW[2:])], [], []),
        ([(b"\xff", *ROW[1:])], [], []),
        ([("c", b"\xff", *ROW[2:])], [], []),
        ([ROW], [(1, b"\xff")], [SUMMARY]),
        ([ROW], [(1,)], [SUMMARY]),
        ([ROW], [("1", "a")], [SUMMARY]),
        ([ROW], [(1, "a")], [("c", 1, "s")]),
        ([ROW], [(1, "a")], [("c", 1, "s", 5)]),
    ):
        with pytest.raises(InvalidInput):
            _native.revalidate_flat(rows, sources, summaries, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        _native.revalidate_flat([ROW], [(1, "a")], [SUMMARY], 0)


@pytest.mark.parametrize(
    ("position", "value"),
    [
        (2, "1"),
        (2, 1.0),
        (3, 5),
        (3, b"\xff"),
        (4, 7),
        (5, "yes"),
        (5, None),
        (6, 3),
        (7, 3),
        (8, {"k": "v"}),
        (8, b"{\xff"),
        (7, b"\xff"),
        (4, "\ud800"),
    ],
)
def test_a_stored_field_of_the_wrong_type_is_an_invalid_turn(position: int, value: object) -> None:
    """Storage damage is a verdict: the row is no longer a turn, its summary is stale and
    the row is named; only the keys (conversation and turn ID) must be well-typed."""
    good = Turn("a", 1, "user", "hi")
    summary = ("c", 1, "s", _native.fingerprint_turns([good]))
    row = ("c", "a", 1, "user", b"hi", 0, None, None, None)
    assert _native.revalidate_flat([row], [(1, "a")], [summary], 1)[0] == [("c", "s", None, None)]
    damaged = (*row[:position], value, *row[position + 1 :])
    verdicts, turns, _ = _native.revalidate_flat([damaged], [(1, "a")], [summary], 1)
    assert verdicts == [("c", "s", "source-modified", "a")] and turns == 1


def test_text_fields_as_utf8_bytes_read_like_str() -> None:
    """What a row read with every text column cast to a blob gives."""
    good = Turn("a", 1, "user", "hi", meta={"k": "v"}, group="g")
    summary = ("c", 1, "s", _native.fingerprint_turns([good]))
    row = (b"c", b"a", 1, b"user", b"hi", 0, None, b"g", b'{"k": "v"}')
    assert _native.revalidate_flat([row], [(1, b"a")], [summary], 1)[0] == [("c", "s", None, None)]


def _revalidate_small(threads: int) -> int:
    verdicts, turns, _ = _native.revalidate_flat([ROW], [(1, "a")], [SUMMARY], threads)
    return turns + len(verdicts)


def test_a_forked_child_gets_its_own_thread_pool() -> None:
    import multiprocessing

    assert _revalidate_small(2) == 2  # the parent now has a 2-thread pool
    with multiprocessing.get_context("fork").Pool(1) as pool:
        # Reusing the parent's pool in the child would wait forever for absent threads.
        assert pool.apply_async(_revalidate_small, (2,)).get(timeout=60) == 2


# Run in a fresh interpreter: pools of threads that other tests started are torn down
# asynchronously when those threads end, so counting this process's threads would race them.
_POOL_SCENARIO = """
import sys, threading, time
from pathlib import Path
from ledgerfold import _native

def pool_threads():
    tasks = Path("/proc/self/task")
    names = [(task / "comm").read_text() for task in tasks.iterdir()]
    return sum(name.startswith("ledgerfold-reva") for name in names)

threads = int(sys.argv[1])
ready, release = threading.Barrier(3), threading.Event()

def check():
    row = ("c", "a", 1, "user", b"hi", 0, None, None, None)
    summary = ("c", 1, "s", "lf1:" + "0" * 64)
    verdicts, turns, _ = _native.revalidate_flat([row], [(1, "a")], [summary], threads)
    assert turns + len(verdicts) == 2
    ready.wait(timeout=60)
    release.wait(timeout=60)  # keep this thread, and so any pool of its own, alive

workers = [threading.Thread(target=check) for _ in range(2)]
for worker in workers:
    worker.start()
ready.wait(timeout=60)
# A new thread names itself once it runs, so a pool thread may not carry its name yet:
# wait (bounded) for the expected count, then let any late extra thread show up too.
expected = int(sys.argv[2])
deadline = time.monotonic() + 20
while pool_threads() < expected and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.2)
print(pool_threads())
release.set()
for worker in workers:
    worker.join(timeout=60)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread names need /proc")
@pytest.mark.parametrize(("threads", "pool_threads"), [(1, 0), (2, 4)])
def test_each_calling_thread_hashes_on_its_own_threads(threads: int, pool_threads: int) -> None:
    """With one hashing thread, each interpreter thread hashes inline, starting no pool (a
    pool thread would cost two wake-ups a batch); with two, each gets its own pool of two (a
    pool shared by the process would take their batches in turn)."""
    done = subprocess.run(
        [sys.executable, "-c", _POOL_SCENARIO, str(threads), str(pool_threads)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert int(done.stdout) == pool_threads


def test_flat_rows_in_any_order_with_per_summary_totals() -> None:
    turns = {
        "c1": [Turn("a", 1, "user", "one"), Turn("b", 2, "user", "two!")],
        "c2": [Turn("x", 5, "assistant", "hello", meta={"k": "v"})],
    }
    rows = [
        (conversation, t.id, t.sequence, t.role, t.body.encode(), 0, None, None, None)
        for conversation, items in turns.items()
        for t in items
    ]
    rows[-1] = (*rows[-1][:8], json.dumps(turns["c2"][0].meta))
    rows.reverse()  # grouping must not depend on row order
    from ledgerfold import fingerprint_turns

    summaries = [
        ("c1", 10, "s1", fingerprint_turns(turns["c1"])),
        ("c2", 20, "s2", fingerprint_turns(turns["c2"])),
    ]
    sources = [(20, "x"), (10, "a"), (10, "b")]
    verdicts, total_turns, total_bytes = _native.revalidate_flat(
        rows, sources, summaries, 1, per_summary=True
    )
    assert verdicts == [("c1", "s1", None, None, 2, 7), ("c2", "s2", None, None, 1, 5)]
    assert (total_turns, total_bytes) == (3, 12)
    plain, _, _ = _native.revalidate_flat(rows, sources, summaries, 1)
    assert plain == [verdict[:4] for verdict in verdicts]
    # A source that lost its row is missing; a sources list in the wrong order is reordered.
    without_a = [row for row in rows if row[1] != "a"]
    missing, _, _ = _native.revalidate_flat(without_a, sources, summaries, 1)
    assert missing[0][2:] == ("source-missing", "a")
    swapped, _, _ = _native.revalidate_flat(rows, [(20, "x"), (10, "b"), (10, "a")], summaries, 1)
    assert swapped[0][2:] == ("source-reordered", "b")


_META_TEXT = st.text(
    st.characters(codec="utf-8")  # every code point but lone surrogates
    | st.sampled_from(['"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\u2028", "é", "😀"]),
    max_size=24,
).map(lambda text: json.dumps([text]) if len(text) % 3 == 0 else text)  # JSON inside JSON


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(_META_TEXT.filter(bool), _META_TEXT, max_size=4),
    st.sampled_from([{}, {"ensure_ascii": False}, {"indent": 1}, {"separators": (",", ":")}]),
)
def test_stored_meta_json_reads_as_pythons_json_reads_it(
    meta: dict[str, str], options: dict[str, object]
) -> None:
    """The native reader of the stored `meta` column against the json module: whatever way
    Python wrote the object (escaped or raw non-ASCII, surrogate pairs, nested escapes),
    the row re-hashes to the digest of the Turn with that meta."""
    turn = Turn("t", 1, "tool", "body", meta=meta)
    stored = json.dumps(meta, **options)  # type: ignore[arg-type]
    row = ("c", "t", 1, "tool", b"body", 0, None, None, stored)
    summary = ("c", 1, "s", fingerprint_turns([turn]))
    assert _native.revalidate_flat([row], [(1, "t")], [summary], 1)[0] == [("c", "s", None, None)]


def test_workers_opening_side_by_side_neither_fail_nor_leave_wal_files(tmp_path: Path) -> None:
    """The workers' read-only connections share the URI of the first, which stays open
    until they close: deciding it per thread from the WAL files a sibling was creating or
    deleting failed ("unable to open database file", a CI run) or left the files behind."""
    path = tmp_path / "small.db"
    with SQLiteStore(path) as store:
        compactor = Compactor(
            store, CompactionPolicy(POLICY, min_new_turns=1, keep_tail=1), ExtractiveSummarizer()
        )
        for n in range(8):
            store.append_many(f"c{n}", [{"role": "user", "body": f"turn {i}"} for i in range(4)])
            compactor.compact(f"c{n}", force=True)
    for _ in range(150):  # the race showed within 6 to 106 runs
        report = revalidate_database(path, workers=4)
        assert report.summaries_checked == report.current == 8
        assert sorted(p.name for p in tmp_path.iterdir()) == ["small.db"]
