"""The store's context read (SPEC §8, §17.2, §17.3): the fast path when the pointed summary
is current and of the policy (its sources neither loaded nor hashed), else the whole ledger
through `assemble_context`. Runs inside one read transaction of the store."""

from __future__ import annotations

import logging

from ledgerfold._context import AssembledContext, assemble_context, with_purged_summary
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _plan_roles as plan_roles
from ledgerfold.store import _retention as retention
from ledgerfold.store import _summaries as summaries
from ledgerfold.store import _unit_splits as unit_splits
from ledgerfold.store._database import Transaction
from ledgerfold.store._rows import DAMAGED, DamagedSummary
from ledgerfold.store._schema import CURRENT, STALE, TURN_LIVE

__all__ = ["assemble", "log_fallback"]

_log = logging.getLogger("ledgerfold.store")


def assemble(
    transaction: Transaction,
    cache: summaries.VersionCache,
    conversation_id: str,
    policy_version: str,
) -> AssembledContext:
    """`SQLiteStore.context` for validated arguments."""
    damaged: DamagedSummary | None = None
    assembled: AssembledContext | None = None
    with transaction(write=False, operation="context") as conn:
        boundary = ledger.boundary(conn, conversation_id)
        try:
            pointed = summaries.pointed(conn, cache, conversation_id, strict=True)
        except DamagedSummary as damage:  # a verdict, not a crash: the context is raw
            pointed, damaged = None, damage
        if pointed is not None:
            version, status, reason = pointed
            envelope = version.envelope
            if (
                status == CURRENT
                and envelope.policy_version == policy_version
                and envelope.conversation_id == conversation_id  # else the full check says
                and not conn.execute(
                    "SELECT 1 FROM turns WHERE conversation_id = ? AND id = ? AND state = ?",
                    (conversation_id, envelope.id, TURN_LIVE),
                ).fetchone()
            ):
                items = summaries.summarised_items(conn, conversation_id, version)
                split = unit_splits.split_unit(conn, conversation_id, version.pk, items)
                missing = None
                try:
                    if split is None:
                        missing = plan_roles.missing_preserved(conn, version)
                except DamagedSummary as damage:
                    # Its plan's roles cannot be read (another tool's write): the layout
                    # cannot be checked, so raw as for a damaged record (a rebase is due).
                    damaged = damage
                if split is None and missing is None and damaged is None:
                    return AssembledContext(with_purged_summary(items, boundary), None, boundary)
                pointed = None
                if split is not None:
                    # A database written before §17.2's units: the summary splits a call
                    # from its result, so it is stale (a full check would say so too).
                    assembled = AssembledContext(
                        ledger.raw_items(conn, conversation_id),
                        "stale-summary:group-split",
                        None,
                        split,
                    )
                elif missing is not None:
                    # SPEC §17.3: raw until the next compaction (due at once) lays it
                    # out anew.
                    assembled = AssembledContext(
                        ledger.raw_items(conn, conversation_id),
                        "preserved-missing",
                        None,
                        missing,
                    )
        if pointed is None and assembled is None:
            # No summary: the context is every turn raw, read as items directly.
            assembled = AssembledContext(
                ledger.raw_items(conn, conversation_id),
                "no-summary" if damaged is None else f"stale-summary:{DAMAGED}",
                None,
                None if damaged is None else damaged.summary_id,
            )
        elif pointed is not None:
            conversation = ledger.load(conn, conversation_id)
            sealed = retention.sealed_digests(conn, conversation_id, version.pk)
    if pointed is not None:
        assembled = assemble_context(conversation, envelope, policy_version, sealed=sealed)
        if status == STALE and assembled.fallback is None:
            # The sources were edited back to their old values; a stale version stays
            # stale (its record says so), so the context stays raw.
            raw = assemble_context(conversation, None, policy_version)
            assembled = AssembledContext(raw.items, f"stale-summary:{reason}")
    assert assembled is not None
    log_fallback(conversation_id, assembled)
    return AssembledContext(
        with_purged_summary(assembled.items, boundary),
        assembled.fallback,
        boundary,
        assembled.fallback_id,
    )


def log_fallback(conversation_id: str, assembled: AssembledContext) -> None:
    """Log a context served raw (IDs and counts only)."""
    if assembled.fallback is not None:
        _log.info(
            "context fallback: conversation=%s fallback=%s id=%s turns=%d",
            conversation_id,
            assembled.fallback,
            assembled.fallback_id,
            len(assembled.items),
        )
