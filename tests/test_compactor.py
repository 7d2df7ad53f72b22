"""Compaction orchestration (SPEC §13) against a real SQLite store file.

Each failure-mode test names a way today's frameworks lose or corrupt context; here it
must not happen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import ContextBudgetExceeded, Conversation, InvalidInput, SummaryItem, TurnItem
from ledgerfold._compactor import (
    CompactionOutcome,
    CompactionPolicy,
    Compactor,
    SummaryRequest,
)
from ledgerfold.store import SQLiteStore
from ledgerfold.summarizers import ExtractiveSummarizer
from ledgerfold.tokens import MESSAGE_OVERHEAD_TOKENS, approx_tokens, context_tokens

CONV = "conv-1"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(db_path) as opened:
        yield opened


def fill(
    store: SQLiteStore, count: int, conversation_id: str = CONV, start: int = 0
) -> dict[str, int]:
    """Append `count` alternating user/assistant turns m<start>...; their sequences by ID."""
    written = {}
    for index in range(start, start + count):
        role = "user" if index % 2 == 0 else "assistant"
        turn = store.append(
            conversation_id,
            role,
            f"Message number {index}. It has a second sentence.",
            id=f"m{index}",
        )
        written[turn.id] = turn.sequence
    return written


class Recorder:
    """A sync summarizer that records every request it sees."""

    def __init__(self, text: str = "summary of earlier turns") -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return f"{self.text} #{len(self.requests)}"


def state(store: SQLiteStore, conversation_id: str = CONV) -> tuple[Conversation, Any]:
    """The ledger and the current summary: what a failure must leave untouched."""
    return store.load(conversation_id), store.current_summary(conversation_id)


def assert_context_invariants(
    store: SQLiteStore,
    policy: CompactionPolicy,
    written: dict[str, int] | None = None,
    conversation_id: str = CONV,
) -> None:
    """SPEC §1 on an assembled context: no duplicates, at most one summary, protected and
    tail turns raw; and every turn ever written (`written`: ID -> sequence, default the
    ledger) that is missing is a source of the summary or was purged behind the boundary."""
    ledger = store.load(conversation_id)
    context = store.context(conversation_id, policy.version)
    summaries = [item for item in context.items if isinstance(item, SummaryItem)]
    assert len(summaries) <= 1
    assert len(context.ids) == len(set(context.ids))
    raw_ids = {item.id for item in context.items if not isinstance(item, SummaryItem)}
    source_ids = set(summaries[0].source_ids) if summaries else set()
    assert not raw_ids & source_ids
    for turn in ledger.turns:
        if turn.protected:
            assert turn.id in raw_ids
    for turn in ledger.turns[-policy.keep_tail :]:
        assert turn.id in raw_ids
    boundary = context.history_boundary
    if written is None:
        written = {turn.id: turn.sequence for turn in ledger.turns}
    for turn_id, sequence in written.items():
        if turn_id not in raw_ids and turn_id not in source_ids:
            assert boundary is not None, turn_id
            assert sequence <= boundary.through_sequence, turn_id


# -- tokens ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("a" * 400, 100),
        ("你好世界", 4),  # one token per ideograph
        ("こんにちは", 5),  # kana
        ("안녕하세요", 5),  # hangul syllables
        ("。！？", 3),  # CJK punctuation
        ("你好 abcd", 2 + 2),  # 2 ideographs + ceil(5 narrow chars / 4)
        ("é" * 8, 2),  # code points, not UTF-8 bytes
        ("𠀀𠀁", 2),  # supplementary-plane ideographs
    ],
)
def test_approx_tokens(text: str, tokens: int) -> None:
    assert approx_tokens(text) == tokens


def test_context_tokens_adds_overhead_and_meta_per_item() -> None:
    items = (
        TurnItem("a", "user", "abcd", 1),
        TurnItem("b", "assistant", "", 2, {"tool_calls": "abcdabcd"}),
        SummaryItem("s", "abcdabcd", 0, ("x",)),
    )
    assert context_tokens(items) == 3 * MESSAGE_OVERHEAD_TOKENS + 1 + 2 + 2
    assert context_tokens(items, lambda text: 10) == 3 * MESSAGE_OVERHEAD_TOKENS + 40


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_token_counter_returning_garbage_is_invalid_input(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        context_tokens((TurnItem("a", "user", "x", 1),), lambda text: bad)  # type: ignore[arg-type,return-value]
    assert caught.value.field == "token_counter"


# -- values ----------------------------------------------------------------------------------


def test_policy_defaults_and_frozen() -> None:
    policy = CompactionPolicy("v1")
    assert (policy.keep_tail, policy.trigger_tokens, policy.token_counter) == (8, None, None)
    assert policy.counter is approx_tokens
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.keep_tail = 3  # type: ignore[misc]
    assert CompactionPolicy("v1", 3) == CompactionPolicy("v1", 3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"version": ""}, "version"),
        ({"version": "  "}, "version"),
        ({"version": 1}, "version"),
        ({"version": "v", "keep_tail": 0}, "keep_tail"),
        ({"version": "v", "keep_tail": True}, "keep_tail"),
        ({"version": "v", "keep_tail": 2.0}, "keep_tail"),
        ({"version": "v", "trigger_tokens": 0}, "trigger_tokens"),
        ({"version": "v", "trigger_tokens": False}, "trigger_tokens"),
        ({"version": "v", "token_counter": "len"}, "token_counter"),
    ],
)
def test_policy_validation_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        CompactionPolicy(**kwargs)
    assert caught.value.field == field


def test_summary_request_repr_hides_texts() -> None:
    request = SummaryRequest(
        "c",
        "p",
        "v1",
        [TurnItem("a", "user", "secret body text", 1)],  # type: ignore[arg-type]
        "secret summary text",
    )
    assert isinstance(request.turns, tuple)
    shown = repr(request)
    assert "secret" not in shown
    assert "<1 turns>" in shown
    assert "<19 chars>" in shown


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "v1"}, "policy"),
        ({"summarizer": "not callable"}, "summarizer"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"summary_id_factory": "sum-1"}, "summary_id_factory"),
    ],
)
def test_compactor_validation(store: SQLiteStore, kwargs: dict[str, Any], field: str) -> None:
    arguments: dict[str, Any] = {"policy": CompactionPolicy("v1")} | kwargs
    policy = arguments.pop("policy")
    with pytest.raises(InvalidInput) as caught:
        Compactor(store, policy, **arguments)
    assert caught.value.field == field


# -- the basic flow --------------------------------------------------------------------------


def test_nothing_to_compact_is_skipped_without_calling_the_summarizer(store: SQLiteStore) -> None:
    fill(store, 3)
    recorder = Recorder()
    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=4), recorder
    ).compact(CONV)
    assert outcome == CompactionOutcome("skipped", None, "nothing-to-compact")
    assert recorder.requests == []
    assert store.current_summary(CONV) is None


def test_compact_accepts_a_summary_of_exactly_the_prefix(store: SQLiteStore) -> None:
    fill(store, 10)
    recorder = Recorder()
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=4)
    outcome = Compactor(store, policy, recorder).compact(CONV)

    assert outcome.status == "accepted"
    assert outcome.accepted
    assert outcome.reason is None
    assert outcome.summary == store.current_summary(CONV)
    assert outcome.summary is not None
    assert outcome.summary.source_ids == tuple(f"m{i}" for i in range(6))
    assert outcome.summary.text == "summary of earlier turns #1"
    assert outcome.summary.policy_version == "v1"

    # The summarizer saw only the turns to compact, as TurnItems, and no previous summary.
    (request,) = recorder.requests
    assert request.conversation_id == CONV
    assert request.plan_id == outcome.summary.plan_id
    assert request.policy_version == "v1"
    assert all(isinstance(turn, TurnItem) for turn in request.turns)
    assert [turn.id for turn in request.turns] == [f"m{i}" for i in range(6)]
    assert request.turns[0].text == "Message number 0. It has a second sentence."
    assert request.previous_summary is None

    context = Compactor(store, policy).context(CONV)
    assert context.fallback is None
    assert context.ids == (outcome.summary.id, "m6", "m7", "m8", "m9")
    assert_context_invariants(store, policy)


def test_default_summarizer_is_extractive(store: SQLiteStore) -> None:
    fill(store, 6)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    assert isinstance(compactor.summarizer, ExtractiveSummarizer)
    outcome = compactor.compact(CONV)
    assert outcome.summary is not None
    assert outcome.summary.text.splitlines()[0] == "[seq 1 user] Message number 0."


def test_summary_id_factory_names_the_summary(store: SQLiteStore) -> None:
    fill(store, 6)
    names = iter(["sum-a", "sum-b"])
    compactor = Compactor(
        store,
        CompactionPolicy("v1", min_new_turns=1, keep_tail=2),
        summary_id_factory=lambda: next(names),
    )
    first = compactor.compact(CONV)
    fill(store, 2, start=6)
    second = compactor.compact(CONV)
    assert first.summary is not None
    assert second.summary is not None
    assert (first.summary.id, second.summary.id) == ("sum-a", "sum-b")


def test_protected_turns_and_groups_are_never_given_to_the_summarizer(store: SQLiteStore) -> None:
    store.append(CONV, "user", "book the flight", id="u1")
    store.append(
        CONV,
        "assistant",
        "shall I pay?",
        id="confirm",
        protected=True,
        protection_reason="pending-confirmation",
    )
    store.append(CONV, "assistant", "", id="call", group="g1", meta={"tool_calls": "[]"})
    store.append(CONV, "tool", "result", id="result", group="g1")
    store.append(CONV, "user", "ok", id="u2")
    store.append(CONV, "assistant", "done", id="a2")
    recorder = Recorder()
    # keep_tail=3 puts "result" in the tail, so its group member "call" is preserved too.
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=3)
    outcome = Compactor(store, policy, recorder).compact(CONV)
    assert outcome.status == "accepted"
    assert [turn.id for turn in recorder.requests[0].turns] == ["u1"]
    assert_context_invariants(store, policy)


# -- rolling summaries -----------------------------------------------------------------------


def test_second_compaction_gets_previous_summary_as_text_never_as_a_turn(
    store: SQLiteStore,
) -> None:
    fill(store, 8)
    recorder = Recorder()
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    compactor = Compactor(store, policy, recorder)
    first = compactor.compact(CONV)
    fill(store, 4, start=8)
    second = compactor.compact(CONV)
    assert first.summary is not None
    assert second.summary is not None

    request = recorder.requests[1]
    assert request.previous_summary == first.summary.text
    # The previous summary is not among the turns, by ID or by text.
    assert first.summary.id not in {turn.id for turn in request.turns}
    assert all(turn.text != first.summary.text for turn in request.turns)
    assert all(turn.role != "system" for turn in request.turns)
    # The new summary covers everything the old one did, and more: it replaces it fully.
    assert set(first.summary.source_ids) < set(second.summary.source_ids)
    # Only the turns new since the previous summary (SPEC §15.1), which covers the rest.
    assert [turn.id for turn in request.turns] == [f"m{i}" for i in range(6, 10)]
    assert request.covered_count == 6
    assert second.summary.parent_id == first.summary.id
    assert second.summary.source_ids == tuple(f"m{i}" for i in range(10))

    context = compactor.context(CONV)
    summaries = [item for item in context.items if isinstance(item, SummaryItem)]
    assert [item.id for item in summaries] == [second.summary.id]
    assert context.ids == (second.summary.id, "m10", "m11")
    statuses = [
        (record.envelope.id if record.envelope else None, record.status)
        for record in store.summary_history(CONV)
    ]
    assert statuses == [(first.summary.id, "superseded"), (second.summary.id, "current")]
    assert_context_invariants(store, policy)


def test_recompacting_the_same_turns_is_skipped_even_when_forced(store: SQLiteStore) -> None:
    """SPEC §15.8: `force` bypasses the trigger, `min_new_turns` and the back-off, but with no
    uncovered compactable turn there is nothing to summarise."""
    fill(store, 8)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), recorder)
    first = compactor.compact(CONV)
    again = compactor.compact(CONV)
    assert again == CompactionOutcome("skipped", None, "nothing-to-compact")
    assert len(recorder.requests) == 1
    assert store.current_summary(CONV) == first.summary

    forced = compactor.compact(CONV, force=True)
    assert forced == CompactionOutcome("skipped", None, "nothing-to-compact")
    assert len(recorder.requests) == 1
    fill(store, 1, start=8)  # one new turn pushes one turn out of the tail
    forced = compactor.compact(CONV, force=True)
    assert forced.status == "accepted"
    assert recorder.requests[1].previous_summary == "summary of earlier turns #1"
    assert [turn.id for turn in recorder.requests[1].turns] == ["m6"]


def test_new_policy_version_rebases_without_the_old_text(store: SQLiteStore) -> None:
    """A summary of another policy version is not used, so it cannot be extended: the new
    version summarises every compacted turn afresh (SPEC §15.1 rebase)."""
    fill(store, 8)
    Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), Recorder("old")).compact(
        CONV
    )
    recorder = Recorder("new")
    policy_v2 = CompactionPolicy("v2", min_new_turns=1, keep_tail=2)
    compactor = Compactor(store, policy_v2, recorder)
    assert compactor.context(CONV).fallback == "stale-summary:policy-mismatch"
    outcome = compactor.compact(CONV)
    assert outcome.status == "accepted"
    assert recorder.requests[0].previous_summary is None
    assert recorder.requests[0].covered_count == 0
    assert [turn.id for turn in recorder.requests[0].turns] == [f"m{i}" for i in range(6)]
    assert outcome.summary is not None and outcome.summary.parent_id is None
    assert compactor.context(CONV).fallback is None


def test_extractive_rolling_summary_carries_lines_forward_without_duplicates(
    store: SQLiteStore,
) -> None:
    fill(store, 8)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    compactor.compact(CONV)
    fill(store, 4, start=8)
    second = compactor.compact(CONV)
    assert second.summary is not None
    lines = second.summary.text.splitlines()
    assert [line.split("]")[0] for line in lines] == [
        f"[seq {i + 1} {'user' if i % 2 == 0 else 'assistant'}" for i in range(10)
    ]


# -- failures leave everything as it was -----------------------------------------------------


def test_summarizer_error_changes_nothing_but_the_failure_record(store: SQLiteStore) -> None:
    fill(store, 8)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    Compactor(store, policy).compact(CONV)
    fill(store, 4, start=8)
    before = state(store)

    def broken(request: SummaryRequest) -> str:
        raise RuntimeError("model crashed")

    outcome = Compactor(store, policy, broken).compact(CONV)
    assert outcome == CompactionOutcome("failed", None, "summarizer-error")
    assert state(store) == before
    last = store.summary_history(CONV)[-1]
    assert (last.status, last.reason, last.envelope) == ("failed", "summarizer-error", None)
    assert_context_invariants(store, policy)


def test_sync_summarizer_timeout_fails_and_its_late_result_is_discarded(
    store: SQLiteStore,
) -> None:
    fill(store, 8)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    Compactor(store, policy).compact(CONV)
    fill(store, 2, start=8)
    before = state(store)
    release = threading.Event()
    finished = threading.Event()

    def stuck(request: SummaryRequest) -> str:
        release.wait()
        finished.set()
        return "late summary"

    outcome = Compactor(store, policy, stuck, timeout=0.05).compact(CONV)
    release.set()
    finished.wait()
    assert outcome == CompactionOutcome("failed", None, "summarizer-timeout")
    assert state(store) == before
    assert store.summary_history(CONV)[-1].reason == "summarizer-timeout"


@pytest.mark.parametrize("mode", ["compact", "acompact"])
def test_async_summarizer_timeout_fails(store: SQLiteStore, mode: str) -> None:
    fill(store, 6)
    before = state(store)

    async def never(request: SummaryRequest) -> str:
        await asyncio.Event().wait()
        return "never"

    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), never, timeout=0.05
    )
    if mode == "compact":
        outcome = compactor.compact(CONV)
    else:
        outcome = asyncio.run(compactor.acompact(CONV))
    assert outcome == CompactionOutcome("failed", None, "summarizer-timeout")
    assert state(store) == before


def test_acompact_sync_summarizer_timeout(store: SQLiteStore) -> None:
    fill(store, 6)
    release = threading.Event()

    def stuck(request: SummaryRequest) -> str:
        release.wait()
        return "late"

    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), stuck, timeout=0.05
    )
    try:
        outcome = asyncio.run(compactor.acompact(CONV))
    finally:
        release.set()
    assert outcome == CompactionOutcome("failed", None, "summarizer-timeout")
    assert store.current_summary(CONV) is None


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ("   \n", "blank-summary"),
        (None, "summarizer-error"),
        (42, "summarizer-error"),
        ("bad \ud800 text", "summarizer-error"),
    ],
)
def test_unusable_summarizer_results_fail(store: SQLiteStore, result: object, reason: str) -> None:
    fill(store, 6)
    before = state(store)
    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), lambda request: result
    ).compact(  # type: ignore[arg-type,return-value]
        CONV
    )
    assert outcome == CompactionOutcome("failed", None, reason)
    assert state(store) == before
    assert store.summary_history(CONV)[-1].status == "failed"


def test_database_failure_at_commit_is_failed_store_error(
    store: SQLiteStore, db_path: Path
) -> None:
    fill(store, 8)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    Compactor(store, policy).compact(CONV)
    fill(store, 2, start=8)
    before = state(store)
    history_before = store.summary_history(CONV)

    def summarize_then_break_the_disk(request: SummaryRequest) -> str:
        # Another connection makes every insert into the summaries table fail, as a full
        # disk would: a real SQLite error at commit time, not a mock.
        with sqlite3.connect(db_path) as other:
            other.execute(
                "CREATE TRIGGER fail_insert BEFORE INSERT ON summaries"
                " BEGIN SELECT RAISE(ABORT, 'simulated disk failure'); END"
            )
        other.close()
        return "a fine summary"

    outcome = Compactor(store, policy, summarize_then_break_the_disk).compact(CONV)
    assert outcome == CompactionOutcome("failed", None, "store-error")
    with sqlite3.connect(db_path) as other:
        other.execute("DROP TRIGGER fail_insert")
    other.close()
    assert state(store) == before
    assert store.summary_history(CONV) == history_before  # even the failure record failed


# -- sync / async summarizers ----------------------------------------------------------------


def test_compact_runs_an_async_summarizer(store: SQLiteStore) -> None:
    fill(store, 6)

    async def summarize(request: SummaryRequest) -> str:
        await asyncio.sleep(0)
        return f"async summary of {len(request.turns)} turns"

    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarize
    ).compact(CONV)
    assert outcome.summary is not None
    assert outcome.summary.text == "async summary of 4 turns"


def test_compact_runs_a_sync_callable_that_returns_an_awaitable(store: SQLiteStore) -> None:
    fill(store, 6)

    async def later(request: SummaryRequest) -> str:
        return "from a coroutine"

    outcome = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), lambda r: later(r)
    ).compact(CONV)
    assert outcome.summary is not None
    assert outcome.summary.text == "from a coroutine"


def test_compact_inside_a_running_loop_with_async_summarizer_is_refused(
    store: SQLiteStore,
) -> None:
    fill(store, 6)

    async def summarize(request: SummaryRequest) -> str:
        return "x"

    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarize)

    async def main() -> None:
        with pytest.raises(InvalidInput, match="acompact") as caught:
            compactor.compact(CONV)
        assert caught.value.field == "summarizer"

    asyncio.run(main())
    assert store.summary_history(CONV) == []


def test_compact_inside_a_running_loop_with_sync_summarizer_works(store: SQLiteStore) -> None:
    fill(store, 6)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))

    async def main() -> CompactionOutcome:
        return compactor.compact(CONV)

    assert asyncio.run(main()).status == "accepted"


def test_acompact_runs_sync_summarizers_off_the_event_loop_thread(store: SQLiteStore) -> None:
    fill(store, 6)
    threads: list[int] = []

    def summarize(request: SummaryRequest) -> str:
        threads.append(threading.get_ident())
        return "sync in a thread"

    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), summarize)

    async def main() -> tuple[CompactionOutcome, int]:
        return await compactor.acompact(CONV), threading.get_ident()

    outcome, loop_thread = asyncio.run(main())
    assert outcome.status == "accepted"
    assert threads != [loop_thread]
    assert len(threads) == 1


def test_acompact_failure_changes_nothing(store: SQLiteStore) -> None:
    fill(store, 6)
    before = state(store)

    async def broken(request: SummaryRequest) -> str:
        raise ConnectionError("server gone")

    outcome = asyncio.run(
        Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), broken).acompact(
            CONV
        )
    )
    assert outcome == CompactionOutcome("failed", None, "summarizer-error")
    assert state(store) == before


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


# -- due check and budgets -------------------------------------------------------------------


def test_not_due_below_trigger_and_forced_anyway(store: SQLiteStore) -> None:
    fill(store, 10)
    recorder = Recorder()
    raw_tokens = context_tokens(store.context(CONV, "v1").items)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2, trigger_tokens=raw_tokens)
    compactor = Compactor(store, policy, recorder)
    assert not compactor.is_due(CONV)
    assert compactor.compact(CONV) == CompactionOutcome("skipped", None, "not-due")
    assert recorder.requests == []
    assert compactor.compact(CONV, force=True).status == "accepted"


def test_due_past_trigger_then_not_due_once_the_summary_shrinks_the_context(
    store: SQLiteStore,
) -> None:
    fill(store, 10)
    raw_tokens = context_tokens(store.context(CONV, "v1").items)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2, trigger_tokens=raw_tokens - 1)
    compactor = Compactor(store, policy, Recorder("short"))
    assert compactor.is_due(CONV)
    assert compactor.compact(CONV).status == "accepted"
    # The trigger counts the context as assembled, with the summary in place.
    assert not compactor.is_due(CONV)
    assert compactor.compact(CONV) == CompactionOutcome("skipped", None, "not-due")


def test_custom_token_counter_decides_when_due(store: SQLiteStore) -> None:
    fill(store, 6)
    seen: list[str] = []

    def counter(text: str) -> int:
        seen.append(text)
        return 1000

    policy = CompactionPolicy(
        "v1", min_new_turns=1, keep_tail=2, trigger_tokens=5000, token_counter=counter
    )
    assert Compactor(store, policy).compact(CONV).status == "accepted"
    assert "Message number 0. It has a second sentence." in seen


def test_context_within_budget_is_returned_whole(store: SQLiteStore) -> None:
    fill(store, 6)
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    needed = context_tokens(store.context(CONV, "v1").items)
    context = compactor.context(CONV, max_tokens=needed)
    assert len(context.items) == 6


def test_context_over_budget_raises_and_never_drops_protected_turns(store: SQLiteStore) -> None:
    fill(store, 4)
    store.append(
        CONV,
        "user",
        "Never book flights over $500 without asking me.",
        id="rule",
        protected=True,
        protection_reason="active-constraint",
    )
    fill(store, 4, start=4)
    recorder = Recorder()
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)
    compactor = Compactor(store, policy, recorder)
    compactor.compact(CONV)
    calls = len(recorder.requests)
    context = compactor.context(CONV)
    needed = context_tokens(context.items)
    rule = next(item for item in context.items if item.id == "rule")
    protected = MESSAGE_OVERHEAD_TOKENS + approx_tokens(rule.text)

    with pytest.raises(ContextBudgetExceeded) as caught:
        compactor.context(CONV, max_tokens=needed - 1)
    assert (caught.value.needed, caught.value.budget, caught.value.protected) == (
        needed,
        needed - 1,
        protected,
    )
    assert len(recorder.requests) == calls  # context() never summarises
    assert "rule" in compactor.context(CONV).ids  # and never dropped anything


@pytest.mark.parametrize("bad", [0, -5, True, 2.5])
def test_context_max_tokens_validation(store: SQLiteStore, bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        Compactor(store, CompactionPolicy("v1")).context(CONV, max_tokens=bad)  # type: ignore[arg-type]
    assert caught.value.field == "max_tokens"


# -- the invariant over a long mixed run -----------------------------------------------------


def test_every_missing_turn_is_a_summary_source_or_purged(store: SQLiteStore) -> None:
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=3)
    compactor = Compactor(store, policy)
    written: dict[str, int] = {}
    for round_number in range(6):
        written |= fill(store, 5, start=5 * round_number)
        if round_number == 1:
            confirm = store.append(
                CONV,
                "assistant",
                "Confirm the refund?",
                id="confirm",
                protected=True,
                protection_reason="pending-confirmation",
            )
            written[confirm.id] = confirm.sequence
        if round_number == 2:
            call = store.append(CONV, "assistant", "", id="call", group="g", meta={"n": "1"})
            result = store.append(CONV, "tool", "42 results", id="result", group="g")
            written |= {call.id: call.sequence, result.id: result.sequence}
        if round_number == 3:
            store.edit(CONV, "m2", body="edited")  # the current summary goes stale
            assert compactor.context(CONV).fallback == "stale-summary:source-modified"
            assert_context_invariants(store, policy, written)
        if round_number == 4:
            store.purge_through(CONV, 4, "retention")
            context = compactor.context(CONV)
            assert context.history_boundary is not None
            assert context.history_boundary.through_sequence == 4
            assert_context_invariants(store, policy, written)
        assert compactor.compact(CONV).status == "accepted"
        assert_context_invariants(store, policy, written)
    context = compactor.context(CONV)
    assert context.fallback is None
    assert "confirm" in context.ids
    assert not {"m0", "m1", "m2", "m3"} & set(context.ids)  # purged


# -- summarizer call paths -------------------------------------------------------------------


class AsyncCallable:
    """An object whose __call__ is a coroutine function."""

    async def __call__(self, request: SummaryRequest) -> str:
        return "from an async __call__"


@pytest.mark.parametrize("call", ["compact", "acompact"])
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_sync_summarizer_result_and_error_on_every_path(
    store: SQLiteStore, call: str, timeout: float | None
) -> None:
    fill(store, 6)
    policy = CompactionPolicy("v1", min_new_turns=1, keep_tail=2)

    def broken(request: SummaryRequest) -> str:
        raise KeyError("x")

    def run(compactor: Compactor) -> CompactionOutcome:
        if call == "compact":
            return compactor.compact(CONV, force=True)
        return asyncio.run(compactor.acompact(CONV, force=True))

    assert run(Compactor(store, policy, broken, timeout=timeout)) == CompactionOutcome(
        "failed", None, "summarizer-error"
    )
    accepted = run(Compactor(store, policy, Recorder("ok"), timeout=timeout))
    assert accepted.summary is not None
    assert accepted.summary.text == "ok #1"


@pytest.mark.parametrize("call", ["compact", "acompact"])
def test_async_callable_objects_are_awaited(store: SQLiteStore, call: str) -> None:
    fill(store, 6)
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), AsyncCallable()
    )
    if call == "compact":
        outcome = compactor.compact(CONV)
    else:
        outcome = asyncio.run(compactor.acompact(CONV))
    assert outcome.summary is not None
    assert outcome.summary.text == "from an async __call__"


def test_async_callable_object_in_a_running_loop_is_refused_before_planning(
    store: SQLiteStore,
) -> None:
    fill(store, 6)
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), AsyncCallable()
    )

    async def main() -> None:
        with pytest.raises(InvalidInput, match="acompact"):
            compactor.compact(CONV)

    asyncio.run(main())
    assert store.summary_history(CONV) == []


def test_awaitable_from_a_sync_callable_in_a_running_loop_is_refused(
    store: SQLiteStore,
) -> None:
    fill(store, 6)

    async def later(request: SummaryRequest) -> str:
        return "never used"

    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), lambda r: later(r)
    )

    async def main() -> None:
        with pytest.raises(InvalidInput, match="acompact"):
            compactor.compact(CONV)

    asyncio.run(main())
    assert store.current_summary(CONV) is None
    (record,) = store.summary_history(CONV)
    assert (record.status, record.reason) == ("failed", "summarizer-error")


def test_cancelled_acompact_propagates_and_writes_nothing(store: SQLiteStore) -> None:
    fill(store, 6)
    started = asyncio.Event()

    async def forever(request: SummaryRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), forever)

    async def main() -> None:
        task = asyncio.create_task(compactor.acompact(CONV))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    before = state(store)
    asyncio.run(main())
    assert state(store) == before
    assert store.summary_history(CONV) == []


def test_is_due_validates_the_conversation_id(store: SQLiteStore) -> None:
    with pytest.raises(InvalidInput) as caught:
        Compactor(store, CompactionPolicy("v1")).is_due("")
    assert caught.value.field == "conversation_id"


def test_compactor_repr_names_parts_only(store: SQLiteStore) -> None:
    shown = repr(Compactor(store, CompactionPolicy("v1"), timeout=2))
    assert shown.startswith("Compactor(store=SQLiteStore, policy=CompactionPolicy(version='v1'")
    assert "summarizer=ExtractiveSummarizer, timeout=2.0)" in shown
