"""Compaction planning (SPEC §4, §15.3): which turns a summary may cover. A plan changes
nothing."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledgerfold import _native, _validate
from ledgerfold._errors import InvalidInput
from ledgerfold._model import ROLES
from ledgerfold._native import Conversation, SourceIds, Turn
from ledgerfold._toolcalls import open_call_turns

__all__ = ["CompactionPlan", "pinned_ids", "plan_compaction", "preserve_roles_arg"]

# A summary's `source_ids` may be a `SourceIds` (the store's rolling versions): an immutable
# sequence of str that equals the tuple of its IDs.
Sequence.register(SourceIds)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The frozen source set of one compaction attempt."""

    plan_id: str
    conversation_id: str
    source_revision: int
    compacted_ids: tuple[str, ...] | SourceIds
    preserved_ids: tuple[str, ...]
    through_sequence: int

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to compact; no summary is requested then."""
        return not self.compacted_ids


def preserve_roles_arg(value: object, field: str = "preserve_roles") -> tuple[str, ...]:
    """`preserve_roles` as a sorted tuple of known roles (`InvalidInput` otherwise)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInput(
            f"{field}: must be an iterable of roles", field=field, problem="wrong-type"
        )
    roles = set()
    for role in value:
        if role not in ROLES:
            raise InvalidInput(
                f"{field}: unknown role (expected one of {', '.join(ROLES)})",
                field=field,
                problem="unknown-value",
            )
        roles.add(role)
    return tuple(sorted(roles))


def pinned_ids(turns: Iterable[Turn], preserve_roles: tuple[str, ...]) -> set[str]:
    """Turns that stay raw like protected ones: a role in `preserve_roles`, or an assistant
    turn with a tool call no tool turn answers yet (an open group)."""
    turns = list(turns)
    pinned = open_call_turns(turns)
    if preserve_roles:
        pinned.update(turn.id for turn in turns if turn.role in preserve_roles)
    return pinned


def plan_compaction(
    conversation: Conversation,
    keep_tail: int,
    plan_id: str,
    *,
    preserve_roles: Iterable[str] = (),
) -> CompactionPlan:
    """Plan a compaction: the last `keep_tail` turns are the tail; a prefix turn is compacted
    when it is not protected, its role is not in `preserve_roles`, it calls no tool that is
    still unanswered, and no member of its compaction unit is any of those or in the tail.
    A unit (SPEC §17.2, `ledgerfold._toolcalls.unit_roots`) is the turns sharing a `group`
    plus, whatever their groups, each assistant turn with the tool turns answering its
    calls, merged transitively: a plan never separates a call from its results."""
    conversation = _validate.conversation(conversation)
    _validate.integer("keep_tail", keep_tail, minimum=1)
    plan_id = _validate.text("plan_id", plan_id)
    roles = preserve_roles_arg(preserve_roles)
    return plan_unchecked(conversation, keep_tail, plan_id, roles)


def plan_unchecked(
    conversation: Conversation, keep_tail: int, plan_id: str, preserve_roles: tuple[str, ...]
) -> CompactionPlan:
    """`plan_compaction` for arguments already validated at the public boundary."""
    pinned = pinned_ids(conversation.turns, preserve_roles)
    compacted, preserved, through_sequence = _native.plan(conversation, keep_tail, pinned)
    return CompactionPlan(
        plan_id=plan_id,
        conversation_id=conversation.id,
        source_revision=conversation.revision,
        compacted_ids=compacted,
        preserved_ids=preserved,
        through_sequence=through_sequence,
    )


def extend_ids(prefix: tuple[str, ...] | SourceIds, added: Iterable[str]) -> SourceIds:
    """`prefix + added` as a `SourceIds` sharing the prefix's storage when it is one: O(added)
    (issue 28 item 6), so a rolling plan over 100k covered turns does not copy them. The
    commit's prefix check then finds the prefix in shared storage without comparing IDs."""
    if not isinstance(prefix, SourceIds):
        prefix = SourceIds(prefix)
    return prefix.extended(added)


def starts_with_ids(ids: tuple[str, ...] | SourceIds, prefix: tuple[str, ...] | SourceIds) -> bool:
    """Whether `ids` begins with `prefix` (a native comparison: IDs a `SourceIds` shares
    with its prefix's storage are not compared, the same object is not compared as text)."""
    return _native.starts_with_ids(ids, prefix)
