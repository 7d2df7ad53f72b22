"""Every failure a compaction records is reported (SPEC §17.8): `stats()` counting a `failed`
record whose `compaction.failed` event never came would make the two disagree. Here the
sync `compact()` inside a running event loop, with a summarizer that returns an awaitable:
the attempt is recorded failed (`summarizer-error`) and `InvalidInput` tells the caller to
use `acompact`; the event is emitted as for any other failure, with no text."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import ledgerfold as lf

SECRET = "SECRET-8e21-awaited-text"
POLICY = lf.CompactionPolicy("failure-events-v1", keep_tail=2, min_new_turns=1)


def test_an_awaitable_from_a_sync_summarizer_in_a_loop_is_a_reported_failure(
    tmp_path: Path,
) -> None:
    events: list[lf.Event] = []

    async def summary_text() -> str:
        return SECRET

    def returns_an_awaitable(request: lf.SummaryRequest) -> object:
        return summary_text()

    async def scenario(compactor: lf.Compactor) -> None:
        with pytest.raises(lf.InvalidInput) as caught:
            compactor.compact("c")
        assert caught.value.field == "summarizer"

    with lf.SQLiteStore(tmp_path / "f.db", on_event=events.append) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(6)])
        compactor = lf.Compactor(
            store,
            POLICY,
            returns_an_awaitable,  # type: ignore[arg-type]
            on_event=events.append,
        )
        asyncio.run(scenario(compactor))
        assert store.stats().summaries["failed"] == 1
    failed = [event for event in events if event.name == "compaction.failed"]
    assert [(e.conversation_id, e.reason, e.turns) for e in failed] == [
        ("c", "summarizer-error", 4)
    ]
    assert all(SECRET not in repr(event) for event in events)


def test_a_cancelled_acompact_reports_its_abandoned_plan(tmp_path: Path) -> None:
    """Cancelled while its summarizer runs: the plan stays without a result, which the store
    records `failed`/`abandoned` when the next plan starts (SPEC §15.5), and which the
    back-off counts; the `compaction.failed` event says so when it happens."""
    events: list[lf.Event] = []
    started = asyncio.Event()

    async def slow(request: lf.SummaryRequest) -> str:
        started.set()
        await asyncio.sleep(30)
        return SECRET

    async def scenario(compactor: lf.Compactor, store: lf.SQLiteStore) -> None:
        task = asyncio.create_task(compactor.acompact("c"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await compactor.acontext("c")  # a later job of the store's worker: the event's ran

    with lf.SQLiteStore(tmp_path / "f.db", on_event=events.append) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(6)])
        compactor = lf.Compactor(store, POLICY, slow, on_event=events.append)
        asyncio.run(scenario(compactor, store))
        failed = [event for event in events if event.name == "compaction.failed"]
        assert [(e.conversation_id, e.reason, e.turns) for e in failed] == [("c", "abandoned", 4)]
        assert lf.Compactor(store, POLICY, on_event=events.append).compact("c").accepted
        assert [(r.status, r.reason) for r in store.summary_history("c")][:1] == [
            ("failed", "abandoned")
        ]
    assert all(SECRET not in repr(event) for event in events)


def test_a_refused_summary_reports_the_tokens_its_summarizer_produced(tmp_path: Path) -> None:
    """`tokens_out` is what the summarizer returned, whether or not it was kept: a text too
    long to accept (`summary-too-long`) and one whose commit went stale were produced, paid
    for and refused, and the event's `tokens_out` (and OpenTelemetry's output tokens) must
    not say nothing came back."""
    events: list[lf.Event] = []
    long_text = f"{SECRET} " + "word " * 400
    policy = lf.CompactionPolicy(
        "failure-events-v1", keep_tail=2, min_new_turns=1, max_summary_tokens=20
    )

    def editing(request: lf.SummaryRequest) -> str:
        store.edit("c", request.turns[0].id, body="changed meanwhile")
        return f"{SECRET} short"

    with lf.SQLiteStore(tmp_path / "t.db", on_event=events.append) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(6)])
        too_long = lf.Compactor(store, policy, lambda request: long_text, on_event=events.append)
        assert too_long.compact("c").reason == "summary-too-long"
        assert (
            lf.Compactor(store, policy, editing, on_event=events.append).compact("c").status
            == "stale"
        )
    refused = [e for e in events if e.name in ("compaction.failed", "compaction.stale")]
    assert [(e.name, e.reason) for e in refused] == [
        ("compaction.failed", "summary-too-long"),
        ("compaction.stale", "source-modified"),
    ]
    assert all(e.tokens_out > 0 and e.tokens_in > 0 for e in refused)
    assert refused[0].tokens_out > policy.max_summary_tokens
    assert all(SECRET not in repr(event) for event in events)


def test_an_interrupted_compact_reports_its_abandoned_plan(tmp_path: Path) -> None:
    """A sync `compact()` whose summarizer is interrupted (Ctrl-C in a notebook while the
    model is summarising) leaves its plan without a result, recorded `failed`/`abandoned`
    when the next plan starts, as a cancelled `acompact`'s is: reported alike, once."""
    events: list[lf.Event] = []

    def interrupted(request: lf.SummaryRequest) -> str:
        raise KeyboardInterrupt

    with lf.SQLiteStore(tmp_path / "i.db", on_event=events.append) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(6)])
        with pytest.raises(KeyboardInterrupt):
            lf.Compactor(store, POLICY, interrupted, on_event=events.append).compact("c")
        assert lf.Compactor(store, POLICY, on_event=events.append).compact("c").accepted
        assert store.stats().summaries["failed"] == 1
    failed = [event for event in events if event.name == "compaction.failed"]
    assert [(e.conversation_id, e.reason, e.turns) for e in failed] == [("c", "abandoned", 4)]
    assert all(SECRET not in repr(event) for event in events)


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("kind", ["async", "sync"])
def test_an_interrupted_acompact_reports_its_abandoned_plan(
    tmp_path: Path, raised: type[BaseException], kind: str
) -> None:
    """`acompact` whose summarizer is interrupted (`KeyboardInterrupt`, `SystemExit`) is
    reported as a cancelled one and an interrupted `compact()` are: its plan's
    `compaction.failed` (`abandoned`) event, once, matching the record the next plan
    writes. It used to report nothing."""
    events: list[lf.Event] = []

    async def interrupted_async(request: lf.SummaryRequest) -> str:
        raise raised

    def interrupted(request: lf.SummaryRequest) -> str:
        raise raised

    summarizer = interrupted_async if kind == "async" else interrupted
    with lf.SQLiteStore(tmp_path / "ai.db", on_event=events.append) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(6)])
        compactor = lf.Compactor(store, POLICY, summarizer, on_event=events.append)
        with pytest.raises(raised):
            asyncio.run(compactor.acompact("c"))
        asyncio.run(compactor.acontext("c"))  # a later job of the store's worker
        assert lf.Compactor(store, POLICY, on_event=events.append).compact("c").accepted
        assert [(r.status, r.reason) for r in store.summary_history("c")][:1] == [
            ("failed", "abandoned")
        ]
    failed = [event for event in events if event.name == "compaction.failed"]
    assert [(e.conversation_id, e.reason, e.turns) for e in failed] == [("c", "abandoned", 4)]


class _Hostile(str):
    """A str whose methods raise: the text is what counts, not what the class does."""

    def strip(self, chars: str | None = None) -> str:
        raise RuntimeError("hostile strip")

    def __len__(self) -> int:
        raise RuntimeError("hostile len")


def test_a_summary_of_a_str_subclass_is_judged_by_its_text(tmp_path: Path) -> None:
    """A summarizer returning a `str` subclass whose methods raise made `compact()` raise
    with no record and no event (the plan left open); its text is now taken as a plain str."""
    events: list[lf.Event] = []
    with lf.SQLiteStore(tmp_path / "sub.db", on_event=events.append) as store:
        store.append_many("c", [{"role": "user", "body": f"{SECRET} {n}"} for n in range(6)])
        outcome = lf.Compactor(
            store, POLICY, lambda request: _Hostile(" a summary "), on_event=events.append
        ).compact("c")
        assert outcome.accepted and outcome.summary is not None
        assert type(outcome.summary.text) is str and outcome.summary.text == "a summary"
        assert store.current_summary("c") == outcome.summary
    assert [event.name for event in events] == ["compaction.accepted"]
