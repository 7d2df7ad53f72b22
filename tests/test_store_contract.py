"""The `Store` contract (SPEC §9, §12) for the store the project ships: the protocol-only
suite that `ledgerfold.testing` ships to other backends, run against `SQLiteStore` on a file
and on ":memory:", then the SQLite-specific tests that look inside the file (bodies really
gone, earlier versions kept, pragmas, logs)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.store._schema import APPLICATION_ID, SCHEMA_VERSION
from ledgerfold.testing import PV, SECRET, StoreContract, fill, summarise

STORE_FACTORIES: dict[str, Callable[[Path], Any]] = {
    "sqlite-file": lambda tmp: lf.SQLiteStore(tmp / "ledger.db"),
    "sqlite-memory": lambda tmp: lf.SQLiteStore(":memory:"),
}


class TestSQLiteStoreOnAFile(StoreContract):
    """The shipped contract suite (`ledgerfold.testing`) against a file database."""

    def make_store(self, tmp_path: Path) -> Any:
        return STORE_FACTORIES["sqlite-file"](tmp_path)


class TestSQLiteStoreInMemory(StoreContract):
    """The same suite against `":memory:"`."""

    def make_store(self, tmp_path: Path) -> Any:
        return STORE_FACTORIES["sqlite-memory"](tmp_path)


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made = STORE_FACTORIES[request.param](tmp_path)
    yield made
    made.close()


@pytest.fixture
def file_store(tmp_path: Path) -> Iterator[lf.SQLiteStore]:
    with lf.SQLiteStore(tmp_path / "ledger.db") as made:
        yield made


def dump(store: lf.SQLiteStore) -> str:
    # The store's own connection sees :memory: databases too.
    return "\n".join(store._connection().iterdump())


# ---------------------------------------------------------------- protocol and names


# ---------------------------------------------------------------- ledger


# ---------------------------------------------------------------- plans and summaries


# ---------------------------------------------------------------- evidence index


# ---------------------------------------------------------------- context


def test_context_fast_path_never_loads_summarised_rows(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        turns = fill(store, n=12)
        envelope = summarise(store, keep_tail=2)
        # Corrupt the summarised rows behind the store's back (a role no Turn accepts):
        # loading or re-hashing them would raise.
        with sqlite3.connect(path) as raw:
            raw.execute("UPDATE turns SET role = 'bogus' WHERE sequence <= 10")
        context = store.context("c", PV)
        assert context.fallback is None and context.ids == (envelope.id, turns[10].id, turns[11].id)
        # Damaged rows read back as a StoreError naming table, column and row.
        with pytest.raises(
            lf.StoreError, match=r"table turns, column role: turn '.*' \(sequence 1\)"
        ):
            store.load("c")


def test_context_reads_source_ids_once_per_store(file_store: lf.SQLiteStore) -> None:
    fill(file_store, n=12)
    summarise(file_store, keep_tail=2)
    reopened = lf.SQLiteStore(file_store._path)
    statements: list[str] = []
    reopened._connection().set_trace_callback(statements.append)
    reopened.context("c", PV)
    first = sum("summary_sources" in s for s in statements)
    statements.clear()
    reopened.context("c", PV)
    assert first == 1 and not any("summary_sources" in s for s in statements)
    reopened.close()


# ---------------------------------------------------------------- retention


def test_purge_deletes_bodies_and_earlier_versions_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        turns = fill(store, n=4)
        store.edit("c", turns[0].id, body=f"{SECRET} edited")
        store.retract("c", turns[1].id)
        with sqlite3.connect(path) as raw:
            assert raw.execute("SELECT COUNT(*) FROM turn_history").fetchone()[0] == 1
            assert raw.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == 4  # kept, flagged
        store.purge_through("c", 2, "retention")
        with sqlite3.connect(path) as raw:
            bodies = [r[0] for r in raw.execute("SELECT body FROM turns ORDER BY sequence")]
            assert bodies[:2] == ["", ""] and SECRET in bodies[2]
            assert raw.execute("SELECT COUNT(*) FROM turn_history").fetchone()[0] == 0


# ---------------------------------------------------------------- legacy import


def test_legacy_records_without_role_or_provenance_come_in_protected(
    file_store: lf.SQLiteStore,
) -> None:
    turns = file_store.import_legacy(
        "legacy",
        [
            {"role": "user", "body": "ok", "provenance": "crm-export"},
            {"body": "no role", "provenance": "crm-export"},
            {"role": "moderator", "body": "odd role", "provenance": "crm-export"},
            {"role": "assistant", "body": "no provenance"},
            {"role": "user", "body": "ok too", "provenance": "crm-export", "id": "L5"},
        ]
        + [{"role": "user", "body": f"later {i}", "provenance": "app"} for i in range(3)],
    )
    flags = [(t.protected, t.protection_reason) for t in turns[:5]]
    unverified = (True, "unverified-provenance")
    assert flags == [(False, None), unverified, unverified, unverified, (False, None)]
    assert turns[1].role == "user" and turns[1].meta == {
        "legacy_role": "missing",
        "provenance": "crm-export",
    }
    assert turns[2].meta is not None and turns[2].meta["legacy_role"] == "moderator"
    assert turns[0].meta == {"provenance": "crm-export"}
    plan = file_store.start_plan("legacy", 2, PV)
    assert plan.compacted_ids == (turns[0].id, turns[4].id, turns[5].id)
    with pytest.raises(lf.InvalidInput) as info:
        file_store.import_legacy("legacy", [{"body": "x", "colour": "red"}])
    assert info.value.field == "records[0]"


# ---------------------------------------------------------------- failures change nothing


def test_failed_calls_leave_the_database_byte_for_byte_unchanged(store: Any) -> None:
    turns = fill(store, n=6)
    summarise(store, keep_tail=2)
    before = dump(store)
    failing: list[Callable[[], object]] = [
        lambda: store.edit("c", turns[4].id, protection_reason="audit-evidence"),  # not protected
        lambda: store.append_many(
            "c", [{"role": "user", "body": "a"}, {"role": "user", "body": 1}]
        ),
        lambda: store.append("c", "user", "x", id=turns[0].id),
        lambda: store.retract("c", "ghost"),
        lambda: store.start_plan("c", 2, PV, plan_id=store.summary_history("c")[0].plan_id),
        lambda: store.commit_summary(store.current_summary("c")),
        lambda: store.record_failure("ghost-plan", "boom"),
    ]
    for call in failing:
        with pytest.raises(lf.InvalidInput):
            call()
        assert dump(store) == before


def test_a_database_failure_raises_store_error_and_writes_nothing(store: Any) -> None:
    fill(store, n=30)
    old = summarise(store, keep_tail=2)
    fill(store, n=30)
    plan = store.start_plan("c", 2, PV)
    envelope = lf.create_summary_envelope(plan, store.load("c"), "s-big", PV, "x" * 200_000)
    conn = store._connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    before = dump(store)
    with pytest.raises(lf.StoreError) as info:
        store.commit_summary(envelope)
    assert isinstance(info.value.__cause__, sqlite3.Error)
    assert dump(store) == before
    assert store.current_summary("c") == old
    conn.execute("PRAGMA max_page_count = 1073741823")
    assert store.commit_summary(envelope).accepted  # the plan survived the failure


# ---------------------------------------------------------------- opening files


def test_reopening_a_file_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(str(path)) as store:
        turns = fill(store, n=6)
        envelope = summarise(store, keep_tail=2)
    with lf.SQLiteStore(path) as store:
        assert store.load("c").turns == tuple(turns) and store.current_summary("c") == envelope
        assert store.context("c", PV).fallback is None
        assert store._connection().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert (
            raw.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
            == SCHEMA_VERSION
        )


def test_opening_something_else_raises_store_error(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_bytes(b"this is not a database, just some text " * 100)
    with pytest.raises(lf.StoreError) as info:
        lf.SQLiteStore(text)
    assert "\n" not in str(info.value)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as raw:
        raw.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(lf.StoreError):
        lf.SQLiteStore(other)
    with sqlite3.connect(other) as raw:  # untouched
        assert [r[0] for r in raw.execute("SELECT name FROM sqlite_master")] == ["invoices"]
    with pytest.raises(lf.StoreError):
        lf.SQLiteStore(tmp_path)  # a directory
    with pytest.raises(lf.InvalidInput):
        lf.SQLiteStore(3)  # type: ignore[arg-type]


def test_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = lf.SQLiteStore(tmp_path / "x.db")
    store.close()
    store.close()
    with pytest.raises(lf.StoreError):
        store.load("c")
    assert "closed" in repr(store)


# ---------------------------------------------------------------- logging and threads


def test_refusing_a_foreign_database_leaves_it_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE x (a)")
    conn.commit()
    conn.close()
    with pytest.raises(lf.StoreError):
        lf.SQLiteStore(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()


def test_a_later_smaller_purge_does_not_shrink_the_boundary() -> None:
    with lf.SQLiteStore() as store:
        store.append_many("c", [{"role": "user", "body": str(n)} for n in range(30)])
        store.purge_through("c", 20, "retention-a")
        store.purge_through("c", 5, "retention-b")
        boundary = store.history_boundary("c")
        assert boundary is not None
        assert (boundary.through_sequence, boundary.reason) == (20, "retention-a")
        assert store.context("c", "v1").history_boundary == boundary


def test_logs_carry_ids_never_bodies(store: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ledgerfold")
    turns = fill(store, n=6)
    envelope = summarise(store, keep_tail=2)
    store.commit_summary(replace(envelope, id="late"))
    store.edit("c", turns[5].id, body=f"{SECRET} new")
    store.retract("c", turns[0].id)
    store.purge_through("c", 2, "retention")
    store.context("c", PV)
    messages = [r.getMessage() for r in caplog.records if r.name == "ledgerfold.store"]
    for needle in (
        "summary committed",
        "summary rejected",
        "edited",
        "retracted",
        "purged",
        "fallback",
    ):
        assert any(needle in m for m in messages), needle
    assert envelope.id in "\n".join(messages)
    assert not any(SECRET in m or "summary text" in m for m in messages)
