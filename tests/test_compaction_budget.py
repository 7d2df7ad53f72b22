"""When a compaction is due (the trigger, with the default or a custom token counter) and
what `context(max_tokens=...)` does with a budget: returned whole, or refused without ever
dropping a protected turn."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ledgerfold import ContextBudgetExceeded, InvalidInput, SQLiteStore
from ledgerfold._compactor import CompactionOutcome, CompactionPolicy, Compactor
from ledgerfold.tokens import MESSAGE_OVERHEAD_TOKENS, approx_tokens, context_tokens

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from compaction_support import CONV, Recorder, fill  # noqa: E402

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
