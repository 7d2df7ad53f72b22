"""A compaction that fails leaves everything as it was, but for the failure record: a
summarizer that raises, times out (sync or async, through `compact` or `acompact`) or returns
something unusable, and a database failure at commit."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from ledgerfold import Event, SQLiteStore, StoreError
from ledgerfold._compactor import CompactionOutcome, CompactionPolicy, Compactor, SummaryRequest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from compaction_support import CONV, assert_context_invariants, fill, state  # noqa: E402

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


@pytest.mark.parametrize("run", ["compact", "acompact"])
def test_database_failure_registering_the_plan_is_failed_store_error(
    store: SQLiteStore, db_path: Path, run: str
) -> None:
    """SPEC §13: a compaction whose plan cannot be registered (a real SQLite error, from a
    trigger another connection added) is a `failed`/`store-error` outcome with its event,
    not the store's `StoreError`; nothing is written, not even a failure record (there is no
    plan to name)."""
    fill(store, 8)
    before, history_before = state(store), store.summary_history(CONV)
    with sqlite3.connect(db_path) as other:
        other.execute(
            "CREATE TRIGGER fail_plan BEFORE INSERT ON plans"
            " BEGIN SELECT RAISE(ABORT, 'simulated disk failure'); END"
        )
    other.close()
    events: list[Event] = []
    compactor = Compactor(
        store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2), on_event=events.append
    )
    outcome = compactor.compact(CONV) if run == "compact" else asyncio.run(compactor.acompact(CONV))
    assert outcome == CompactionOutcome("failed", None, "store-error")
    assert [(event.name, event.reason) for event in events] == [
        ("compaction.failed", "store-error")
    ]
    assert state(store) == before
    assert store.summary_history(CONV) == history_before


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("meta = 'not json'", "damaged row in table turns"),
        ("body = CAST(x'6869ff' AS TEXT)", r"damaged row in table turns, column body: turn 'm0'"),
    ],
    ids=["meta", "body"],
)
def test_a_row_changed_outside_ledgerfold_is_still_raised(
    store: SQLiteStore, db_path: Path, change: str, said: str
) -> None:
    """Not a database failure but a ledger that cannot be read: `compact()` raises the
    store's `StoreError` naming the row or column, as `load()` does (the CLI reports it
    per conversation), rather than calling it a failed compaction."""
    fill(store, 8)
    with sqlite3.connect(db_path) as other:
        other.execute(f"UPDATE turns SET {change} WHERE sequence = 1")
    other.close()
    compactor = Compactor(store, CompactionPolicy("v1", min_new_turns=1, keep_tail=2))
    with pytest.raises(StoreError, match=said):
        compactor.compact(CONV)
