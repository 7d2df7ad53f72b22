"""Events where the change happens (SPEC §17.8): the Compactor's outcomes and fallbacks, the
store's stale marks, purges, erasures and deletions — after the commit, with IDs, counts,
tokens and seconds, never text; a hook that raises changes nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf

SECRET = "SECRET-7c1e-body-text"
PV = "events-v1"


class Recorder:
    def __init__(self) -> None:
        self.events: list[lf.Event] = []
        self.threads: list[str] = []

    def __call__(self, event: lf.Event) -> None:
        self.events.append(event)
        self.threads.append(threading.current_thread().name)

    def named(self, name: str) -> list[lf.Event]:
        return [event for event in self.events if event.name == name]


def no_text(events: list[lf.Event]) -> None:
    for event in events:
        assert SECRET not in repr(event), event.name


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def filled(path: Path, recorder: Recorder, n: int = 20) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path, on_event=recorder)
    for i in range(n):
        store.append("c", "user" if i % 2 == 0 else "assistant", f"{SECRET} {i}", id=f"t{i}")
    return store


def policy(**changes: Any) -> lf.CompactionPolicy:
    return lf.CompactionPolicy(PV, **{"keep_tail": 4, "min_new_turns": 1, **changes})


def test_an_accepted_compaction_reports_turns_tokens_and_seconds(
    tmp_path: Path, recorder: Recorder
) -> None:
    with filled(tmp_path / "a.db", recorder) as store:
        outcome = lf.Compactor(store, policy(), on_event=recorder).compact("c")
    assert outcome.accepted and outcome.summary is not None
    [event] = recorder.named("compaction.accepted")
    assert event.conversation_id == "c" and event.summary_ids == (outcome.summary.id,)
    assert event.turns == 16 and event.tokens_in > 0 and event.tokens_out > 0
    assert event.seconds is not None and event.seconds >= 0
    assert dict(event.extra)["rolling"] == 0
    no_text(recorder.events)


def test_an_accepted_compaction_is_reported_before_the_purge_it_leads_to(
    tmp_path: Path, recorder: Recorder
) -> None:
    """The policy's retention runs after the summary is accepted; its event follows the
    compaction's (whose seconds are the compaction's own, not the purge's)."""
    with filled(tmp_path / "o.db", recorder) as store:
        lf.Compactor(store, policy(retain_turns=2), on_event=recorder).compact("c")
    names = [event.name for event in recorder.events]
    assert names.index("compaction.accepted") < names.index("retention.purged")


def test_skips_failures_and_fallbacks_are_reported(tmp_path: Path, recorder: Recorder) -> None:
    def broken(request: lf.SummaryRequest) -> str:
        raise RuntimeError(SECRET)

    with filled(tmp_path / "b.db", recorder) as store:
        compactor = lf.Compactor(store, policy(), broken, on_event=recorder)
        assert compactor.compact("c").status == "failed"
        too_long = lf.Compactor(
            store, policy(max_summary_tokens=10), lambda request: "word " * 500, on_event=recorder
        )
        assert too_long.compact("c", force=True).reason == "summary-too-long"
        assert compactor.compact("nobody").status == "skipped"
        compactor.context("c")  # no summary yet: served raw
    reasons = [event.reason for event in recorder.named("compaction.failed")]
    assert reasons == ["summarizer-error", "summary-too-long"]
    assert recorder.named("compaction.failed")[0].turns == 16
    [skipped] = recorder.named("compaction.skipped")
    assert (skipped.conversation_id, skipped.reason) == ("nobody", "nothing-to-compact")
    assert skipped.seconds is not None and skipped.seconds >= 0  # the due check and plan took some
    [fallback] = recorder.named("context.fallback")
    assert (fallback.reason, fallback.turns) == ("no-summary", 20)
    no_text(recorder.events)


def test_store_writes_report_stale_marks_purges_erasures_and_deletions(
    tmp_path: Path, recorder: Recorder
) -> None:
    with filled(tmp_path / "c.db", recorder) as store:
        lf.Compactor(store, policy()).compact("c")
        store.edit("c", "t3", body=f"{SECRET} edited")
        [stale] = recorder.named("summary.stale")
        assert (stale.reason, stale.turn_ids, dict(stale.extra)["summaries"]) == (
            "source-modified",
            ("t3",),
            1,
        )
        store.edit("c", "t18", body="not a source")  # nothing went stale: no event
        assert len(recorder.named("summary.stale")) == 1
        store.retract("c", "t19", erase=True)
        [erased] = recorder.named("retention.erased")
        assert (erased.turn_ids, erased.turns, erased.sequence) == (("t19",), 1, 20)
        store.purge_through("c", 4, "retention-test", force=True)
        [purged] = recorder.named("retention.purged")
        assert (purged.reason, purged.sequence, purged.turns) == ("retention-test", 4, 4)
        store.delete_conversation("c")
        [deleted] = recorder.named("conversation.deleted")
        assert deleted.conversation_id == "c" and deleted.turns == 20  # the retracted row too
    no_text(recorder.events)


def test_a_raising_hook_changes_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def raising(event: lf.Event) -> None:
        raise RuntimeError(SECRET)

    with lf.SQLiteStore(tmp_path / "d.db", on_event=raising) as store:
        for i in range(12):
            store.append("c", "user", f"{SECRET} {i}")
        outcome = lf.Compactor(store, policy(), on_event=raising).compact("c")
        assert outcome.accepted
        store.retract("c", store.load("c").turns[0].id, erase=True)
        assert store.current_summary("c") is None  # the retraction happened
    assert any("event hook raised RuntimeError" in r.getMessage() for r in caplog.records)
    assert all(SECRET not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("bad", [1, "hook", object()])
def test_a_hook_that_is_not_callable_is_invalid_input(tmp_path: Path, bad: object) -> None:
    with pytest.raises(lf.InvalidInput) as caught:
        lf.SQLiteStore(tmp_path / "e.db", on_event=bad)  # type: ignore[arg-type]
    assert caught.value.field == "on_event"
    with lf.SQLiteStore() as store, pytest.raises(lf.InvalidInput) as caught:
        lf.Compactor(store, policy(), on_event=bad)  # type: ignore[arg-type]
    assert caught.value.field == "on_event"
    assert not (tmp_path / "e.db").exists()


async def _acompact(store: lf.SQLiteStore, recorder: Recorder) -> lf.CompactionOutcome:
    return await lf.Compactor(store, policy(), on_event=recorder).acompact("c")


def test_async_events_come_from_the_store_worker_not_the_loop(
    tmp_path: Path, recorder: Recorder
) -> None:
    import asyncio

    with filled(tmp_path / "f.db", recorder) as store:
        outcome = asyncio.run(_acompact(store, recorder))
    assert outcome.accepted
    [event] = recorder.named("compaction.accepted")
    at = recorder.events.index(event)
    assert recorder.threads[at] != threading.main_thread().name


def test_a_stale_mark_names_the_summaries_that_went_stale(
    tmp_path: Path, recorder: Recorder
) -> None:
    """An operator learns which summaries went stale: by an edit, a retraction, a late tool
    result splitting a unit (an append), and a digest repair after a change behind the
    library's back."""
    path = tmp_path / "s.db"
    with lf.SQLiteStore(path, on_event=recorder) as store:
        call = {"id": "call-1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        store.append_chat_messages(
            "c",
            [{"role": "user", "content": f"{SECRET} {n}"} for n in range(6)]
            + [{"role": "assistant", "content": None, "tool_calls": [call]}]
            + [{"role": "tool", "tool_call_id": "call-1", "content": "one"}]
            + [{"role": "user", "content": f"{SECRET} {n}"} for n in range(6)],
        )
        compactor = lf.Compactor(store, policy())

        def current() -> str:
            summary = store.current_summary("c")
            assert summary is not None
            return summary.id

        compactor.compact("c")
        first = current()
        store.edit("c", store.load("c").turns[0].id, body="changed")
        compactor.compact("c")
        second = current()
        store.retract("c", store.load("c").turns[1].id)
        compactor.compact("c")
        third = current()
        # A second result for the summarised call joins its unit: the version goes stale.
        store.append_chat_messages(
            "c", [{"role": "tool", "tool_call_id": "call-1", "content": "two"}]
        )
        compactor.compact("c")
        fourth = current()
        turn = store.load("c").turns[2]
        store._connection().execute("UPDATE turns SET body = 'behind' WHERE id = ?", (turn.id,))
        assert store.repair_digests([("c", turn.id)]) == 1
        marks = [(e.reason, e.summary_ids) for e in recorder.named("summary.stale")]
        assert marks == [
            ("source-modified", (first,)),
            ("source-missing", (second,)),
            ("group-split", (third,)),
            ("source-modified", (fourth,)),
        ]
        assert all(dict(e.extra)["summaries"] == 1 for e in recorder.named("summary.stale"))
    no_text(recorder.events)


def test_a_compaction_not_due_reports_its_seconds(tmp_path: Path, recorder: Recorder) -> None:
    with filled(tmp_path / "d.db", recorder) as store:
        compactor = lf.Compactor(store, policy(trigger_tokens=10**6), on_event=recorder)
        assert compactor.compact("c").reason == "not-due"
    [skipped] = recorder.named("compaction.skipped")
    assert skipped.reason == "not-due" and skipped.turns == 0
    assert skipped.seconds is not None and 0 <= skipped.seconds < 60


def test_a_purge_reports_the_boundary_it_recorded(tmp_path: Path, recorder: Recorder) -> None:
    """`retention.purged` carries the through_sequence the purge recorded (`sequence`), as
    its returned boundary and `history_boundary` say: a purge asked beyond the last turn
    stops there, and one that would split a call from its result stops before the call.
    It used to carry the sequence asked for."""
    with lf.SQLiteStore(tmp_path / "b.db", on_event=recorder) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(4)])
        beyond = store.purge_through("c", 500, "retention")
        store.append("d", "user", SECRET)
        store.append_chat_messages(
            "d",
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "k1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "k1", "content": SECRET},
            ],
        )
        short = store.purge_through("d", 2, "retention")  # seq 2 calls, seq 3 answers
        boundaries = [store.history_boundary(c) for c in ("c", "d")]
    assert (beyond.through_sequence, short.through_sequence) == (4, 1)
    assert [b.through_sequence for b in boundaries if b is not None] == [4, 1]
    purged = recorder.named("retention.purged")
    assert [(e.conversation_id, e.sequence, e.turns) for e in purged] == [("c", 4, 4), ("d", 1, 1)]


def test_deleting_no_conversation_reports_no_deletion(tmp_path: Path, recorder: Recorder) -> None:
    """`delete_conversation` of an unknown ID (or a second time; a `clear_session` of a
    session never written to) changes nothing: it reported a `conversation.deleted` of 0
    turns, which OpenTelemetry counted as a deletion."""
    with filled(tmp_path / "d.db", recorder, n=3) as store:
        store.delete_conversation("nobody")
        store.delete_conversation("c")
        store.delete_conversation("c")
    deleted = recorder.named("conversation.deleted")
    assert [(e.conversation_id, e.turns) for e in deleted] == [("c", 3)]


def test_a_lost_sealed_summary_is_reported_before_the_retention_that_follows(
    tmp_path: Path, recorder: Recorder
) -> None:
    """The compaction that rebased away a purged range's summary reports that loss with its
    own `compaction.accepted`, before the policy's retention purges after it: it used to
    come after that `retention.purged`, as if the purge had lost it."""
    with filled(tmp_path / "l.db", recorder) as store:
        assert lf.Compactor(store, policy()).compact("c").accepted
        store.purge_through("c", 5, "first")  # seals the summary; no sealed base below it
        store.edit("c", "t8", body="changed")  # a live source: the next summary rebases
        store.append_many("c", [{"role": "user", "body": f"{SECRET} new {n}"} for n in range(4)])
        retaining = lf.Compactor(store, policy(retain_turns=8), on_event=recorder)
        assert retaining.compact("c").accepted
    names = [e.name for e in recorder.events if e.name != "summary.stale"]
    assert names[names.index("compaction.accepted") :] == [
        "compaction.accepted",
        "summary.sealed-lost",
        "retention.purged",
    ]
    no_text(recorder.events)
