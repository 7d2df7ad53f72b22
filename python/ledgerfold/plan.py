"""Compaction planning (SPEC §4): which turns a summary may cover. A plan changes nothing."""

from __future__ import annotations

from dataclasses import dataclass

from ledgerfold import _native, _validate
from ledgerfold._native import Conversation

__all__ = ["CompactionPlan", "plan_compaction"]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The frozen source set of one compaction attempt."""

    plan_id: str
    conversation_id: str
    source_revision: int
    compacted_ids: tuple[str, ...]
    preserved_ids: tuple[str, ...]
    through_sequence: int

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to compact; no summary is requested then."""
        return not self.compacted_ids


def plan_compaction(conversation: Conversation, keep_tail: int, plan_id: str) -> CompactionPlan:
    """Plan a compaction: the last `keep_tail` turns are the tail; a prefix turn is compacted
    when it is not protected and no member of its group is protected or in the tail."""
    conversation = _validate.conversation(conversation)
    _validate.integer("keep_tail", keep_tail, minimum=1)
    plan_id = _validate.text("plan_id", plan_id)
    compacted, preserved, through_sequence = _native.plan(conversation, keep_tail)
    return CompactionPlan(
        plan_id=plan_id,
        conversation_id=conversation.id,
        source_revision=conversation.revision,
        compacted_ids=compacted,
        preserved_ids=preserved,
        through_sequence=through_sequence,
    )
