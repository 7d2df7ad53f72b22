"""Contract tests of the `Store` protocol (SPEC §9, §12), parametrised over every store
implementation the project ships: `SQLiteStore` on a file and on ":memory:".

An application implementing `Store` on its own database can reuse the `store`-based tests by
adding its factory to `STORE_FACTORIES`. Tests that look inside the SQLite file (bodies
really gone, earlier versions kept, pragmas) are SQLite-specific and use a file only.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold._context import HistoryBoundary
from ledgerfold.store._schema import APPLICATION_ID, SCHEMA_VERSION

PV = "policy-1"
SECRET = "SECRET-BODY-\u2028-do-not-log"

STORE_FACTORIES: dict[str, Callable[[Path], Any]] = {
    "sqlite-file": lambda tmp: lf.SQLiteStore(tmp / "ledger.db"),
    "sqlite-memory": lambda tmp: lf.SQLiteStore(":memory:"),
}


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


def fill(store: Any, conversation: str = "c", n: int = 10, **extra: Any) -> list[lf.Turn]:
    turns: list[lf.Turn] = store.append_many(
        conversation, [{"role": "user", "body": f"{SECRET} {i}", **extra} for i in range(n)]
    )
    return turns


def summarise(
    store: Any, conversation: str = "c", keep_tail: int = 3, summary_id: str | None = None
) -> lf.SummaryEnvelope:
    plan = store.start_plan(conversation, keep_tail, PV)
    envelope = lf.create_summary_envelope(
        plan, store.load(conversation), summary_id or f"s-{plan.plan_id}", PV, f"{SECRET} summary"
    )
    assert envelope is not None
    write = store.commit_summary(envelope)
    assert write.accepted, write
    return envelope


# ---------------------------------------------------------------- protocol and names


def test_sqlite_store_implements_the_protocol(store: Any) -> None:
    assert isinstance(store, lf.Store)
    assert lf.SummaryRecord is not None and "SQLiteStore" in lf.__all__


# ---------------------------------------------------------------- ledger


def test_append_assigns_sequences_revisions_and_fresh_ids(store: Any) -> None:
    first = store.append("c", "user", "hello")
    second = store.append("c", "assistant", "hi", id="m2", meta={"name": "bot"})
    assert (first.sequence, second.sequence) == (1, 2)
    assert re.fullmatch(r"t-[0-9a-f]{32}", first.id)
    assert second.id == "m2" and second.meta == {"name": "bot"}
    loaded = store.load("c")
    assert loaded.revision == 2 and loaded.turns == (first, second)
    assert store.conversation_ids() == ["c"]


def test_load_of_unknown_conversation_is_empty_at_revision_zero(store: Any) -> None:
    empty = store.load("nobody")
    assert (empty.id, empty.revision, len(empty)) == ("nobody", 0, 0)
    assert store.conversation_ids() == []


def test_append_many_is_one_revision_and_all_or_nothing(store: Any) -> None:
    fill(store, n=3)
    before = store.load("c")
    with pytest.raises(lf.InvalidInput) as info:
        store.append_many(
            "c",
            [
                {"role": "user", "body": "ok"},
                {"role": "user", "body": "ok"},
                {"role": "x", "body": "b"},
            ],
        )
    assert info.value.field == "turns[2].role"
    assert store.load("c") == before
    added = store.append_many("c", [{"role": "user", "body": "a"}, {"role": "tool", "body": "b"}])
    assert [t.sequence for t in added] == [4, 5]
    assert store.load("c").revision == before.revision + 1


def test_turn_ids_are_unique_within_a_conversation_but_not_across(store: Any) -> None:
    store.append("c", "user", "a", id="m1")
    store.append("d", "user", "a", id="m1")
    with pytest.raises(lf.DuplicateId):
        store.append("c", "user", "again", id="m1")
    with pytest.raises(lf.DuplicateId):
        store.append_many("e", [{"role": "user", "body": "x", "id": "k"}] * 2)
    store.retract("c", "m1")
    with pytest.raises(lf.DuplicateId):  # a retracted ID is never reused either
        store.append("c", "user", "again", id="m1")
    assert store.load("e").revision == 0


def test_sequences_are_never_reused_after_a_retraction(store: Any) -> None:
    turns = fill(store, n=3)
    store.retract("c", turns[-1].id)
    assert store.append("c", "user", "next").sequence == 4


def test_edit_changes_fields_and_bumps_the_revision(store: Any) -> None:
    turns = fill(store, n=2)
    edited = store.edit(
        "c", turns[0].id, body="new", protected=True, protection_reason="audit-evidence"
    )
    assert edited == turns[0].replace(
        body="new", protected=True, protection_reason="audit-evidence"
    )
    loaded = store.load("c")
    assert loaded.revision == 2 and loaded.turns[0] == edited


@pytest.mark.parametrize("field", ["id", "sequence", "colour"])
def test_edit_refuses_id_sequence_and_unknown_fields(store: Any, field: str) -> None:
    turns = fill(store, n=1)
    with pytest.raises(lf.InvalidInput) as info:
        store.edit("c", turns[0].id, **{field: 7})
    assert info.value.field == field
    assert store.load("c").revision == 1


def test_unknown_turn_is_named_never_its_body(store: Any) -> None:
    turns = fill(store, n=1)
    for call in (lambda: store.edit("c", "ghost", body="x"), lambda: store.retract("c", "ghost")):
        with pytest.raises(lf.InvalidInput) as info:
            call()
        assert "ghost" in str(info.value) and SECRET not in str(info.value)
    store.retract("c", turns[0].id)
    with pytest.raises(lf.InvalidInput):
        store.retract("c", turns[0].id)
    with pytest.raises(lf.InvalidInput):
        store.edit("other", turns[0].id, body="x")


def test_retract_removes_from_view_and_bumps_revision(store: Any) -> None:
    turns = fill(store, n=3)
    store.retract("c", turns[1].id)
    loaded = store.load("c")
    assert loaded.turn_ids == (turns[0].id, turns[2].id) and loaded.revision == 2


def test_bad_input_names_the_field(store: Any) -> None:
    fill(store, n=4)
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: store.append("", "user", "b"), "conversation_id"),
        (lambda: store.append(5, "user", "b"), "conversation_id"),
        (lambda: store.append("c", "user", "b", id="  "), "id"),
        (lambda: store.append("c", "user", 3), "body"),
        (lambda: store.append("c", "user", "b", protected=1), "protected"),
        (lambda: store.append("c", "user", "\ud800"), "body"),
        (lambda: store.append_many("c", "nope"), "turns"),
        (lambda: store.append_many("c", [1]), "turns[0]"),
        (lambda: store.append_many("c", [{"role": "user"}]), "turns[0].body"),
        (lambda: store.start_plan("c", True, PV), "keep_tail"),
        (lambda: store.start_plan("c", 0, PV), "keep_tail"),
        (lambda: store.start_plan("c", 2, " "), "policy_version"),
        (lambda: store.start_plan("c", 2, PV, plan_id=""), "plan_id"),
        (lambda: store.commit_summary("s"), "envelope"),
        (lambda: store.record_failure("nope", "timeout"), "plan_id"),
        (lambda: store.record_failure("", "timeout"), "plan_id"),
        (lambda: store.context("c", ""), "policy_version"),
        (lambda: store.context("c", None), "policy_version"),
        (lambda: store.purge_through("c", -1, "r"), "sequence"),
        (lambda: store.purge_through("c", True, "r"), "sequence"),
        (lambda: store.purge_through("c", 2, ""), "reason"),
        (lambda: store.purge_through("unknown", 2, "r"), "conversation_id"),
        (lambda: store.purge_through("c", 2, "r", force="yes"), "force"),
        (lambda: store.sources_of("nope"), "summary_id"),
        (lambda: store.summaries_citing("c", ""), "turn_id"),
        (lambda: store.history_boundary(""), "conversation_id"),
    ]
    for call, field in cases:
        with pytest.raises(lf.InvalidInput) as info:
            call()
        assert info.value.field == field, (field, str(info.value))
    assert store.load("c").revision == 1


# ---------------------------------------------------------------- plans and summaries


def test_commit_makes_a_current_version_with_its_index(store: Any) -> None:
    turns = fill(store, n=8)
    envelope = summarise(store, keep_tail=3)
    assert envelope.source_ids == tuple(t.id for t in turns[:5])
    assert store.current_summary("c") == envelope
    assert [t.id for t in store.sources_of(envelope.id)] == list(envelope.source_ids)
    assert store.summaries_citing("c", turns[0].id) == [envelope.id]
    assert store.summaries_citing("c", turns[7].id) == []
    assert store.summaries_citing("other", turns[0].id) == []
    [record] = store.summary_history("c")
    assert (record.status, record.reason, record.envelope, record.plan_id) == (
        "current",
        None,
        envelope,
        envelope.plan_id,
    )
    assert record.created_at.endswith("+00:00")
    assert store.load("c").turns == tuple(turns)  # compaction deletes no turn


def test_a_newer_version_supersedes_the_current_one(store: Any) -> None:
    fill(store, n=8)
    first = summarise(store, keep_tail=5)
    fill(store, n=4)
    second = summarise(store, keep_tail=3)
    assert store.current_summary("c") == second
    assert [(r.envelope, r.status) for r in store.summary_history("c")] == [
        (first, "superseded"),
        (second, "current"),
    ]


def test_start_plan_supersedes_older_plans_and_late_results_are_rejected(store: Any) -> None:
    fill(store, n=8)
    old_plan = store.start_plan("c", 3, PV, plan_id="p-old")
    new_plan = store.start_plan("c", 3, PV)
    assert new_plan.plan_id.startswith("plan-") and new_plan.compacted_ids == old_plan.compacted_ids
    late = lf.create_summary_envelope(old_plan, store.load("c"), "s-late", PV, "late")
    write = store.commit_summary(late)
    assert (write.accepted, write.reason, write.detail) == (
        False,
        "stale-source",
        "superseded-plan",
    )
    assert store.current_summary("c") is None
    # The old plan ended without a record when the new one was registered: `abandoned`.
    abandoned, record = store.summary_history("c")
    assert (abandoned.status, abandoned.reason, abandoned.plan_id) == (
        "failed",
        "abandoned",
        old_plan.plan_id,
    )
    assert (record.status, record.reason, record.envelope) == ("rejected", "superseded-plan", late)
    assert store.summaries_citing("c", old_plan.compacted_ids[0]) == []  # rejected: no index
    fresh = lf.create_summary_envelope(new_plan, store.load("c"), "s-new", PV, "new")
    assert store.commit_summary(fresh).accepted
    # A plan yields at most one accepted version: the active plan is cleared on accept.
    again = replace(fresh, id="s-again")
    assert store.commit_summary(again).detail == "superseded-plan"
    with pytest.raises(lf.InvalidInput) as info:
        store.start_plan("c", 3, PV, plan_id="p-old")
    assert info.value.field == "plan_id"


def test_start_plan_on_an_unknown_conversation_is_empty(store: Any) -> None:
    plan = store.start_plan("nobody", 2, PV)
    assert plan.is_empty and plan.source_revision == 0


def test_commit_of_a_source_edited_during_generation_is_rejected_stale(store: Any) -> None:
    turns = fill(store, n=6)
    plan = store.start_plan("c", 2, PV)
    envelope = lf.create_summary_envelope(plan, store.load("c"), "s1", PV, "text")
    store.edit("c", turns[1].id, body="changed")
    write = store.commit_summary(envelope)
    assert (write.reason, write.detail) == ("stale-source", "source-modified")
    assert store.summary_history("c")[-1].status == "rejected"
    assert store.current_summary("c") is None


def test_commit_checks_the_plans_policy_version(store: Any) -> None:
    fill(store, n=6)
    plan = store.start_plan("c", 2, PV)
    envelope = lf.create_summary_envelope(plan, store.load("c"), "s1", "other-policy", "text")
    assert store.commit_summary(envelope).detail == "policy-mismatch"


def test_commit_none_is_invalid_and_records_nothing(store: Any) -> None:
    fill(store, n=4)
    store.start_plan("c", 2, PV)
    assert store.commit_summary(None) == lf.SummaryWrite(False, None, "invalid-summary", None)
    assert store.summary_history("c") == []


def test_summary_ids_are_never_reused(store: Any) -> None:
    fill(store, n=6)
    envelope = summarise(store, keep_tail=2, summary_id="s1")
    plan = store.start_plan("c", 2, PV)
    again = lf.create_summary_envelope(plan, store.load("c"), "s1", PV, "again")
    with pytest.raises(lf.InvalidInput) as info:
        store.commit_summary(again)
    assert "s1" in str(info.value)
    assert store.current_summary("c") == envelope


def test_record_failure_appears_in_history_without_envelope(store: Any) -> None:
    fill(store, n=4)
    plan = store.start_plan("c", 2, PV)
    store.record_failure(plan.plan_id, "summarizer-timeout")
    [record] = store.summary_history("c")
    assert (record.envelope, record.status, record.reason, record.plan_id) == (
        None,
        "failed",
        "summarizer-timeout",
        plan.plan_id,
    )


# ---------------------------------------------------------------- evidence index


def test_edit_marks_citing_summaries_stale_at_once(store: Any) -> None:
    turns = fill(store, n=8)
    first = summarise(store, keep_tail=5)
    second = summarise(store, keep_tail=3)
    store.edit("c", turns[7].id, body="tail edit")  # not a source: nothing goes stale
    assert store.current_summary("c") == second
    store.edit("c", turns[0].id, body=turns[0].body)  # same value: digest unchanged
    assert store.current_summary("c") == second
    store.edit("c", turns[0].id, body="changed")
    assert store.current_summary("c") is None
    statuses = [(r.envelope.id, r.status, r.reason) for r in store.summary_history("c")]
    assert statuses == [
        (first.id, "stale", "source-modified"),
        (second.id, "stale", "source-modified"),
    ]
    context = store.context("c", PV)
    assert context.fallback == "stale-summary:source-modified" and context.summary is None


def test_retract_marks_citing_summaries_stale_source_missing(store: Any) -> None:
    turns = fill(store, n=6)
    envelope = summarise(store, keep_tail=2)
    store.edit("c", turns[0].id, body="changed")
    store.retract("c", turns[1].id)  # missing outranks modified, as in check_summary
    [record] = store.summary_history("c")
    assert (record.status, record.reason) == ("stale", "source-missing")
    assert [t.id for t in store.sources_of(envelope.id)] == [t.id for t in turns[0:1] + turns[2:4]]
    assert store.context("c", PV).fallback == "stale-summary:source-missing"


# ---------------------------------------------------------------- context


def test_context_matches_assemble_context_in_every_state(store: Any) -> None:
    turns = fill(store, n=6)
    store.append("c", "user", "keep me", protected=True, protection_reason="active-constraint")
    fill(store, n=4)

    def expect(pv: str) -> lf.AssembledContext:
        history = store.summary_history("c")
        pointed = next(
            (r.envelope for r in reversed(history) if r.status in ("current", "stale")), None
        )
        return lf.assemble_context(store.load("c"), pointed, pv)

    def same(pv: str) -> lf.AssembledContext:
        got = store.context("c", pv)
        want = expect(pv)
        assert (got.items, got.fallback, got.fallback_id) == (
            want.items,
            want.fallback,
            want.fallback_id,
        )
        return got

    assert same(PV).fallback == "no-summary"
    envelope = summarise(store, keep_tail=3)
    used = same(PV)
    assert used.fallback is None and used.summary is not None
    assert used.summary.through_sequence == 8 and used.ids[1] == envelope.id
    assert same("policy-2").fallback == "stale-summary:policy-mismatch"
    store.append("c", "user", "appended later")
    assert same(PV).fallback is None
    store.append("c", "user", "clash", id=envelope.id)
    clash = same(PV)
    assert (clash.fallback, clash.fallback_id) == ("duplicate-id", envelope.id)
    store.retract("c", envelope.id)
    assert same(PV).fallback is None
    store.edit("c", turns[2].id, body="edited")
    assert same(PV).fallback == "stale-summary:source-modified"


def test_a_stale_version_stays_stale_when_its_source_is_edited_back(store: Any) -> None:
    turns = fill(store, n=6)
    summarise(store, keep_tail=2)
    store.edit("c", turns[0].id, body="changed")
    store.edit("c", turns[0].id, body=turns[0].body)
    context = store.context("c", PV)
    assert context.fallback == "stale-summary:source-modified"
    assert context.items == lf.assemble_context(store.load("c"), None, PV).items


def test_context_places_kept_turns_before_the_summary(store: Any) -> None:
    a = store.append("c", "user", "a")
    keep = store.append("c", "user", "rule", protected=True, protection_reason="active-constraint")
    b = store.append("c", "assistant", "b")
    fill(store, n=3)
    envelope = summarise(store, keep_tail=3)
    assert envelope.source_ids == (a.id, b.id)
    context = store.context("c", PV)
    assert context.ids[:2] == (keep.id, envelope.id) and len(context) == 5


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
        # Damaged rows read back as a StoreError naming table, column and row (issue 16).
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


def test_purge_records_the_boundary_and_keeps_protected_turns(store: Any) -> None:
    turns = fill(store, n=6)
    guard = store.append(
        "c", "user", "pending", protected=True, protection_reason="pending-confirmation"
    )
    fill(store, n=3)
    envelope = summarise(store, keep_tail=2)
    assert store.history_boundary("c") is None
    boundary = store.purge_through("c", 7, "retention-30d")
    assert isinstance(boundary, HistoryBoundary)
    assert (boundary.through_sequence, boundary.reason) == (7, "retention-30d")
    assert store.history_boundary("c") == boundary
    loaded = store.load("c")
    assert loaded.turns[0] == guard and len(loaded) == 4 and loaded.revision == 4
    # The current summary is sealed (SPEC §15.5): still current, still in the context.
    assert store.summary_history("c")[0].status == "current"
    context = store.context("c", PV)
    assert context.history_boundary == boundary and guard.id in context.ids
    assert context.summary is not None and context.summary.id == envelope.id
    assert store.sources_of(envelope.id) == [loaded.turns[1]]
    forced = store.purge_through("c", 7, "legal-hold-lifted", force=True)
    assert guard.id not in store.load("c").turn_ids and store.history_boundary("c") == forced
    assert turns[0].id not in store.load("c").turn_ids


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


def test_one_store_can_be_shared_by_threads(store: Any) -> None:
    def worker(n: int) -> None:
        for i in range(25):
            store.append("c", "user", f"{n}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loaded = store.load("c")
    assert [t.sequence for t in loaded.turns] == list(range(1, 101)) and loaded.revision == 100


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
