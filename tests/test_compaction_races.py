"""The ledger changing while a summarizer runs (SPEC §15.4): an older plan finishing
last, a turn appended, a source edited or retracted meanwhile."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from ledgerfold import SQLiteStore, SummaryItem, TurnItem
from ledgerfold._compactor import CompactionOutcome, CompactionPolicy, Compactor, SummaryRequest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from compaction_support import CONV, Recorder, assert_context_invariants, fill  # noqa: E402

# -- races -----------------------------------------------------------------------------------


def test_older_plan_finishing_last_never_replaces_the_newer_summary(db_path: Path) -> None:
    with SQLiteStore(db_path) as store:
        fill(store, 10)
        policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
        started = {"first": asyncio.Event(), "second": asyncio.Event()}
        release = {"first": asyncio.Event(), "second": asyncio.Event()}
        order: list[str] = []

        def summarizer_for(name: str) -> Any:
            async def summarize(request: SummaryRequest) -> str:
                started[name].set()
                await release[name].wait()
                order.append(name)
                return f"summary by the {name} plan"

            return summarize

        first = Compactor(store, policy, summarizer_for("first"))
        second = Compactor(store, policy, summarizer_for("second"))

        async def main() -> tuple[CompactionOutcome, CompactionOutcome]:
            first_task = asyncio.create_task(first.acompact(CONV))
            await started["first"].wait()
            second_task = asyncio.create_task(second.acompact(CONV))
            await started["second"].wait()
            release["second"].set()  # the newer plan finishes first...
            second_outcome = await second_task
            release["first"].set()  # ...the older one's result arrives late
            return await first_task, second_outcome

        late, newer = asyncio.run(main())

        assert order == ["second", "first"]
        assert newer.status == "accepted"
        assert late == CompactionOutcome("stale", None, "superseded-plan")
        current = store.current_summary(CONV)
        assert current is not None
        assert newer.summary is not None
        assert current == newer.summary
        assert current.text == "summary by the second plan"
        history = store.summary_history(CONV)
        # The first plan ended without a record when the second was registered: abandoned
        # (SPEC §15.8); its late result is still refused as superseded.
        assert [(record.status, record.reason) for record in history] == [
            ("failed", "abandoned"),
            ("current", None),
            ("rejected", "superseded-plan"),
        ]
        assert history[2].envelope is not None
        assert history[2].envelope.text == "summary by the first plan"
        context = Compactor(store, policy).context(CONV)
        assert [item.text for item in context.items if isinstance(item, SummaryItem)] == [
            "summary by the second plan"
        ]


def test_turn_appended_during_summarizing_is_in_the_next_context(store: SQLiteStore) -> None:
    fill(store, 8)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)

    async def summarize(request: SummaryRequest) -> str:
        # The user keeps talking while the summary is generated.
        store.append(CONV, "user", "one more thing: no red-eye flights", id="late")
        await asyncio.sleep(0)
        return "summary"

    outcome = asyncio.run(Compactor(store, policy, summarize).acompact(CONV))
    assert outcome.status == "accepted"
    assert outcome.summary is not None
    assert "late" not in outcome.summary.source_ids
    context = Compactor(store, policy).context(CONV)
    assert context.fallback is None
    assert context.ids[-1] == "late"
    late_item = context.items[-1]
    assert isinstance(late_item, TurnItem)
    assert late_item.text == "one more thing: no red-eye flights"
    assert_context_invariants(store, policy)


def test_source_edited_during_summarizing_is_refused_as_stale(store: SQLiteStore) -> None:
    fill(store, 8)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    Compactor(store, policy).compact(CONV)
    fill(store, 2, start=8)
    previous = store.current_summary(CONV)

    def summarize(request: SummaryRequest) -> str:
        store.edit(CONV, "m7", body="actually, make it Tuesday")
        return "summary from the old text"

    outcome = Compactor(store, policy, summarize).compact(CONV)
    assert outcome == CompactionOutcome("stale", None, "source-modified")
    # m7 was not a source of the previous summary, so that one is still current.
    assert store.current_summary(CONV) == previous
    assert store.summary_history(CONV)[-1].status == "rejected"
    assert_context_invariants(store, policy)


class RetractingStore(SQLiteStore):
    """A real store where another writer retracts a turn right after a plan is made."""

    def begin_compaction(self, conversation_id: str, *args: Any, **kwargs: Any) -> Any:
        work = super().begin_compaction(conversation_id, *args, **kwargs)
        if work.plan is not None:
            self.retract(conversation_id, work.plan.compacted_ids[0])
        return work


def test_source_retracted_while_summarizing_is_refused_as_stale(db_path: Path) -> None:
    """The summarizer's input is read in the plan's transaction; a source retracted after
    that makes the commit refuse the result, and the current summary stays as it was."""
    with RetractingStore(db_path) as store:
        fill(store, 6)
        recorder = Recorder()
        outcome = Compactor(
            store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), recorder
        ).compact(CONV)
        assert outcome == CompactionOutcome("stale", None, "source-missing")
        assert len(recorder.requests) == 1
        assert store.summary_history(CONV)[-1].status == "rejected"
        assert store.current_summary(CONV) is None
