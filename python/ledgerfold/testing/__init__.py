"""Test kits for code built on ledgerfold.

`StoreContract` is the `Store` protocol's contract suite (SPEC §9, §12): a backend on another
database proves itself by subclassing it and defining `make_store(self, tmp_path)`, or with one
command: `python -m ledgerfold.testing package.module:make_store`. Needs `pytest` (the
`testing` extra).
"""

from __future__ import annotations

from ledgerfold._optional import require

require("pytest", needed_by="ledgerfold.testing", install="'ledgerfold[testing]'")

from ledgerfold.testing._contract import PV, SECRET, StoreContract, fill, summarise  # noqa: E402

__all__ = ["PV", "SECRET", "StoreContract", "fill", "summarise"]
