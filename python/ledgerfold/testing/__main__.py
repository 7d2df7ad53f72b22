"""`python -m ledgerfold.testing MODULE:FACTORY [PYTEST ARGS...]`: run the `Store` contract
suite against the store that `FACTORY(tmp_path)` makes; the exit status is pytest's."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledgerfold.testing import _contract

USAGE = "usage: python -m ledgerfold.testing MODULE:FACTORY [PYTEST ARGS...]"


def load_factory(spec: str) -> Callable[[Path], Any]:
    """`package.module:name` → the callable it names, or SystemExit(2) saying what is wrong."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"{USAGE}\nerror: {spec!r} is not MODULE:FACTORY")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise SystemExit(f"error: cannot import {module_name!r}: {error}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise SystemExit(f"error: {module_name!r} has no callable {attribute!r}")
    return factory  # type: ignore[no-any-return]


class _FactoryPlugin:
    """Gives the contract module's `TestContract` class the user's factory."""

    def __init__(self, factory: Callable[[Path], Any]) -> None:
        self.factory = factory

    def pytest_configure(self, config: pytest.Config) -> None:
        _contract.CONFIGURED_FACTORY = self.factory


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    factory = load_factory(args[0])
    suite = str(Path(_contract.__file__).with_name("_suite.py"))
    return int(
        pytest.main([suite, "-p", "no:cacheprovider", *args[1:]], plugins=[_FactoryPlugin(factory)])
    )


if __name__ == "__main__":
    sys.exit(main())
