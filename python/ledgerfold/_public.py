"""The public names of `ledgerfold` (SPEC §11, §16.5, §17.8), one import path each: the
package imports this module on the first use of one of them, so that `import ledgerfold`
alone imports next to nothing (see the package's docstring)."""

from __future__ import annotations

from ledgerfold._citations import citations
from ledgerfold._compactor import CompactionOutcome, Compactor
from ledgerfold._context import (
    AssembledContext,
    HistoryBoundary,
    SummaryItem,
    TurnItem,
    assemble_context,
)
from ledgerfold._errors import (
    ContextBudgetExceeded,
    DuplicateId,
    InvalidInput,
    LedgerfoldError,
    StoreError,
)
from ledgerfold._events import EVENT_NAMES, Event
from ledgerfold._model import Conversation, Turn, fingerprint_turns, same_ordered_ids
from ledgerfold._plan import CompactionPlan, plan_compaction
from ledgerfold._policy import CompactionPolicy
from ledgerfold._search_hit import SearchHit
from ledgerfold._summary import (
    SummaryCheck,
    SummaryEnvelope,
    SummaryWrite,
    accept_summary_result,
    check_summary,
    create_summary_envelope,
    is_summary_current,
)
from ledgerfold.adapters._chat import from_chat_messages, to_chat_messages
from ledgerfold.store._protocol import Store, SummaryRecord
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.summarizers._base import SummaryRequest
from ledgerfold.summarizers._extractive import ExtractiveSummarizer

__all__ = [
    "EVENT_NAMES",
    "AssembledContext",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionPolicy",
    "Compactor",
    "ContextBudgetExceeded",
    "Conversation",
    "DuplicateId",
    "Event",
    "ExtractiveSummarizer",
    "HistoryBoundary",
    "InvalidInput",
    "LedgerfoldError",
    "SQLiteStore",
    "SearchHit",
    "Store",
    "StoreError",
    "SummaryCheck",
    "SummaryEnvelope",
    "SummaryItem",
    "SummaryRecord",
    "SummaryRequest",
    "SummaryWrite",
    "Turn",
    "TurnItem",
    "accept_summary_result",
    "assemble_context",
    "check_summary",
    "citations",
    "create_summary_envelope",
    "fingerprint_turns",
    "from_chat_messages",
    "is_summary_current",
    "plan_compaction",
    "same_ordered_ids",
    "to_chat_messages",
]
