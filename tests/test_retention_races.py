"""Retention and erasure under pressure (SPEC §15.5): purging and deleting while compactions
run, the retention policy around turns a summary does not cover, and IDs reused after
`delete_conversation`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import file_has

MARK = "LATE-9c1e"


def quoting(request: lf.SummaryRequest) -> str:
    """A summary that quotes its turns, as extractive and model summaries do."""
    return " | ".join(turn.text for turn in request.turns)


def policy(**changes: object) -> lf.CompactionPolicy:
    settings: dict[str, object] = {"keep_tail": 4, "min_new_turns": 1, **changes}
    return lf.CompactionPolicy("p", **settings)  # type: ignore[arg-type]


# ------------------------------------------------------------------ retention policy


def test_retention_never_purges_a_turn_the_summary_does_not_cover() -> None:
    """An open tool call below the summary's slot is preserved raw (SPEC §15.3), not
    summarised: the retention policy purges only what the sealed summary covers, so the
    call stays in the context for its result to answer."""
    store = lf.SQLiteStore(":memory:")
    store.append("c", "user", "book me a flight", id="u0")
    call = json.dumps([{"id": "call-1", "type": "function", "function": {"name": "f"}}])
    store.append("c", "assistant", "", id="a1", group="g1", meta={"tool_calls": call})
    for index in range(2, 12):
        store.append("c", "user", f"body {index}", id=f"t{index}")
    outcome = lf.Compactor(store, policy(keep_tail=2, retain_days=0), quoting).compact("c")
    assert outcome.summary is not None and "a1" not in outcome.summary.source_ids
    assert [turn.id for turn in store.load("c").turns] == ["a1", "t10", "t11"]
    context = store.context("c", "p")
    assert context.fallback is None and "a1" in context.ids
    # The result arrives later: both stay in the ledger and the context. Sent, they would
    # not be adjacent (the summary and the tail lie between them), so the messages leave
    # both out until a compaction covers them together (SPEC §17.2).
    store.append("c", "tool", "ok", id="r1", group="g1", meta={"tool_call_id": "call-1"})
    context = store.context("c", "p")
    assert {"a1", "r1"} <= set(context.ids)
    messages = lf.to_chat_messages(context)
    assert len(messages) == len(context.items) - context.dropped
    roles = [m["role"] for m in messages]
    if "tool" in roles:  # sent only right after its call
        assert messages[roles.index("tool") - 1].get("tool_calls")


def test_retention_keeps_a_group_whose_member_is_protected() -> None:
    """A group with a protected member is preserved whole: retention purges neither member
    (the call would otherwise be gone while its protected result stays)."""
    store = lf.SQLiteStore(":memory:")
    call = json.dumps([{"id": "call-1", "type": "function", "function": {"name": "f"}}])
    store.append("c", "assistant", "", id="a0", group="g", meta={"tool_calls": call})
    store.append(
        "c",
        "tool",
        "receipt",
        id="r0",
        group="g",
        meta={"tool_call_id": "call-1"},
        protected=True,
        protection_reason="audit-evidence",
    )
    for index in range(2, 12):
        store.append("c", "user", f"body {index}", id=f"t{index}")
    lf.Compactor(store, policy(keep_tail=2, retain_turns=0), quoting).compact("c")
    assert [turn.id for turn in store.load("c").turns][:2] == ["a0", "r0"]


def test_retention_with_a_preserved_role_among_the_sources_keeps_the_summary_sound(
    tmp_path: Path,
) -> None:
    """`keep_roles` naming a role the summary covers (it was made without preserving it):
    the purge stops before that source, so every sealed source still precedes the live
    ones and a deep revalidation agrees with `context()` that the summary is current."""
    from ledgerfold.revalidate import revalidate_database

    path = tmp_path / "a.db"
    store = lf.SQLiteStore(path)
    for index in range(12):
        store.append("c", "system" if index == 3 else "user", f"b{index}", id=f"t{index}")
    summary = lf.Compactor(store, policy(keep_tail=2, preserve_roles=()), quoting).compact("c")
    assert summary.summary is not None and "t3" in summary.summary.source_ids
    boundary = store.apply_retention("c", retain_turns=0, keep_roles=("system",))
    assert boundary is not None and boundary.through_sequence == 3
    assert [turn.id for turn in store.load("c").turns][:2] == ["t3", "t4"]
    assert store.context("c", "p").fallback is None
    store.close()
    report = revalidate_database(path, mark_stale=False)
    assert (report.current, report.stale) == (1, 0), report.stale_summaries


# ------------------------------------------------------------------ late results


def test_a_late_result_citing_purged_turns_keeps_no_text(tmp_path: Path) -> None:
    """A compaction whose turns are purged while its summarizer runs is refused, and its
    text (made from the purged bodies) is not kept as a `rejected` record: a purge erases
    every such version, so this one counts as erased at once."""
    path = tmp_path / "a.db"
    store = lf.SQLiteStore(path)
    for index in range(12):
        store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")

    def purging(request: lf.SummaryRequest) -> str:
        store.purge_through("c", 3, "retention")
        return quoting(request)

    outcome = lf.Compactor(store, policy(), purging).compact("c")
    assert outcome == lf.CompactionOutcome("stale", None, "source-missing")
    assert store.summary_history("c") == [] and store.pruned_count("c") == 1
    assert store.context("c", "p").fallback == "no-summary"
    store.close()
    assert not file_has(path, f"{MARK}-001")
    assert file_has(path, f"{MARK}-005")  # after the boundary: still in the ledger


def test_a_late_result_of_a_deleted_conversation_keeps_no_text(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = lf.SQLiteStore(path)
    for index in range(12):
        store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")

    def deleting(request: lf.SummaryRequest) -> str:
        store.delete_conversation("c")
        return quoting(request)

    outcome = lf.Compactor(store, policy(), deleting).compact("c")
    assert outcome == lf.CompactionOutcome("stale", None, "superseded-plan")
    assert store.conversation_ids() == [] and store.summary_history("c") == []
    store.close()
    assert not file_has(path, MARK)


def test_a_late_result_after_the_conversation_was_deleted_and_recreated_keeps_no_text(
    tmp_path: Path,
) -> None:
    """The same conversation ID in use again does not make the deleted one's plan known:
    its late result (text from erased turns) is refused and leaves no record."""
    path = tmp_path / "a.db"
    store = lf.SQLiteStore(path)
    for index in range(12):
        store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
    plan = store.start_plan("c", 2, "p")
    late = lf.create_summary_envelope(plan, store.load("c").turns, "late", "p", f"{MARK}-summary")
    assert late is not None
    store.delete_conversation("c")
    for index in range(12):
        store.append("c", "user", f"new body {index}", id=f"t{index}")
    write = store.commit_summary(late)
    assert (write.accepted, write.reason, write.detail) == (
        False,
        "stale-source",
        "superseded-plan",
    )
    assert store.summary_history("c") == []
    store.close()
    assert not file_has(path, MARK)


def test_a_late_result_extending_the_sealed_summary_is_still_recorded() -> None:
    """Sources inherited from the sealed parent are not erased content (the sealed text is
    kept by design): a superseded result extending it keeps its `rejected` record."""
    from ledgerfold._summary import extended_fingerprint

    store = lf.SQLiteStore(":memory:")
    for index in range(12):
        store.append("c", "user", f"body {index}", id=f"t{index}")
    sealed = lf.Compactor(store, policy(), quoting).compact("c").summary
    assert sealed is not None
    store.purge_through("c", 3, "retention")
    for index in range(12, 18):
        store.append("c", "user", f"body {index}", id=f"t{index}")
    older = store.begin_compaction("c", 4, "p")
    store.begin_compaction("c", 4, "p")  # supersedes the older plan
    assert older.plan is not None and older.parent == sealed
    late = lf.SummaryEnvelope(
        id="late",
        plan_id=older.plan.plan_id,
        conversation_id="c",
        source_revision=older.plan.source_revision,
        source_ids=sealed.source_ids + tuple(turn.id for turn in older.new_turns),
        source_fingerprint=extended_fingerprint(older.parent_digests, older.new_turns),
        policy_version="p",
        text="extends the sealed summary",
        parent_id=sealed.id,
    )
    assert store.commit_summary(late).detail == "superseded-plan"
    record = store.summary_history("c")[-1]
    assert (record.status, record.envelope) == ("rejected", late)
    assert store.pruned_count("c") == 0


# ------------------------------------------------------------------ IDs reused after delete


def test_a_summary_id_reused_after_delete_reads_the_new_version() -> None:
    """`delete_conversation`, then the same conversation, plan and summary IDs again: the
    store serves the new summary, never the deleted one it read before."""
    store = lf.SQLiteStore(":memory:")

    def lifetime(word: str) -> None:
        for index in range(6):
            store.append("c", "user", f"{word} {index}", id=f"t{index}")
        plan = store.start_plan("c", 2, "p", plan_id="plan-1")
        envelope = lf.create_summary_envelope(plan, store.load("c"), "s1", "p", f"{word} text")
        assert store.commit_summary(envelope).accepted
        context = store.context("c", "p")
        assert context.summary is not None and context.summary.text == f"{word} text"
        current = store.current_summary("c")
        assert current is not None and current.text == f"{word} text"
        assert lf.check_summary(current, store.load("c"), "p").current

    lifetime("old")
    store.delete_conversation("c")
    lifetime("new")
    assert [r.envelope.text for r in store.summary_history("c") if r.envelope] == ["new text"]


def test_rolling_summaries_with_ids_reused_after_delete_are_sound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same with summary IDs a deterministic factory hands out again: a rolling summary
    of the new conversation extends its own parent's digests, never the deleted parent's
    that the store remembered for the same row and ID."""
    import itertools

    from ledgerfold import _compactor as compactor

    store = lf.SQLiteStore(":memory:")
    for word in ("old", "new"):
        ids = itertools.count()
        monkeypatch.setattr(compactor, "_random_summary_id", lambda ids=ids: f"s{next(ids)}")
        loop = lf.Compactor(store, policy(keep_tail=2), quoting)
        for index in range(12):
            store.append("c", "user", f"{word} {index}", id=f"t{index}")
            if index in (5, 11):
                assert loop.compact("c").status == "accepted"
        rolling = store.current_summary("c")
        assert rolling is not None and rolling.id == "s1" and rolling.parent_id == "s0"
        assert lf.check_summary(rolling, store.load("c"), "p").current
        assert word in rolling.text
        store.delete_conversation("c")


# ------------------------------------------------------------------ previews only read


def test_a_purge_preview_only_reads(tmp_path: Path) -> None:
    """`preview_purge` and `purge --dry-run` write nothing, so they work on a store opened
    read-only (SPEC §15.7: commands that only read never change a file)."""
    from click.testing import CliRunner

    from ledgerfold._cli import cli

    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        for index in range(12):
            store.append("c", "user", f"body {index}", id=f"t{index}")
        summary = lf.Compactor(store, policy(), quoting).compact("c").summary
        assert summary is not None
        expected = store.preview_purge("c", 3)
    with lf.SQLiteStore(path, read_only=True) as reader:
        assert reader.preview_purge("c", 3) == expected
        assert expected["sealed_summary"] == summary.id and expected["turns"] == 3
    before = path.read_bytes()
    args = ["purge", str(path), "c", "--through", "3", "--reason", "r", "--dry-run", "--json"]
    opened: list[bool] = []
    real = lf.SQLiteStore.__init__

    def spy(self: lf.SQLiteStore, *args: object, **kwargs: object) -> None:
        opened.append(bool(kwargs.get("read_only")))
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lf.SQLiteStore, "__init__", spy)
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["sealed_summary"] == summary.id
    assert opened == [True] and path.read_bytes() == before


# ------------------------------------------------------------------ retention arguments


def test_a_retention_longer_than_the_calendar_purges_nothing() -> None:
    """`retain_days` the policy accepts (below 1e9) but reaching before year 1: no turn is
    that old, so nothing is due (it raised OverflowError out of an accepted `compact()`)."""
    store = lf.SQLiteStore(":memory:")
    for index in range(10):
        store.append("c", "user", f"body {index}", id=f"t{index}")
    outcome = lf.Compactor(store, policy(retain_days=1e6), quoting).compact("c")
    assert outcome.status == "accepted" and store.history_boundary("c") is None
    for days in (1e6, 1e9, 1e300):
        assert store.apply_retention("c", retain_days=days) is None
    assert len(store.load("c").turns) == 10


# ------------------------------------------------------------------ the command line


def test_inspect_counts_sealed_sources_and_erased_versions(tmp_path: Path) -> None:
    """After a purge `inspect` says how many of the summary's sources are sealed (it
    reported only the live ones as what it covers) and how many versions were pruned or
    erased: counts, never their text."""
    from click.testing import CliRunner

    from ledgerfold._cli import cli

    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        for index in range(12):
            store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
        loop = lf.Compactor(store, policy(), quoting)
        loop.compact("c")
        for index in range(12, 18):
            store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
        summary = loop.compact("c").summary
        assert summary is not None
        store.purge_through("c", 3, "retention")
    runner = CliRunner()
    report = json.loads(runner.invoke(cli, ["inspect", str(path), "c", "--json"]).output)
    assert (report["sealed_sources"], report["pruned_versions"]) == (3, 1)
    assert len(report["sources"]) + 3 == len(summary.source_ids)
    text = runner.invoke(cli, ["inspect", str(path), "c"]).output
    assert f"covers {len(summary.source_ids)} turns" in text and "3 purged, sealed" in text
    assert "1 older summary version pruned or erased" in text


def test_a_turn_retracted_earlier_can_be_erased_later(tmp_path: Path) -> None:
    """`retract(..., erase=True)` of a turn retracted before erases its body (it raised
    `InvalidInput`, so the body stayed until a purge took every turn before it)."""
    path = tmp_path / "a.db"
    store = lf.SQLiteStore(path)
    for index in range(4):
        store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
    store.edit("c", "t1", body=f"{MARK}-edited")
    store.retract("c", "t1")
    revision = store.load("c").revision
    store.retract("c", "t1", erase=True)
    assert not file_has(path, f"{MARK}-001") and not file_has(path, f"{MARK}-edited")
    assert store.load("c").revision == revision and store.load("c").get("t1") is None
    store.retract("c", "t1", erase=True)  # erasing again changes nothing
    for turn_id, erase in (("t1", False), ("nope", True)):  # not live, not a turn
        with pytest.raises(lf.InvalidInput) as caught:
            store.retract("c", turn_id, erase=erase)
        assert caught.value.field == "turn_id"
    store.close()


def test_compact_dry_run_after_a_purge_extends_the_sealed_summary(tmp_path: Path) -> None:
    """`compact --dry-run` after a purge said `rebase` and listed every live compactable
    turn, while `compact` extends the sealed summary with the new turns only."""
    from click.testing import CliRunner

    from ledgerfold._cli import cli

    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        for index in range(12):
            store.append("c", "user", f"body {index}", id=f"t{index}")
        lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=4), quoting).compact(
            "c", force=True
        )
        store.purge_through("c", 3, "retention")
        for index in range(12, 18):
            store.append("c", "user", f"body {index}", id=f"t{index}")
    args = ["compact", str(path), "--conversation", "c", "--keep-tail", "4", "--json"]
    runner = CliRunner()
    [planned] = json.loads(runner.invoke(cli, [*args, "--dry-run"]).output)
    assert planned["status"] == "rolling" and planned["new_turns"] == 6
    assert [turn for r in planned["requests"] for turn in r["turns"]] == [
        f"t{index}" for index in range(8, 14)
    ]
    [done] = json.loads(runner.invoke(cli, args).output)
    assert done["status"] == "accepted" and done["sources"] == 8 + 6


# ------------------------------------------------------------------ read-only, logs


def test_a_read_only_store_refuses_every_erasure(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        for index in range(10):
            store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
        lf.Compactor(store, policy(), quoting).compact("c")
    before = path.read_bytes()
    with lf.SQLiteStore(path, read_only=True) as reader:
        calls: dict[str, Callable[[], object]] = {
            "purge_through": lambda: reader.purge_through("c", 3, "r"),
            "apply_retention": lambda: reader.apply_retention("c", retain_turns=0),
            "delete_conversation": lambda: reader.delete_conversation("c"),
            "retract": lambda: reader.retract("c", "t1", erase=True),
        }
        for name, call in calls.items():
            with pytest.raises(lf.StoreError, match=f"^{name}: the store was opened read-only"):
                call()
        assert len(reader.load("c").turns) == 10
    assert path.read_bytes() == before


def test_erasure_logs_and_errors_carry_no_text(caplog: pytest.LogCaptureFixture) -> None:
    store = lf.SQLiteStore(":memory:")
    for index in range(10):
        store.append("c", "user", f"{MARK}-{index:03d}", id=f"t{index}")
    with caplog.at_level("DEBUG", logger="ledgerfold"):
        lf.Compactor(store, policy(retain_turns=2), quoting).compact("c")
        store.purge_through("c", 7, f"{MARK}-reason")
        store.retract("c", "t8", erase=True)
        store.delete_conversation("c")
    assert caplog.records and all(MARK not in record.getMessage() for record in caplog.records)
