"""No frame inspection and no process-wide switches in the library (the
store names each transaction's operation itself; see also test_assemble_gc.py)."""

from __future__ import annotations

from pathlib import Path

import ledgerfold

PACKAGE = Path(ledgerfold.__file__).parent


def _sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))]


def test_no_frame_inspection() -> None:
    assert [
        str(p) for p, text in _sources() if "_getframe" in text or "inspect.stack" in text
    ] == []


def test_no_collector_switch() -> None:
    assert [str(p) for p, text in _sources() if "gc.disable" in text or "gc.freeze" in text] == []


def test_the_loop_methods_are_composed_not_mixed_in() -> None:
    """`SQLiteStore` holds its compaction-loop component (which gets the transaction it
    needs) instead of inheriting methods from a mixin with a `_transaction` stub."""
    loop = ("start_plan", "begin_compaction", "consecutive_failures", "prune_versions")
    for name in loop:
        owners = [cls for cls in ledgerfold.SQLiteStore.__mro__ if name in vars(cls)]
        assert owners == [ledgerfold.SQLiteStore], name
