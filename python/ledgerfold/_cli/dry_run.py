"""`compact --dry-run`: what `compact` would do to a conversation, computed on a read-only
view (the ledger as loaded plus the current summary), with no plan registered and nothing
written (SPEC §15.7).

It mirrors the store's planning (`store/compaction.py`) and the Compactor's chunking
(`fold_chunk`): a compaction extends the current summary (``rolling``) when that summary is
of the same policy and every one of its live sources is still compactable (new turns below
its slot included, SPEC §17.5), is a ``rebase`` when it replaces a summary, and ``first``
when the conversation has none. The backlog is folded in chunks of at most
`max_input_tokens`, each chunk one summarizer request.
"""

from __future__ import annotations

from typing import Any

from ledgerfold._cli.render import sequence_ranges
from ledgerfold._fold import fold_chunk
from ledgerfold._model import Conversation, Turn
from ledgerfold._native import SourceIds
from ledgerfold._plan import plan_compaction
from ledgerfold._policy import CompactionPolicy
from ledgerfold._summary import SummaryEnvelope

__all__ = ["dry_run"]

_PLAN_ID = "dry-run"  # never registered: the plan exists only in this process


def dry_run(
    conversation: Conversation, current: SummaryEnvelope | None, policy: CompactionPolicy
) -> dict[str, Any]:
    """The plan and the summarizer requests `compact` would make, as `--json` prints it."""
    plan = plan_compaction(
        conversation, policy.keep_tail, _PLAN_ID, preserve_roles=policy.preserve_roles
    )
    compacted = [conversation.get(turn_id) for turn_id in plan.compacted_ids]
    turns = [turn for turn in compacted if turn is not None]
    base = _extended(conversation, current, policy, plan.compacted_ids)
    covered = frozenset(base.source_ids) if base is not None else frozenset()
    new_turns = [turn for turn in turns if turn.id not in covered]
    if base is None and _sealed(conversation, current, policy):
        new_turns = []  # a sealed summary is never superseded by a rebase (the store's rule)
    requests: list[dict[str, Any]] = []
    covered_count = len(covered)
    remaining: list[Turn] = new_turns
    while remaining:
        chunk, items = fold_chunk(remaining, policy.max_input_tokens, policy.counter)
        requests.append(
            {
                "turns": [turn.id for turn in chunk],
                "sequences": sequence_ranges([turn.sequence for turn in chunk]),
                "tokens": sum(policy.counter(item.text) for item in items),
                "covered_count": covered_count,
                "previous_summary": base.id if base is not None and not requests else None,
            }
        )
        covered_count += len(chunk)
        remaining = remaining[len(chunk) :]
    # A conversation's first summary replaces nothing: it is no rebase.
    mode = "rolling" if base is not None else "rebase" if current is not None else "first"
    status = mode if new_turns else "nothing-to-compact"
    return {
        "conversation": conversation.id,
        "status": status,
        "current_summary": current.id if current is not None else None,
        "compacted": len(plan.compacted_ids),
        # The turns the extended summary covers already (its requests' first covered_count;
        # also when there is nothing new to fold, where the table showed 0).
        "covered": len(covered),
        "preserved": len(plan.preserved_ids),
        "through_sequence": plan.through_sequence,
        "new_turns": len(new_turns),
        "tokens": sum(request["tokens"] for request in requests),
        "requests": requests,
    }


def _sealed(
    conversation: Conversation, current: SummaryEnvelope | None, policy: CompactionPolicy
) -> bool:
    """The current summary, of this policy, has sources gone from the ledger (purged: a
    retraction would have made it stale)."""
    return (
        current is not None
        and current.policy_version == policy.version
        and any(conversation.get(turn_id) is None for turn_id in current.source_ids)
    )


def _extended(
    conversation: Conversation,
    current: SummaryEnvelope | None,
    policy: CompactionPolicy,
    compacted_ids: tuple[str, ...] | SourceIds,
) -> SummaryEnvelope | None:
    """The current summary when the plan extends it, else None (a rebase)."""
    if current is None or current.policy_version != policy.version:
        return None
    # Sources gone from the ledger were purged and are sealed (SPEC §15.5; a retraction
    # would have made the summary stale): only the live ones must stay compactable.
    live = {turn_id for turn_id in current.source_ids if conversation.get(turn_id) is not None}
    if not live <= set(compacted_ids):
        return None  # coverage would shrink (the tail grew, a source became preserved)
    # A turn below the summary's slot that became compactable extends it too (SPEC §17.5).
    return current
