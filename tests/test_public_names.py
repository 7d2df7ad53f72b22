"""SPEC §11: every public name is importable from the top-level package."""

from __future__ import annotations

import ledgerfold

SPEC_NAMES = [
    "Turn",
    "Conversation",
    "fingerprint_turns",
    "same_ordered_ids",
    "plan_compaction",
    "CompactionPlan",
    "create_summary_envelope",
    "SummaryEnvelope",
    "check_summary",
    "SummaryCheck",
    "is_summary_current",
    "accept_summary_result",
    "SummaryWrite",
    "assemble_context",
    "AssembledContext",
    "SummaryItem",
    "TurnItem",
    "to_chat_messages",
    "LedgerfoldError",
    "from_chat_messages",
    "InvalidInput",
    "DuplicateId",
    "StoreError",
    "ContextBudgetExceeded",
    "Store",
    "SQLiteStore",
    "SummaryRecord",
    "HistoryBoundary",
    "CompactionPolicy",
    "SummaryRequest",
    "Compactor",
    "CompactionOutcome",
    "ExtractiveSummarizer",
]


def test_every_spec_name_is_exported() -> None:
    assert len(SPEC_NAMES) == 33
    for name in SPEC_NAMES:
        assert hasattr(ledgerfold, name), name
        assert name in ledgerfold.__all__, name


def test_error_hierarchy() -> None:
    assert issubclass(ledgerfold.InvalidInput, ledgerfold.LedgerfoldError)
    assert issubclass(ledgerfold.InvalidInput, ValueError)
    assert issubclass(ledgerfold.DuplicateId, ledgerfold.InvalidInput)
    assert issubclass(ledgerfold.StoreError, ledgerfold.LedgerfoldError)
    assert issubclass(ledgerfold.ContextBudgetExceeded, ledgerfold.LedgerfoldError)
    codes = {
        cls.code
        for cls in (
            ledgerfold.LedgerfoldError,
            ledgerfold.InvalidInput,
            ledgerfold.DuplicateId,
            ledgerfold.StoreError,
            ledgerfold.ContextBudgetExceeded,
        )
    }
    assert len(codes) == 5
