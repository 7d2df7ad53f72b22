"""The module `python -m ledgerfold.testing` hands to pytest: the contract suite bound to the
factory given on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledgerfold.testing import _contract


class TestStoreContract(_contract.StoreContract):
    def make_store(self, tmp_path: Path) -> Any:
        factory = _contract.CONFIGURED_FACTORY
        assert factory is not None, "run through `python -m ledgerfold.testing MODULE:FACTORY`"
        return factory(tmp_path)
