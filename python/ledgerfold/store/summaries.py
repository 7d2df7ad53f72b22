"""Plans and summary versions inside one transaction: registering a plan, the atomic commit
of a result (SPEC §9), failure records, history, and the version cache.

Every function takes an open connection inside the caller's transaction; `SQLiteStore` owns
the transactions, validation and logging. Versions read or written go to the cache only
after their transaction commits (SPEC §15.4).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from ledgerfold.context import ContextItem, SummaryItem
from ledgerfold.errors import InvalidInput
from ledgerfold.model import Conversation
from ledgerfold.plan import CompactionPlan, plan_compaction
from ledgerfold.store import ledger
from ledgerfold.store.database import now
from ledgerfold.store.rows import (
    ITEM_COLUMNS,
    SUMMARY_COLUMNS,
    Version,
    envelope_from_row,
    item_from_row,
)
from ledgerfold.store.schema import TURN_LIVE
from ledgerfold.summary import SummaryEnvelope, SummaryWrite, accept_summary_result

__all__ = [
    "VersionCache",
    "commit",
    "mark_stale",
    "pointed",
    "record_failure",
    "register_plan",
    "summarised_items",
    "version",
]

#: Envelopes kept in memory per store; summaries are immutable, so entries never go stale.
_CACHE_LIMIT = 64


class VersionCache:
    """Stored versions by summary ID. A version found or written inside a transaction is
    staged, and published by `publish()` once that transaction has committed; `discard()`
    drops what a failed transaction staged."""

    def __init__(self) -> None:
        self._versions: dict[str, Version] = {}
        self._staged: list[Version] = []

    def get(self, summary_id: str) -> Version | None:
        return self._versions.get(summary_id)

    def stage(self, staged: Version) -> None:
        self._staged.append(staged)

    def publish(self) -> None:
        for staged in self._staged:
            if len(self._versions) >= _CACHE_LIMIT:
                self._versions.pop(next(iter(self._versions)))
            self._versions[staged.envelope.id] = staged
        self._staged.clear()

    def discard(self) -> None:
        self._staged.clear()


def version(conn: sqlite3.Connection, cache: VersionCache, row: tuple[Any, ...]) -> Version:
    """The version of a `summaries` row of `SUMMARY_COLUMNS` (never a `failed` row)."""
    found = cache.get(row[1])
    if found is not None and found.pk == row[0]:
        return found
    if row[12] is not None:
        source_ids = tuple(json.loads(row[12]))
    else:
        source_ids = tuple(
            r[0]
            for r in conn.execute(
                "SELECT turn_id FROM summary_sources WHERE summary_pk = ? ORDER BY position",
                (row[0],),
            )
        )
    read = envelope_from_row(row, source_ids)
    cache.stage(read)
    return read


def pointed(
    conn: sqlite3.Connection, cache: VersionCache, conversation_id: str
) -> tuple[Version, str, str | None] | None:
    """The version the conversation's pointer designates, its status and reason."""
    row = conn.execute(
        f"SELECT {SUMMARY_COLUMNS} FROM summaries"
        " WHERE pk = (SELECT current_summary FROM conversations WHERE id = ?)",
        (conversation_id,),
    ).fetchone()
    if row is None:
        return None
    return version(conn, cache, tuple(row)), row[4], row[5]


def register_plan(
    conn: sqlite3.Connection,
    conversation_id: str,
    keep_tail: int,
    policy_version: str,
    plan_id: str,
) -> CompactionPlan:
    """Plan on the current ledger and make the plan the conversation's active one."""
    if conn.execute("SELECT 1 FROM plans WHERE id = ?", (plan_id,)).fetchone():
        raise InvalidInput(
            f"plan_id: plan {plan_id!r} already exists", field="plan_id", problem="duplicate"
        )
    plan = plan_compaction(ledger.load(conn, conversation_id), keep_tail, plan_id)
    plan_pk = conn.execute(
        "INSERT INTO plans (id, conversation_id, policy_version, source_revision,"
        " through_sequence, compacted_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            plan_id,
            conversation_id,
            policy_version,
            plan.source_revision,
            plan.through_sequence,
            len(plan.compacted_ids),
            now(),
        ),
    ).lastrowid
    conn.execute(
        "INSERT INTO active_plans (conversation_id, plan_pk) VALUES (?, ?)"
        " ON CONFLICT (conversation_id) DO UPDATE SET plan_pk = excluded.plan_pk",
        (conversation_id, plan_pk),
    )
    return plan


def commit(
    conn: sqlite3.Connection, cache: VersionCache, envelope: SummaryEnvelope
) -> tuple[SummaryWrite, int]:
    """Check the active plan (then cleared: a plan yields at most one accepted version) and
    the sources against the plan's policy version; write version + source index + kept turns
    + pointer, or a `rejected` record. Returns the verdict and the ledger revision."""
    if conn.execute("SELECT 1 FROM summaries WHERE id = ?", (envelope.id,)).fetchone():
        raise InvalidInput(
            f"envelope.id: summary {envelope.id!r} already exists",
            field="envelope.id",
            problem="duplicate",
        )
    active = conn.execute(
        "SELECT p.pk, p.id, p.policy_version FROM active_plans a"
        " JOIN plans p ON p.pk = a.plan_pk WHERE a.conversation_id = ?",
        (envelope.conversation_id,),
    ).fetchone()
    conversation = ledger.load(conn, envelope.conversation_id)
    if active is None:
        write = SummaryWrite(False, envelope, "stale-source", "superseded-plan")
    else:
        write = accept_summary_result(envelope, conversation, active[2], active[1])
    created_at = now()
    if not write.accepted:
        conn.execute(
            "INSERT INTO summaries (id, conversation_id, plan_id, status, reason,"
            " created_at, source_revision, source_fingerprint, policy_version, text,"
            " source_count, rejected_source_ids)"
            " VALUES (?, ?, ?, 'rejected', ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                envelope.id,
                envelope.conversation_id,
                envelope.plan_id,
                write.detail,
                created_at,
                envelope.source_revision,
                envelope.source_fingerprint,
                envelope.policy_version,
                envelope.text,
                len(envelope.source_ids),
                json.dumps(envelope.source_ids, ensure_ascii=False),
            ),
        )
    else:
        cache.stage(_write_version(conn, envelope, conversation, created_at))
        conn.execute(
            "DELETE FROM active_plans WHERE conversation_id = ?", (envelope.conversation_id,)
        )
    return write, conversation.revision


def _write_version(
    conn: sqlite3.Connection,
    envelope: SummaryEnvelope,
    conversation: Conversation,
    created_at: str,
) -> Version:
    sources = [conversation.get(turn_id) for turn_id in envelope.source_ids]
    # accept_summary_result has checked that every source exists, in ledger order.
    through_sequence = max(turn.sequence for turn in sources if turn is not None)
    summary_pk = conn.execute(
        "INSERT INTO summaries (id, conversation_id, plan_id, status, reason, created_at,"
        " source_revision, source_fingerprint, policy_version, text, source_count,"
        " through_sequence) VALUES (?, ?, ?, 'current', NULL, ?, ?, ?, ?, ?, ?, ?)",
        (
            envelope.id,
            envelope.conversation_id,
            envelope.plan_id,
            created_at,
            envelope.source_revision,
            envelope.source_fingerprint,
            envelope.policy_version,
            envelope.text,
            len(envelope.source_ids),
            through_sequence,
        ),
    ).lastrowid
    assert summary_pk is not None
    conn.executemany(
        "INSERT INTO summary_sources (summary_pk, position, turn_id, turn_digest)"
        " VALUES (?, ?, ?, ?)",
        [
            (summary_pk, position, turn.id, turn.digest)
            for position, turn in enumerate(sources)
            if turn is not None
        ],
    )
    # The live turns below the summary's slot that it does not cover: read by `context()`.
    conn.execute(
        "INSERT INTO summary_kept (summary_pk, turn_pk) SELECT ?, t.pk FROM turns AS t"
        " WHERE t.conversation_id = ? AND t.state = ? AND t.sequence < ?"
        " AND t.id NOT IN (SELECT turn_id FROM summary_sources WHERE summary_pk = ?)",
        (summary_pk, envelope.conversation_id, TURN_LIVE, through_sequence, summary_pk),
    )
    conn.execute(
        "UPDATE summaries SET status = 'superseded' WHERE pk = ("
        " SELECT current_summary FROM conversations WHERE id = ?) AND status = 'current'",
        (envelope.conversation_id,),
    )
    conn.execute(
        "UPDATE conversations SET current_summary = ? WHERE id = ?",
        (summary_pk, envelope.conversation_id),
    )
    return Version(summary_pk, envelope, through_sequence)


def record_failure(conn: sqlite3.Connection, plan_id: str, reason: str) -> str:
    """Record a failed attempt of a known plan; returns its conversation ID."""
    row = conn.execute("SELECT conversation_id FROM plans WHERE id = ?", (plan_id,)).fetchone()
    if row is None:
        raise InvalidInput(
            f"plan_id: unknown plan {plan_id!r}", field="plan_id", problem="unknown-value"
        )
    conn.execute(
        "INSERT INTO summaries (conversation_id, plan_id, status, reason, created_at)"
        " VALUES (?, ?, 'failed', ?, ?)",
        (row[0], plan_id, reason, now()),
    )
    return str(row[0])


def mark_stale(conn: sqlite3.Connection, items: Iterable[tuple[str, str, str]]) -> int:
    """`(reason, summary_id, conversation_id)` each; only `current` versions change."""
    changed = 0
    for reason, summary_id, conversation_id in items:
        changed += conn.execute(
            "UPDATE summaries SET status = 'stale', reason = ?"
            " WHERE id = ? AND conversation_id = ? AND status = 'current'",
            (reason, summary_id, conversation_id),
        ).rowcount
    return changed


def summarised_items(
    conn: sqlite3.Connection, conversation_id: str, used: Version
) -> tuple[ContextItem, ...]:
    """The context with a current summary, read without its sources: the kept turns below
    its slot, the summary, then every live turn after its last source."""
    envelope = used.envelope
    kept = conn.execute(
        f"SELECT {', '.join('t.' + c.strip() for c in ITEM_COLUMNS.split(','))}"
        " FROM summary_kept k JOIN turns t ON t.pk = k.turn_pk"
        " WHERE k.summary_pk = ? AND t.state = ? ORDER BY t.sequence",
        (used.pk, TURN_LIVE),
    )
    items: list[ContextItem] = [item_from_row(row) for row in kept]
    items.append(
        SummaryItem(envelope.id, envelope.text, used.through_sequence, envelope.source_ids)
    )
    tail = conn.execute(
        f"SELECT {ITEM_COLUMNS} FROM turns"
        " WHERE conversation_id = ? AND sequence > ? AND state = ? ORDER BY sequence",
        (conversation_id, used.through_sequence, TURN_LIVE),
    )
    items.extend(item_from_row(row) for row in tail)
    return tuple(items)
