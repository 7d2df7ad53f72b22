"""Bad input across the public API: one test per row of `bad_input_table.ROWS`,
reprs that never show bodies or summary text, and docs/bad-input.md kept up to date."""

from __future__ import annotations

import asyncio
import pickle
import sqlite3
import sys
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._transcripts import Transcript

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from bad_input_table import (  # noqa: E402
    ROWS,
    SECRET_BODY,
    SECRET_SUMMARY,
    BadInput,
    markdown,
)

DOC = _HERE.parent / "docs" / "bad-input.md"
SECRETS = (SECRET_BODY, SECRET_SUMMARY, SECRET_BODY.split("\u2028")[0])


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text


@pytest.mark.parametrize("bad", ROWS, ids=[bad.kind for bad in ROWS])
def test_bad_input_raises_the_documented_error(bad: BadInput) -> None:
    with pytest.raises(lf.LedgerfoldError) as caught:
        bad.call()
    error = caught.value
    assert type(error) is bad.error  # exactly, never a bare Exception / TypeError
    assert type(error) not in (Exception, TypeError, ValueError)
    assert error.code == bad.code
    assert getattr(error, "field", None) == bad.field
    if isinstance(error, lf.InvalidInput):
        assert isinstance(error, ValueError)
        assert error.problem in (
            "wrong-type",
            "empty",
            "out-of-range",
            "unknown-value",
            "not-utf8",
            "not-allowed",
            "duplicate",
        )
    assert_no_secret(str(error))
    assert_no_secret(repr(error))
    assert_no_secret(repr(error.args))
    # Pickled errors (e.g. from worker processes) keep code and field.
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.code, getattr(copy, "field", None)) == (
        bad.error,
        bad.code,
        bad.field,
    )


def test_the_table_covers_every_error_class() -> None:
    classes = {bad.error for bad in ROWS}
    assert classes == {lf.InvalidInput, lf.DuplicateId, lf.StoreError, lf.ContextBudgetExceeded}
    kinds = [bad.kind for bad in ROWS]
    assert len(kinds) == len(set(kinds))


def test_store_errors_from_sqlite_are_chained_to_the_sqlite_error() -> None:
    # A directory or a file that is not SQLite fails inside sqlite3; a foreign database is
    # refused by ledgerfold itself (nothing to chain).
    rows = [
        bad
        for bad in ROWS
        if bad.kind.startswith(("SQLiteStore: a directory", "SQLiteStore: a file"))
    ]
    assert len(rows) == 2
    for bad in rows:
        with pytest.raises(lf.StoreError) as caught:
            bad.call()
        assert isinstance(caught.value.__cause__, sqlite3.Error)


def test_context_budget_exceeded_reports_needed_budget_and_protected() -> None:
    with lf.SQLiteStore() as store:
        store.append(
            "c", "user", SECRET_BODY * 4, protected=True, protection_reason="audit-evidence"
        )
        store.append("c", "assistant", SECRET_BODY)
        compactor = lf.Compactor(store, lf.CompactionPolicy("v", min_new_turns=1, keep_tail=1))
        needed = len(compactor.context("c"))  # the context itself is still there, whole
        assert needed == 2
        with pytest.raises(lf.ContextBudgetExceeded) as caught:
            compactor.context("c", max_tokens=5)
    error = caught.value
    assert error.code == "context-budget-exceeded"
    assert error.budget == 5
    assert error.needed > error.budget
    assert 0 < error.protected < error.needed
    assert_no_secret(str(error))
    assert_no_secret(repr(error))


def test_doc_table_is_up_to_date() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        "regenerate with: python tests/bad_input_table.py > docs/bad-input.md"
    )
    assert markdown().count("\n| ") == len(ROWS) + 1  # header + one line per row


# ---------------------------------------------------------------- reprs never show text


def test_reprs_never_contain_bodies_or_summary_text() -> None:
    requests: list[lf.SummaryRequest] = []

    def summarize(request: lf.SummaryRequest) -> str:
        requests.append(request)
        return SECRET_SUMMARY

    with lf.SQLiteStore() as store:
        for i in range(6):
            store.append(
                "c",
                "user" if i % 2 else "assistant",
                f"{SECRET_BODY} {i}",
                meta={"name": "tool"},
                protected=i == 0,
                protection_reason="pending-confirmation" if i == 0 else None,
            )
        policy = lf.CompactionPolicy("v", min_new_turns=1, keep_tail=2)
        outcome = lf.Compactor(store, policy, summarize).compact("c")
        assert outcome.accepted
        store.purge_through("c", 1, "retention", force=False)
        failed = lf.Compactor(store, policy, lambda request: " ").compact("c", force=True)
        context = store.context("c", "v")
        ledger = store.load("c")
        history = store.summary_history("c")
        plan = store.start_plan("c", 2, "v")
        boundary = store.history_boundary("c")
        store_repr = repr(store)

    summary_items = [item for item in context.items if isinstance(item, lf.SummaryItem)]
    turn_items = [item for item in context.items if isinstance(item, lf.TurnItem)]
    assert summary_items and turn_items and requests and history
    assert outcome.summary is not None and outcome.summary.text == SECRET_SUMMARY
    write = lf.accept_summary_result(outcome.summary, ledger, "v", "other-plan")
    values: list[object] = [
        *ledger.turns,
        ledger,
        *turn_items,
        *summary_items,
        outcome.summary,
        outcome,
        failed,
        context,
        *history,
        *requests,
        plan,
        write,
        lf.check_summary(outcome.summary, ledger, "v"),
        boundary,
        Transcript("c", "test", ledger.turns),
        lf.Compactor(lf.SQLiteStore(), policy, summarize),
        lf.ExtractiveSummarizer(),
        policy,
    ]
    for value in values:
        assert_no_secret(repr(value))
        assert_no_secret(str(value))
    assert_no_secret(store_repr)
    # The texts are really in there: the reprs hide them, not the values.
    assert any(SECRET_BODY in turn.body for turn in ledger.turns)
    assert requests[0].turns and SECRET_BODY in requests[0].turns[0].text


def test_summary_request_repr_hides_previous_summary() -> None:
    request = lf.SummaryRequest(
        "c",
        "p",
        "v",
        (lf.TurnItem("t1", "user", SECRET_BODY, 1),),
        previous_summary=SECRET_SUMMARY,
    )
    assert_no_secret(repr(request))
    assert f"<{len(SECRET_SUMMARY)} chars>" in repr(request)


def test_failed_async_compaction_outcome_repr_hides_the_exception_text() -> None:
    async def broken(request: lf.SummaryRequest) -> str:
        raise RuntimeError(SECRET_SUMMARY)

    with lf.SQLiteStore() as store:
        for i in range(4):
            store.append("c", "user", f"{SECRET_BODY} {i}")
        outcome = asyncio.run(
            lf.Compactor(
                store, lf.CompactionPolicy("v", min_new_turns=1, keep_tail=1), broken
            ).acompact("c")
        )
        history = store.summary_history("c")
    assert outcome == lf.CompactionOutcome("failed", None, "summarizer-error")
    assert_no_secret(repr(outcome))
    assert_no_secret(repr(history))
