"""What the Compactor tests share: a conversation of plain turns, a recording summarizer,
the state a failure must leave untouched, and SPEC §1 checked on an assembled context."""

from __future__ import annotations

from typing import Any

from ledgerfold import Compactor, Conversation, SQLiteStore, SummaryEnvelope, SummaryItem
from ledgerfold._compactor import CompactionPolicy, SummaryRequest

CONV = "conv-1"


def fill(
    store: SQLiteStore, count: int, conversation_id: str = CONV, start: int = 0
) -> dict[str, int]:
    """Append `count` alternating user/assistant turns m<start>...; their sequences by ID."""
    written = {}
    for index in range(start, start + count):
        role = "user" if index % 2 == 0 else "assistant"
        turn = store.append(
            conversation_id,
            role,
            f"Message number {index}. It has a second sentence.",
            id=f"m{index}",
        )
        written[turn.id] = turn.sequence
    return written


class Recorder:
    """A sync summarizer that records every request it sees."""

    def __init__(self, text: str = "summary of earlier turns") -> None:
        self.text = text
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return f"{self.text} #{len(self.requests)}"


def stale_with_checkpoints(
    store: SQLiteStore, compactor: Compactor, conversation_id: str
) -> SummaryEnvelope:
    """16 turns t0..t15 compacted four at a time, then the newest summary's last source
    edited: stale, with unchanged ancestors to rebuild from (SPEC §17.5). The summary made
    stale."""
    for n in range(16):
        store.append(conversation_id, "user" if n % 2 else "assistant", f"turn {n}", id=f"t{n}")
        if n % 4 == 3:
            assert compactor.compact(conversation_id).accepted
    head = store.current_summary(conversation_id)
    assert head is not None and head.parent_id is not None
    store.edit(conversation_id, head.source_ids[-1], body="corrected")
    return head


def state(store: SQLiteStore, conversation_id: str = CONV) -> tuple[Conversation, Any]:
    """The ledger and the current summary: what a failure must leave untouched."""
    return store.load(conversation_id), store.current_summary(conversation_id)


def assert_context_invariants(
    store: SQLiteStore,
    policy: CompactionPolicy,
    written: dict[str, int] | None = None,
    conversation_id: str = CONV,
) -> None:
    """SPEC §1 on an assembled context: no duplicates, at most one summary, protected and
    tail turns raw; and every turn ever written (`written`: ID -> sequence, default the
    ledger) that is missing is a source of the summary or was purged behind the boundary."""
    ledger = store.load(conversation_id)
    context = store.context(conversation_id, policy.version)
    summaries = [item for item in context.items if isinstance(item, SummaryItem)]
    assert len(summaries) <= 1
    assert len(context.ids) == len(set(context.ids))
    raw_ids = {item.id for item in context.items if not isinstance(item, SummaryItem)}
    source_ids = set(summaries[0].source_ids) if summaries else set()
    assert not raw_ids & source_ids
    for turn in ledger.turns:
        if turn.protected:
            assert turn.id in raw_ids
    for turn in ledger.turns[-policy.keep_tail :]:
        assert turn.id in raw_ids
    boundary = context.history_boundary
    if written is None:
        written = {turn.id: turn.sequence for turn in ledger.turns}
    for turn_id, sequence in written.items():
        if turn_id not in raw_ids and turn_id not in source_ids:
            assert boundary is not None, turn_id
            assert sequence <= boundary.through_sequence, turn_id
