"""When a compaction is due (SPEC §15.2, §15.8, §17.3): decisions over plain counts and
flags, which the `Compactor` and a store's `begin_compaction` share (the store reads the
flags from its rows inside its transaction, then asks these)."""

from __future__ import annotations

__all__ = [
    "MAX_BACKOFF_DOUBLINGS",
    "compaction_status",
    "due_at_once",
    "needed_turns",
    "verdict",
]

#: The back-off doubles the new turns needed per consecutive failure, up to 2**6 times.
MAX_BACKOFF_DOUBLINGS = 6


def needed_turns(min_new_turns: int, failures: int) -> int:
    """New turns a compaction needs after `failures` consecutive failed attempts:
    `min_new_turns × 2^min(failures, 6)`."""
    return min_new_turns << min(failures, MAX_BACKOFF_DOUBLINGS)


def due_at_once(*, rebase_due: bool, backlog_left: bool, relayout: bool, failures: int) -> bool:
    """Due whatever the number of new turns: coverage would shrink (a rebase), the current
    summary is one chunk of a backlog still being folded and nothing has failed since, or
    its layout lost a preserved turn (the context falls back until then)."""
    return rebase_due or relayout or (failures == 0 and backlog_left)


def verdict(new_turns: int, needed: int, *, at_once: bool) -> str:
    """``nothing-to-compact`` (no uncovered compactable turn), ``not-due`` (fewer than
    `needed` and nothing due at once) or ``ready``."""
    if new_turns == 0:
        return "nothing-to-compact"
    if new_turns < needed and not at_once:
        return "not-due"
    return "ready"


def compaction_status(
    new_turns: int,
    min_new_turns: int,
    *,
    rebase_due: bool,
    backlog_left: bool,
    relayout: bool,
    failures: int,
    only_due_at_once: bool = False,
) -> str:
    """The status `Store.begin_compaction` answers (public as `ledgerfold.store.
    compaction_status`): ``ready`` (register the plan), ``not-due`` or
    ``nothing-to-compact``, from what the store read in its transaction — `new_turns`
    compactable turns its current summary does not cover, whether coverage would shrink
    (`rebase_due`, or a rebuild from a checkpoint), whether that summary's plan left a
    backlog (`backlog_left`), whether its layout lost a preserved turn (`relayout`) and the
    consecutive `failures`. With `only_due_at_once`, enough new turns are not enough."""
    at_once = due_at_once(
        rebase_due=rebase_due, backlog_left=backlog_left, relayout=relayout, failures=failures
    )
    status = verdict(new_turns, min_new_turns, at_once=at_once)
    if status == "ready" and only_due_at_once and not at_once:
        return "not-due"  # enough new turns, but only what is due at once was asked
    return status
