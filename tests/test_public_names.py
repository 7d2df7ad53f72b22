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


#: The public modules (SPEC §17.9) besides `ledgerfold` itself.
PUBLIC_PACKAGES = {
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


def _public_modules() -> list[str]:
    import pkgutil

    names = ["ledgerfold"]
    for module in pkgutil.walk_packages(ledgerfold.__path__, "ledgerfold."):
        parts = module.name.split(".")
        if not any(part.startswith("_") for part in parts[1:]):
            names.append(module.name)
    return names


def test_only_the_public_paths_are_unprefixed() -> None:
    """Every module not under a public path is private (underscored, SPEC §17.9)."""
    for name in _public_modules()[1:]:
        top = ".".join(name.split(".")[:2])
        assert top in PUBLIC_PACKAGES or name.startswith("ledgerfold.integrations."), name


def test_every_exported_name_has_one_import_path() -> None:
    """No object is exported (`__all__`) by two public modules, and no public subpackage
    offers a top-level name as an attribute either: `from ledgerfold import SQLiteStore` is
    the one way to import it, not also `from ledgerfold.store import SQLiteStore`. (A plain
    module's imports for its own use are its business, not an export.)"""
    import importlib

    homes: dict[int, list[str]] = {}
    for name in _public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an extra that is not installed (its own tests cover it)
            continue
        for exported in getattr(module, "__all__", ()):
            value = getattr(module, exported)
            if type(value) is int:  # small ints are one object (two version numbers of 2)
                continue
            homes.setdefault(id(value), []).append(f"{name}.{exported}")
        if name != "ledgerfold" and hasattr(module, "__path__"):
            for top in ledgerfold.__all__:
                assert getattr(module, top, None) is not getattr(ledgerfold, top), (name, top)
    assert [paths for paths in homes.values() if len(paths) > 1] == []


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


def test_a_backend_of_ones_own_needs_no_private_module() -> None:
    """SPEC §17.9: every type a `Store` method takes or returns, and the due-ness rule its
    `begin_compaction` answers with, come from a public path (`ledgerfold`,
    `ledgerfold.store`): a second backend imports nothing private."""
    import typing

    import ledgerfold.store

    public = {name: getattr(ledgerfold, name) for name in ledgerfold.__all__}
    public.update((name, getattr(ledgerfold.store, name)) for name in ledgerfold.store.__all__)
    for protocol in (ledgerfold.Store, ledgerfold.store.SearchableStore):
        for name, method in vars(protocol).items():
            if name.startswith("_") or not callable(method):
                continue
            for hint in typing.get_type_hints(method).values():
                for part in (hint, *typing.get_args(hint)):
                    for inner in (part, *typing.get_args(part)):
                        if isinstance(inner, type) and inner.__module__.startswith("ledgerfold"):
                            assert public.get(inner.__name__) is inner, (name, inner)
    status = ledgerfold.store.compaction_status
    assert status(0, 1, rebase_due=True, backlog_left=False, relayout=False, failures=0) == (
        "nothing-to-compact"
    )
    assert status(3, 4, rebase_due=False, backlog_left=False, relayout=False, failures=0) == (
        "not-due"
    )
    assert status(3, 4, rebase_due=True, backlog_left=False, relayout=False, failures=0) == "ready"
    assert (
        status(5, 4, rebase_due=False, backlog_left=True, relayout=False, failures=1)
        == "ready"  # a backlog left by a failed chunk waits for enough new turns
    )
    assert (
        status(
            5,
            4,
            rebase_due=False,
            backlog_left=False,
            relayout=False,
            failures=0,
            only_due_at_once=True,
        )
        == "not-due"
    )
