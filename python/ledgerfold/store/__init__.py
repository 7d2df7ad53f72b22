"""Persistence (SPEC §9, §12, §17.9): what a store offers beyond SPEC §11's names.

`Store`, `SQLiteStore` and `SummaryRecord` are imported from `ledgerfold` (their one import
path); this package adds the protocol's version, `SearchableStore` (recall, protocol 2), the
summary status names and `StoreStats`.
"""

from __future__ import annotations

from ledgerfold.store._protocol import PROTOCOL_VERSION, SUMMARY_STATUSES, SearchableStore
from ledgerfold.store._stats import StoreStats

__all__ = [
    "PROTOCOL_VERSION",
    "SUMMARY_STATUSES",
    "SearchableStore",
    "StoreStats",
]
