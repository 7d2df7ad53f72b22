"""Persistence (SPEC §9, §12, §17.9): what a store offers beyond SPEC §11's names.

`Store`, `SQLiteStore` and `SummaryRecord` are imported from `ledgerfold` (their one import
path); this package adds the protocol's version, `SearchableStore` (recall, protocol 2), the
summary status names and `StoreStats`. A backend of your own implements `Store`
(`SearchableStore` for recall) with what it needs from here and from `ledgerfold`: the
`CompactionWork` that `begin_compaction` returns and `compaction_status`, the due-ness rule
it answers with.
"""

from __future__ import annotations

from ledgerfold._due import compaction_status
from ledgerfold.store._protocol import (
    PROTOCOL_VERSION,
    SUMMARY_STATUSES,
    CompactionWork,
    SearchableStore,
)
from ledgerfold.store._stats import StoreStats

__all__ = [
    "PROTOCOL_VERSION",
    "SUMMARY_STATUSES",
    "CompactionWork",
    "SearchableStore",
    "StoreStats",
    "compaction_status",
]
