"""`SQLiteStore` is composed, not mixed in (issue 26 item 2): it inherits nothing but
`object`; the retention methods, like the loop's, are its own and delegate to a component
that is given the store's transaction, so no `_transaction` stub waits to be overridden."""

from __future__ import annotations

import inspect
from pathlib import Path

import ledgerfold
from ledgerfold import SQLiteStore, Store

RETENTION = ("retract", "purge_through", "apply_retention", "preview_purge", "delete_conversation")


def test_the_store_inherits_from_nothing_but_object() -> None:
    assert SQLiteStore.__mro__ == (SQLiteStore, object)


def test_the_retention_methods_are_the_stores_own_with_their_docstrings() -> None:
    for name in RETENTION:
        method = vars(SQLiteStore).get(name)
        assert method is not None, name
        assert inspect.getdoc(method), name
        # At least the protocol's parameters (the store may add keywords).
        if hasattr(Store, name):
            assert set(inspect.signature(getattr(Store, name)).parameters) <= set(
                inspect.signature(method).parameters
            ), name


def test_no_stub_waits_for_an_override_in_the_store() -> None:
    package = Path(ledgerfold.__file__).parent / "store"
    stubs = [
        str(path)
        for path in sorted(package.glob("*.py"))
        if "raise NotImplementedError" in path.read_text(encoding="utf-8")
    ]
    assert stubs == []
