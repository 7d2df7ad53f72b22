"""The store's bulk reads and the packed revalidation format shared with the native core.

Python generates the query that packs a run from the constants the native module exports;
Rust decodes with the same constants. A packing the decoder refuses is not an error (the run
is read again by rows, slower), so a drift would go unnoticed: here a database with every
role, reason, protection flag and NULL is revalidated with the row reads forbidden, and a
drift in any one constant is shown to fail that check.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledgerfold import Turn, _native, fingerprint_turns
from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold._model import PROTECTION_REASONS, ROLES
from ledgerfold._summary import CHECK_REASONS
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import _batch_reads as batch_reads

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from ledgers import import_and_compact  # noqa: E402

POLICY = "v1"
FINGERPRINT = "lf1:" + "0" * 64


def test_codes_are_spec_section_3s_and_python_derives_its_tuples_from_them() -> None:
    assert dict(_native.ROLE_CODES) == {"system": 1, "user": 2, "assistant": 3, "tool": 4}
    assert dict(_native.PROTECTION_REASON_CODES) == {
        "pending-confirmation": 1,
        "active-constraint": 2,
        "audit-evidence": 3,
        "unverified-provenance": 4,
    }
    assert ROLES == ("system", "user", "assistant", "tool")
    assert PROTECTION_REASONS == (
        "pending-confirmation",
        "active-constraint",
        "audit-evidence",
        "unverified-provenance",
    )
    # SPEC §6's order, then §15.4's group-split.
    assert CHECK_REASONS == (
        "conversation-mismatch",
        "policy-mismatch",
        "empty-source",
        "source-missing",
        "source-reordered",
        "source-modified",
        "group-split",
    )
    assert CHECK_REASONS is _native.CHECK_REASONS
    with pytest.raises(TypeError):
        _native.ROLE_CODES["robot"] = 5  # type: ignore[index]


def test_a_run_names_few_enough_summaries_for_sqlites_parameter_limit() -> None:
    # (k, conversation, bound) per summary and the live state; 999 is SQLite's oldest limit.
    assert 3 * batch_reads.MAX_RUN_SUMMARIES + 1 <= 999
    assert batch_reads.MAX_RUN_SUMMARIES == _native.PACKED_MAX_SUMMARIES


# ------------------------------------------------------------------ a database of every kind


@dataclasses.dataclass(frozen=True)
class FormatDatabase:
    path: Path
    damaged_summary: str  # cites a turn whose stored role is no role: `source-modified`


def _cited(
    conn: sqlite3.Connection, minimum: int, skip: int, exclude: int = -1
) -> tuple[int, str, str, list[str]]:
    """(summary pk, summary id, conversation, cited turn IDs in order) of a current summary
    with at least `minimum` sources (the `skip`-th such, other than `exclude`)."""
    pk, summary_id, conversation_id = conn.execute(
        "SELECT s.pk, s.id, s.conversation_id FROM summaries AS s"
        " JOIN summary_sources AS ss ON ss.summary_pk = s.pk"
        " WHERE s.status = 'current' AND s.pk != ?"
        " GROUP BY s.pk HAVING count(*) >= ? ORDER BY s.pk LIMIT 1 OFFSET ?",
        (exclude, minimum, skip),
    ).fetchone()
    cited = [
        turn_id
        for (turn_id,) in conn.execute(
            "SELECT turn_id FROM summary_sources WHERE summary_pk = ? ORDER BY position", (pk,)
        )
    ]
    return pk, summary_id, conversation_id, cited


def _every_role_and_reason(conn: sqlite3.Connection) -> int:
    """One summary's sources given every role, and protected with every reason (and not),
    its fingerprint made to match: current, if every code packs as the SPEC's."""
    pk, _, conversation_id, cited = _cited(conn, 10, 0)
    turns = []
    for index, turn_id in enumerate(cited):
        reason = PROTECTION_REASONS[index // 2 % 4] if index % 2 else None
        conn.execute(
            "UPDATE turns SET role = ?, protected = ?, protection_reason = ?"
            " WHERE conversation_id = ? AND id = ?",
            (ROLES[index % 4], int(reason is not None), reason, conversation_id, turn_id),
        )
        sequence, role, body, protected, reason, group, meta = conn.execute(
            "SELECT sequence, role, body, protected, protection_reason, grp, meta FROM turns"
            " WHERE conversation_id = ? AND id = ?",
            (conversation_id, turn_id),
        ).fetchone()
        turns.append(
            Turn(
                turn_id,
                sequence,
                role,
                body,
                protected=bool(protected),
                protection_reason=reason,
                group=group,
                meta=json.loads(meta) if meta else None,
            )
        )
    assert {turn.role for turn in turns} == set(ROLES)
    assert {turn.protection_reason for turn in turns} == {None, *PROTECTION_REASONS}
    conn.execute(
        "UPDATE summaries SET source_fingerprint = ? WHERE pk = ?", (fingerprint_turns(turns), pk)
    )
    return int(pk)


def _damage_a_user_turn(conn: sqlite3.Connection, exclude: int) -> str:
    """A cited `user` turn of another summary given a role that is none: the summary is
    `source-modified` (were the unknown code ever read as a role, it would check current)."""
    for skip in range(50):
        _, summary_id, conversation_id, cited = _cited(conn, 2, skip, exclude)
        row = conn.execute(
            "SELECT pk FROM turns WHERE conversation_id = ? AND role = 'user' AND id IN"
            f" ({', '.join(['?'] * len(cited))}) LIMIT 1",
            (conversation_id, *cited),
        ).fetchone()
        if row is not None:
            conn.execute("UPDATE turns SET role = 'robot' WHERE pk = ?", row)
            return str(summary_id)
    raise AssertionError("no summary cites a user turn")


@pytest.fixture(scope="module")
def format_db(tmp_path_factory: pytest.TempPathFactory) -> FormatDatabase:
    path = tmp_path_factory.mktemp("batch-reads") / "ledger.db"
    import_and_compact(path, POLICY)
    conn = sqlite3.connect(path)
    try:
        damaged = _damage_a_user_turn(conn, exclude=_every_role_and_reason(conn))
        conn.commit()
        # What the drift checks rely on: runs of several summaries, NULL and non-NULL
        # groups and meta among the turns read.
        nulls = conn.execute(
            "SELECT sum(grp IS NULL), sum(grp IS NOT NULL), sum(meta IS NULL),"
            " sum(meta IS NOT NULL) FROM turns WHERE state = 0"
        ).fetchone()
        assert all(count > 0 for count in nulls), nulls
    finally:
        conn.close()
    return FormatDatabase(path, damaged)


def _runs(path: Path) -> list[list[batch_reads.Job]]:
    conn = batch_reads.open_readonly(path)
    try:
        return list(revalidate_runs.runs(revalidate_runs.current_jobs(conn), 500))
    finally:
        conn.close()


def _verdicts_read_packed(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """`revalidate_database`'s verdicts by summary ID, every run read packed: a run read by
    rows (its packing refused) fails."""

    def refused(*args: object, **kwargs: object) -> list[tuple[object, ...]]:
        raise AssertionError("a run was read by rows: its packing did not line up")

    with monkeypatch.context() as patch:
        patch.setattr(batch_reads, "turn_rows", refused)
        patch.setattr(batch_reads, "source_rows", refused)
        report = revalidate_database(path, mark_stale=False, workers=1, batch_turns=500)
    stale = {item.summary_id: item.reason for item in report.stale_summaries}
    conn = sqlite3.connect(path)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM summaries WHERE status = 'current'")]
    finally:
        conn.close()
    assert report.summaries_checked == len(ids)
    return {summary_id: stale.get(summary_id) for summary_id in ids}


def _expected(database: FormatDatabase) -> dict[str, str | None]:
    conn = sqlite3.connect(database.path)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM summaries WHERE status = 'current'")]
    finally:
        conn.close()
    return {
        summary_id: "source-modified" if summary_id == database.damaged_summary else None
        for summary_id in ids
    }


@pytest.fixture
def source_table() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE summary_sources (summary_pk INTEGER, position INTEGER, turn_id)")
    yield conn
    conn.close()


def _edges_decode(conn: sqlite3.Connection) -> bool:
    """The packed sources of two summaries, the largest position and the longest turn ID the
    source key holds among them, decode (in position order); one past either is refused,
    not read as something else."""
    run: list[batch_reads.Job] = [("c0", 1, "s0", FINGERPRINT, 2, None)]
    run.append(("c1", 2, "s1", FINGERPRINT, 2, None))
    summaries = [job[:4] for job in run]
    no_turns = (None,) * 10
    top_position = (1 << _native.PACKED_SOURCE_POSITION_BITS) - 1
    top_length = (1 << _native.PACKED_SOURCE_ID_LENGTH_BITS) - 1

    def decoded(position: int, length: int) -> list[str | None] | None:
        conn.execute("DELETE FROM summary_sources")
        conn.executemany(
            "INSERT INTO summary_sources VALUES (?, ?, ?)",
            [(1, position, "b"), (1, 0, "a"), (2, 0, "c")],
        )
        conn.execute("INSERT INTO summary_sources VALUES (2, 1, zeroblob(?))", (length,))
        with batch_reads.snapshot(conn):
            columns = batch_reads.packed_sources(conn, run)
        checked = _native.revalidate_columns(no_turns, columns, summaries, 1)
        # No turns: each summary's first source (in position order) is missing.
        return None if checked is None else [verdict[3] for verdict in checked[0]]

    return (
        decoded(top_position, top_length) == ["a", "c"]
        and decoded(top_position + 1, 1) is None
        and decoded(1, top_length + 1) is None
    )


def test_every_run_of_a_database_of_every_kind_is_read_packed(
    format_db: FormatDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(_runs(format_db.path)) > 10
    assert max(len(run) for run in _runs(format_db.path)) > 1
    assert _verdicts_read_packed(format_db.path, monkeypatch) == _expected(format_db)


def test_source_keys_hold_their_whole_range_and_refuse_past_it(
    source_table: sqlite3.Connection,
) -> None:
    assert _edges_decode(source_table)


# One changed value per constant of the format, as either side might drift.
_DRIFTS = {
    "separator": ";",
    "null_length": -2,
    "turn_key_summary": 100,
    "turn_key_role": 10,
    "turn_key_protected": 100,
    "turn_key_reason": 10,
    "unknown_code": _native.ROLE_CODES["user"],
    "source_summary_shift": 53,
    "source_position_shift": 25,
    "source_position_bits": 27,
    "source_id_length_bits": 25,
    "role_codes": tuple(zip(ROLES, (2, 1, 3, 4), strict=True)),
    "reason_codes": tuple(zip(PROTECTION_REASONS, (1, 2, 4, 3), strict=True)),
}


def test_every_constant_of_the_format_has_a_drift() -> None:
    fields = {field.name for field in dataclasses.fields(batch_reads.PackedFormat)}
    assert set(_DRIFTS) == fields
    for name, value in _DRIFTS.items():
        assert getattr(batch_reads.NATIVE_FORMAT, name) != value, name


@pytest.mark.parametrize("name", sorted(_DRIFTS))
def test_a_drift_in_any_constant_of_the_format_fails_the_checks(
    format_db: FormatDatabase,
    source_table: sqlite3.Connection,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    """The queries generated from a format with one constant changed: the packing of a
    database of every kind is refused (a run is read by rows), its verdicts are wrong, or the
    source keys' range is not what the decoder reads."""
    drifted = dataclasses.replace(batch_reads.NATIVE_FORMAT, **{name: _DRIFTS[name]})
    monkeypatch.setattr(batch_reads, "NATIVE_FORMAT", drifted)
    try:
        packed_right = _verdicts_read_packed(format_db.path, monkeypatch) == _expected(format_db)
    except AssertionError:  # a run was read by rows
        packed_right = False
    assert not (packed_right and _edges_decode(source_table))
