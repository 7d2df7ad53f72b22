"""Persistence (SPEC §9, §12): the `Store` protocol and its embedded SQLite implementation."""

from __future__ import annotations

from ledgerfold.store._protocol import (
    PROTOCOL_VERSION,
    SUMMARY_STATUSES,
    SearchableStore,
    Store,
    SummaryRecord,
)
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.store._stats import StoreStats

__all__ = [
    "PROTOCOL_VERSION",
    "SUMMARY_STATUSES",
    "SQLiteStore",
    "SearchableStore",
    "Store",
    "StoreStats",
    "SummaryRecord",
]
