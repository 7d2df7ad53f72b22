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


#: SPEC §16.5 "Names" (recall) and §17.8 (events) add to §11's names.
ADDED_NAMES = ["SearchHit", "citations", "Event", "EVENT_NAMES"]


def test_the_names_added_since_v1_are_exported() -> None:
    for name in ADDED_NAMES:
        assert hasattr(ledgerfold, name), name
        assert name in ledgerfold.__all__, name


def test_every_exported_name_has_one_import_path() -> None:
    """A public name lives in `ledgerfold` (or one public subpackage), never also in a
    public module under another name; private modules are underscored (SPEC §17.9)."""
    import pkgutil

    public = {
        "ledgerfold.adapters",
        "ledgerfold.summarizers",
        "ledgerfold.tokens",
        "ledgerfold.tools",
        "ledgerfold.store",
        "ledgerfold.revalidate",
        "ledgerfold.export",
        "ledgerfold.dask",
        "ledgerfold.integrations",
        "ledgerfold.testing",
    }
    for module in pkgutil.walk_packages(ledgerfold.__path__, "ledgerfold."):
        parts = module.name.split(".")
        if any(part.startswith("_") for part in parts[1:]):
            continue
        top = ".".join(parts[:2])
        assert top in public or module.name.startswith("ledgerfold.integrations."), module.name


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
