"""Persistence (SPEC §9, §12): the `Store` protocol and its embedded SQLite implementation."""

from __future__ import annotations

from ledgerfold.store._protocol import SUMMARY_STATUSES, Store, SummaryRecord
from ledgerfold.store._sqlite import SQLiteStore

__all__ = ["SUMMARY_STATUSES", "SQLiteStore", "Store", "SummaryRecord"]
