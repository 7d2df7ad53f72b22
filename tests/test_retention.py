"""Retention and erasure (SPEC §15.5): sealed summaries at purge, erased versions,
secure deletion (no body bytes left in the file or its WAL), `delete_conversation`,
`retract(erase=True)`, the retention policy and the `purge` / `delete` commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from cli_support import file_has, run
from ledgerfold.revalidate import revalidate_database

MARK = "ERASEME-7f3a"
CALL = {"id": "call-1", "type": "function", "function": {"name": "find", "arguments": "{}"}}


def neutral(request: lf.SummaryRequest) -> str:
    """A summary that quotes no body, so a body marker can only be in the turns."""
    return f"summary of {len(request.turns)} turns"


def filled(path: Path, turns: int = 12, conversation: str = "c") -> lf.SQLiteStore:
    store = lf.SQLiteStore(path)
    for index in range(turns):
        role = "user" if index % 2 == 0 else "assistant"
        store.append(conversation, role, f"{MARK}-{index:03d} " + "x" * 200, id=f"t{index}")
    return store


def compacted(store: lf.SQLiteStore, conversation: str = "c", **policy: Any) -> lf.SummaryEnvelope:
    settings: dict[str, Any] = {"keep_tail": 4, "min_new_turns": 1, **policy}
    outcome = lf.Compactor(store, lf.CompactionPolicy("p", **settings), neutral).compact(
        conversation
    )
    assert outcome.status == "accepted", outcome
    assert outcome.summary is not None
    return outcome.summary


# ------------------------------------------------------------------ the core: sealed sources


def test_check_summary_takes_sealed_digests_for_purged_sources() -> None:
    turns = [lf.Turn(f"t{i}", i + 1, "user", f"body {i}") for i in range(4)]
    whole = lf.Conversation("c", 1, turns)
    plan = lf.plan_compaction(whole, 1, "plan")
    envelope = lf.create_summary_envelope(plan, whole, "s", "p", "text")
    assert envelope is not None and envelope.source_ids == ("t0", "t1", "t2")
    after = lf.Conversation("c", 2, turns[2:])  # t0 and t1 purged
    sealed = {"t0": turns[0].digest, "t1": turns[1].digest}
    assert lf.check_summary(envelope, after, "p").reason == "source-missing"
    assert lf.check_summary(envelope, after, "p", sealed=sealed).current
    wrong = {"t0": turns[0].digest, "t1": turns[0].digest}
    assert lf.check_summary(envelope, after, "p", sealed=wrong).reason == "source-modified"
    # A live source still changes the verdict: sealing covers the purged part only.
    edited = lf.Conversation("c", 3, [turns[2].replace(body="changed"), turns[3]])
    assert lf.check_summary(envelope, edited, "p", sealed=sealed).reason == "source-modified"
    # The context keeps the summary, before every live turn above the boundary.
    context = lf.assemble_context(after, envelope, "p", sealed=sealed)
    assert context.fallback is None and context.ids == ("s", "t3")
    assert context.summary is not None and context.summary.through_sequence == 3


def test_a_sealed_entry_never_stands_in_for_a_live_turn() -> None:
    """Sealed digests resolve only sources the ledger no longer holds: a live turn named in
    the mapping too is checked live, so an edit of it is never hidden."""
    turns = [lf.Turn(f"t{i}", i + 1, "user", f"body {i}") for i in range(4)]
    whole = lf.Conversation("c", 1, turns)
    envelope = lf.create_summary_envelope(
        lf.plan_compaction(whole, 1, "plan"), whole, "s", "p", "x"
    )
    assert envelope is not None
    edited = lf.Conversation("c", 2, [turns[0], turns[1].replace(body="changed"), *turns[2:]])
    stale_digest = {"t1": turns[1].digest}  # the digest the summary was built from
    checked = lf.check_summary(envelope, edited, "p", sealed=stale_digest)
    assert checked.reason == "source-modified"
    assert lf.assemble_context(edited, envelope, "p", sealed=stale_digest).fallback is not None
    assert lf.check_summary(envelope, whole, "p", sealed=stale_digest).current


def test_a_summary_with_only_sealed_sources_goes_first() -> None:
    turns = [lf.Turn(f"t{i}", i + 1, "user", f"body {i}") for i in range(3)]
    plan = lf.plan_compaction(lf.Conversation("c", 1, turns), 1, "plan")
    envelope = lf.create_summary_envelope(plan, lf.Conversation("c", 1, turns), "s", "p", "x")
    assert envelope is not None
    after = lf.Conversation("c", 2, turns[2:])
    sealed = {"t0": turns[0].digest, "t1": turns[1].digest}
    context = lf.assemble_context(after, envelope, "p", sealed=sealed)
    assert context.ids == ("s", "t2")
    assert context.summary is not None and context.summary.through_sequence == 2


@pytest.mark.parametrize(
    ("sealed", "problem"),
    [(["t0"], "wrong-type"), ({"t0": b"short"}, "out-of-range"), ({"t0": "text"}, "wrong-type")],
)
def test_bad_sealed_argument(sealed: Any, problem: str) -> None:
    turns = [lf.Turn("t0", 1, "user", "a"), lf.Turn("t1", 2, "user", "b")]
    conversation = lf.Conversation("c", 1, turns)
    plan = lf.plan_compaction(conversation, 1, "plan")
    envelope = lf.create_summary_envelope(plan, conversation, "s", "p", "x")
    assert envelope is not None
    with pytest.raises(lf.InvalidInput) as caught:
        lf.check_summary(envelope, conversation, "p", sealed=sealed)
    assert (caught.value.field, caught.value.problem) == ("sealed", problem)


# ------------------------------------------------------------------ the store: purge seals


def test_purge_seals_the_current_summary_and_erases_older_versions(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 10)
    first = compacted(store)
    for index in range(10, 14):
        store.append("c", "user", f"late {index}", id=f"t{index}")
    second = compacted(store)
    assert second.parent_id == first.id
    store.purge_through("c", 3, "retention")
    # The summary stays: the context holds it, the turns after the boundary and the boundary.
    context = store.context("c", "p")
    assert context.fallback is None and context.summary is not None
    assert context.summary.id == second.id
    assert context.history_boundary is not None
    assert context.history_boundary.through_sequence == 3
    assert not {"t0", "t1", "t2"} & set(context.ids)
    assert store.current_summary("c") == second
    # The older version cited purged turns: erased, counted, not listed.
    history = store.summary_history("c")
    assert [record.envelope.id for record in history if record.envelope] == [second.id]
    assert store.pruned_count("c") == 1
    # A later compaction extends the sealed summary and inherits its purged sources.
    for index in range(14, 18):
        store.append("c", "user", f"later {index}", id=f"t{index}")
    third = compacted(store)
    assert third.parent_id == second.id
    assert third.source_ids[:3] == ("t0", "t1", "t2")
    assert store.context("c", "p").summary.id == third.id  # type: ignore[union-attr]
    # Deep revalidation re-hashes the live sources and trusts the sealed digests.
    report = revalidate_database(tmp_path / "a.db", mark_stale=False)
    assert (report.current, report.stale) == (1, 0)
    store.close()


def test_a_summary_that_is_no_longer_current_is_not_sealed(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 10)
    compacted(store)
    store.edit("c", "t1", body="changed")
    preview = store.preview_purge("c", 3)
    assert preview["sealed_summary"] is None and preview["versions_erased"] == 1
    store.purge_through("c", 3, "retention")
    assert store.summary_history("c") == []
    assert store.context("c", "p").fallback == "no-summary"
    store.close()


def test_revalidation_still_catches_a_tampered_live_source(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 10)
    summary = compacted(store)
    store.purge_through("c", 2, "retention")
    store._connection().execute(
        "UPDATE turns SET body = body || '!' WHERE conversation_id = 'c' AND id = 't4'"
    )
    store.close()
    report = revalidate_database(tmp_path / "a.db", mark_stale=False)
    assert [(s.summary_id, s.reason) for s in report.stale_summaries] == [
        (summary.id, "source-modified")
    ]


def test_preview_writes_nothing(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 10)
    summary = compacted(store)
    before = (store.load("c"), store.summary_history("c"), store.context("c", "p"))
    preview = store.preview_purge("c", 20, force=True)
    assert preview["turns"] == 10 and preview["sealed_summary"] == summary.id
    assert preview["last_sequence"] == 10
    assert (store.load("c"), store.summary_history("c"), store.context("c", "p")) == before
    assert store.history_boundary("c") is None
    store.close()


# ------------------------------------------------------------------ no body bytes left


def test_no_erased_body_remains_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = filled(path, 12)
    store.edit("c", "t1", body=f"{MARK}-edited")  # an earlier version in turn_history
    compacted(store)
    store.append("d", "user", f"{MARK}-other " + "y" * 5000)  # an overflow page
    assert file_has(path, f"{MARK}-000") and file_has(path, f"{MARK}-edited")
    store.purge_through("c", 3, "retention")
    for gone in (f"{MARK}-000", f"{MARK}-001", f"{MARK}-002", f"{MARK}-edited"):
        assert not file_has(path, gone), gone
    assert file_has(path, f"{MARK}-003")  # after the boundary: kept
    store.retract("c", "t5", erase=True)
    assert not file_has(path, f"{MARK}-005")
    assert store.load("c").get("t5") is None
    store.delete_conversation("d")
    assert not file_has(path, f"{MARK}-other")
    assert "d" not in store.conversation_ids()
    store.delete_conversation("c")
    store.close()
    assert not file_has(path, MARK)


def test_secure_delete_is_on_even_where_sqlite_defaults_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many SQLite builds compile secure deletion on; the store must not rely on that."""
    import sqlite3

    from ledgerfold.store import _database as database

    real_connect = sqlite3.connect

    def connect_insecure(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(database.sqlite3, "connect", connect_insecure)
    with lf.SQLiteStore(tmp_path / "a.db") as store:
        assert store._connection().execute("PRAGMA secure_delete").fetchone()[0] == 1


def test_retract_without_erase_keeps_the_body(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = filled(path, 4)
    store.retract("c", "t1")
    store.close()
    assert file_has(path, f"{MARK}-001")


def test_delete_conversation_erases_every_row(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 10)
    compacted(store)
    store.purge_through("c", 2, "retention")
    filled_other = store.append("e", "user", "kept")
    store.delete_conversation("c")
    conn = store._connection()
    for table in ("turns", "summaries", "plans", "history_boundaries", "active_plans"):
        assert conn.execute(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = 'c'").fetchone()
        assert not conn.execute(
            f"SELECT COUNT(*) FROM {table} WHERE conversation_id = 'c'"
        ).fetchone()[0], table
    assert conn.execute("SELECT COUNT(*) FROM summary_sources").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM turn_history").fetchone()[0] == 0
    assert store.load("c") == lf.Conversation("c", 0, ())
    assert store.load("e").turns == (filled_other,)
    store.delete_conversation("never-written")  # not an error
    with pytest.raises(lf.InvalidInput):
        store.delete_conversation("")
    store.close()


# ------------------------------------------------------------------ the retention policy


def test_a_deleted_conversations_reused_rows_never_lend_their_digests(tmp_path: Path) -> None:
    """SQLite reuses the rowid of a deleted newest row: a rolling summary of another
    conversation that lands on a deleted version's row must be checked from its own parent's
    digests, not from what the store remembered for that row (found by the state machine)."""
    store = filled(tmp_path / "db", turns=12, conversation="old")
    with store:
        compacted(store, "old")
        for index in range(12, 16):
            store.append("old", "user", f"old {index}", id=f"t{index}")
        assert compacted(store, "old").parent_id is not None  # parent digests now remembered
        store.delete_conversation("old")
        for index in range(12):
            store.append("new", "user", f"new body {index}", id=f"n{index}")
        compacted(store, "new")
        for index in range(12, 16):
            store.append("new", "user", f"new body {index}", id=f"n{index}")
        rolling = compacted(store, "new")
        assert rolling.parent_id is not None
        assert lf.check_summary(rolling, store.load("new"), "p").current
        assert store.context("new", "p").summary is not None


def test_a_sealed_summary_is_never_superseded_by_a_rebase(tmp_path: Path) -> None:
    """Purged turns live on only in the sealed summary's text: a rebase (here: coverage would
    shrink after the tail's last turn is retracted) would replace it with a summary of the
    live turns alone. The compaction is skipped instead, and extends the sealed summary once
    the plan covers its live sources again; the dry run says the same."""
    db = tmp_path / "a.db"
    store = filled(db, 12)
    sealed = compacted(store)  # t0..t7
    store.purge_through("c", 4, "retention")
    store.retract("c", "t11")
    policy = lf.CompactionPolicy("p", keep_tail=4, min_new_turns=1)
    outcome = lf.Compactor(store, policy, neutral).compact("c", force=True)
    assert outcome == lf.CompactionOutcome("skipped", None, "nothing-to-compact")
    assert store.context("c", "p").summary.id == sealed.id  # type: ignore[union-attr]
    store.close()
    dry = run(
        "compact", str(db), "--keep-tail", "4", "--policy-version", "p", "--dry-run", "--json"
    )
    assert dry.exit_code == 0 and json.loads(dry.output)[0]["status"] == "nothing-to-compact"
    with lf.SQLiteStore(db) as store:
        for index in range(12, 16):
            store.append("c", "user", f"later {index}", id=f"t{index}")
        rolling = compacted(store)
        assert rolling.parent_id == sealed.id
        assert set(sealed.source_ids) <= set(rolling.source_ids)
        assert store.context("c", "p").summary.id == rolling.id  # type: ignore[union-attr]


def test_erasing_a_turn_erases_the_summaries_that_quote_it(tmp_path: Path) -> None:
    """`retract(erase=True)`: the summaries built from the turn go too (an extractive one
    quotes it), counted as pruned; the marker is nowhere in the file."""
    db = tmp_path / "a.db"
    store = lf.SQLiteStore(db)
    for index in range(12):
        store.append("c", "user", f"note {index}", id=f"t{index}")
    store.edit("c", "t2", body=f"card {MARK}-PAN")
    policy = lf.CompactionPolicy("p", keep_tail=4, min_new_turns=1)
    summary = lf.Compactor(store, policy).compact("c").summary  # ExtractiveSummarizer
    assert summary is not None and MARK in summary.text
    store.retract("c", "t2", erase=True)
    assert store.summary_history("c") == []
    assert store.pruned_count("c") == 1
    assert store.context("c", "p").summary is None
    store.close()
    assert not file_has(db, MARK)


def test_a_purge_never_leaves_a_tool_result_without_its_call(tmp_path: Path) -> None:
    """A purge through the middle of a tool-call group (the call purged, its result raw)
    would send a `tool` message without its call, which providers refuse: without `force`
    it stops before the group, and the boundary and the preview say so."""
    store = lf.SQLiteStore(tmp_path / "a.db")
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "Where is order 7?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call-1", "content": "order 7: shipped"},
            {"role": "assistant", "content": "It shipped."},
        ],
    )
    assert store.preview_purge("c", 2)["through_sequence"] == 1
    assert store.purge_through("c", 2, "retention").through_sequence == 1
    messages = lf.to_chat_messages(store.context("c", "p"))
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant"]
    forced = store.purge_through("c", 2, "retention", force=True)  # as asked
    assert forced.through_sequence == 2
    store.close()


def test_retain_turns_purges_what_the_summary_covers(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 12)
    summary = compacted(store, retain_turns=6)
    boundary = store.history_boundary("c")
    assert boundary is not None and boundary.reason == "retention"
    assert boundary.through_sequence == 6  # the 6 newest stay, all covered ones before go
    context = store.context("c", "p")
    assert context.summary is not None and context.summary.id == summary.id
    assert [turn.sequence for turn in store.load("c").turns] == list(range(7, 13))


def test_retain_days_zero_purges_every_covered_turn_but_not_the_tail(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 12)
    summary = compacted(store, retain_days=0)
    assert [turn.id for turn in store.load("c").turns] == ["t8", "t9", "t10", "t11"]
    assert store.context("c", "p").summary.id == summary.id  # type: ignore[union-attr]
    # Nothing is due without a current summary.
    assert store.apply_retention("other", retain_turns=0) is None


def test_retention_keeps_the_system_prompt_raw(tmp_path: Path) -> None:
    """The policy's preserved roles are never summarised, so retention does not purge them
    either: the system prompt stays raw in the context (`preserve_roles=()` lets it go)."""
    for preserve, kept in ((("system",), ["sys", "t8", "t9", "t10", "t11"]), ((), ["t10", "t11"])):
        db = tmp_path / f"{len(preserve)}.db"
        store = lf.SQLiteStore(db)
        store.append(
            "c", "system", "You are the airline agent. Never rebook basic economy.", id="sys"
        )
        for index in range(12):
            store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
        compacted(store, retain_days=0, preserve_roles=preserve, keep_tail=2 if not preserve else 4)
        assert [turn.id for turn in store.load("c").turns] == kept
        context = store.context("c", "p")
        assert context.summary is not None
        assert ("sys" in context.ids) == bool(preserve)
        store.close()


def test_preview_counts_the_turns_no_summary_keeps(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 10)
    store.edit("c", "t0", role="system")  # a preserved role: kept raw, in no summary
    # No summary yet: all of them but the system turn, which stays (a preserved role).
    assert store.preview_purge("c", 3)["unsummarised"] == 2
    compacted(store, keep_tail=4)
    preview = store.preview_purge("c", 3)
    # The system turn stays (a preserved role) unless forced, or no role is kept.
    assert preview["sealed_summary"] is not None and preview["unsummarised"] == 0
    assert preview["roles_kept"] == 1
    assert store.preview_purge("c", 3, keep_roles=())["unsummarised"] == 1
    assert store.preview_purge("c", 3, force=True)["unsummarised"] == 1
    store.close()
    args = ("purge", str(tmp_path / "a.db"), "c", "--through", "3", "--reason", "r", "--force")
    warned = run(*args)
    assert warned.exit_code == 0
    assert "1 of these turns is in no current summary" in warned.stderr


def test_no_retention_by_default(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 12)
    compacted(store)
    assert store.history_boundary("c") is None


@pytest.mark.parametrize(
    ("field", "value"), [("retain_turns", -1), ("retain_days", -1.0), ("retain_days", "7")]
)
def test_bad_retention_values(field: str, value: Any) -> None:
    with pytest.raises(lf.InvalidInput) as caught:
        lf.CompactionPolicy("p", **{field: value})
    assert caught.value.field == field


# ------------------------------------------------------------------ the command line


def test_purge_dry_run_and_json(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    store = filled(db, 10)
    summary = compacted(store)
    store.close()
    dry = run("purge", str(db), "c", "--through", "3", "--reason", "r", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.output)
    assert report["dry_run"] is True and report["turns"] == 3
    assert report["sealed_summary"] == summary.id
    with lf.SQLiteStore(db) as reopened:
        assert reopened.history_boundary("c") is None and len(reopened.load("c").turns) == 10
    done = run("purge", str(db), "c", "--through", "3", "--reason", "r")
    assert done.exit_code == 0 and "sealed" in done.output
    with lf.SQLiteStore(db) as reopened:
        assert reopened.history_boundary("c") is not None


def test_purge_through_beyond_the_last_sequence_needs_force(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    filled(db, 5).close()
    refused = run("purge", str(db), "c", "--through", "999", "--reason", "r")
    assert refused.exit_code == 2 and "beyond the last sequence" in refused.output
    with lf.SQLiteStore(db) as reopened:
        assert len(reopened.load("c").turns) == 5
    forced = run("purge", str(db), "c", "--through", "999", "--reason", "r", "--force", "--json")
    assert forced.exit_code == 0 and json.loads(forced.output)["turns"] == 5
    with lf.SQLiteStore(db) as reopened:  # recorded as the last sequence, not 999
        assert reopened.history_boundary("c").through_sequence == 5  # type: ignore[union-attr]


def test_delete_needs_yes(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    filled(db, 5).close()
    refused = run("delete", str(db), "c")
    assert refused.exit_code == 2 and "--yes" in refused.output
    with lf.SQLiteStore(db) as reopened:
        assert reopened.conversation_ids() == ["c"]
    done = run("delete", str(db), "c", "--yes", "--json")
    assert done.exit_code == 0 and json.loads(done.output)["deleted"] is True
    with lf.SQLiteStore(db) as reopened:
        assert reopened.conversation_ids() == []
    assert not file_has(db, MARK)


def test_bad_arguments_name_their_field(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.db", 3)
    calls = {
        "erase": lambda: store.retract("c", "t0", erase=1),  # type: ignore[arg-type]
        "retain_turns": lambda: store.apply_retention("c", retain_turns=-1),
        "retain_days": lambda: store.apply_retention("c", retain_days=float("nan")),
        "force": lambda: store.preview_purge("c", 1, force="yes"),  # type: ignore[arg-type]
        "conversation_id": lambda: store.preview_purge("nope", 1),
        "keep_roles": lambda: store.apply_retention("c", retain_turns=0, keep_roles=["admin"]),
    }
    for field, call in calls.items():
        with pytest.raises(lf.InvalidInput) as caught:
            call()
        assert caught.value.field == field
    assert len(store.load("c").turns) == 3
    store.close()
