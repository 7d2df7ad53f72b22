"""The store's side of one compaction (SPEC §15.1–§15.4, §15.8), inside one transaction.

Cost follows the new work, not the ledger: while the conversation has a current summary of
the policy, planning reads only that summary's kept turns (live non-sources below its slot)
and the turns after it, and a commit extending it reads the new sources plus the summary's
stored source digests. Eager invalidation keeps those digests honest: an edit, retraction
or group-split of any source marks the summary stale in the same transaction, and a stale
summary is never extended. Everything else (no summary, a policy change, a rebase) plans
and checks over the whole ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ledgerfold import _checkpoints as checkpoints
from ledgerfold import _due as due
from ledgerfold._model import Conversation, Turn
from ledgerfold._native import SourceDigests, SourceIds
from ledgerfold._plan import CompactionPlan, extend_ids, plan_unchecked
from ledgerfold._summary import check_summary
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _plan_roles as plan_roles
from ledgerfold.store import _retention as retention
from ledgerfold.store import _summaries as summaries
from ledgerfold.store import _unit_splits as unit_splits
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._plan_registry import mark_ended, register
from ledgerfold.store._rows import TURN_COLUMNS, DamagedSummary, Version, turn_from_row
from ledgerfold.store._schema import ACCEPTED, CURRENT, FAILED, STALE, TURN_LIVE, TURN_PURGED

__all__ = [
    "Planned",
    "cites_purged",
    "failure_streak",
    "mark_ended",
    "plan_view",
    "register",
    "stored_state",
]


@dataclass(frozen=True, slots=True)
class Planned:
    """A plan on the current ledger and what it means for the current summary."""

    plan: CompactionPlan
    #: The current summary the plan extends (its sources are all compacted), or None.
    base: Version | None
    #: Compacted turns the base does not cover (every compacted turn without a base).
    new_turns: tuple[Turn, ...]
    #: A current summary exists but cannot be extended: coverage would shrink.
    rebase_due: bool
    #: The base's stored source digests (None without a base): their fingerprint state, or
    #: the bytes (source order) when new turns lie below the base's slot.
    base_digests: SourceDigests | bytes | None = None
    #: The plan's compacted IDs are the base's source IDs (that very tuple) + the new ones.
    extended: bool = False
    #: The base is a checkpoint: the current summary went stale and is rebuilt from it
    #: (SPEC §17.5), which is due at once.
    rebuild: bool = False
    #: A rebase replaces a stale summary that held purged turns, and no checkpoint of them
    #: is left: what they said leaves the context (reported, SPEC §17.5).
    sealed_lost: bool = False
    #: The plan re-lays a sealed summary out (SPEC §17.3) as an extension adding no turn.
    relaid: bool = False


def failure_streak(conn: sqlite3.Connection, conversation_id: str) -> int:
    """`failed` records since the conversation's newest accepted version."""
    row = conn.execute(
        f"SELECT COUNT(*) FROM summaries WHERE conversation_id = ? AND status = '{FAILED}'"
        " AND pk > COALESCE((SELECT MAX(pk) FROM summaries WHERE conversation_id = ?"
        f" AND status IN {ACCEPTED}), 0)",
        (conversation_id, conversation_id),
    ).fetchone()
    return int(row[0])


def due_at_once(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    pointed: tuple[Version, str, str | None] | None,
    policy_version: str,
    keep_tail: int,
    preserve_roles: tuple[str, ...],
    failures: int,
) -> bool:
    """Whether a compaction is due whatever the number of new turns (SPEC §15.8): coverage
    would shrink (a rebase), or the current summary is a chunk of a backlog still being
    folded and no attempt has failed since. Cheap: no planning."""
    base, _, rebase_due = _base(conn, cache, pointed, policy_version, keep_tail, preserve_roles)
    return due.due_at_once(
        rebase_due=rebase_due,
        backlog_left=left_a_backlog(conn, base),
        relayout=preserved_gone(conn, pointed, policy_version),
        failures=failures,
    )


def preserved_gone(
    conn: sqlite3.Connection,
    pointed: tuple[Version, str, str | None] | None,
    policy_version: str,
) -> bool:
    """Whether the current summary's layout lost a preserved turn below its slot (SPEC
    §17.3): the store's context falls back, so compaction is due at once."""
    if pointed is None or pointed[1] != CURRENT:
        return False
    if pointed[0].envelope.policy_version != policy_version:
        return False
    try:
        return plan_roles.missing_preserved(conn, pointed[0]) is not None
    except DamagedSummary:  # its plan's roles are unreadable: the context is raw too
        return True


def left_a_backlog(conn: sqlite3.Connection, base: Version | None) -> bool:
    """Whether the summary a plan extends was one chunk of a larger backlog: its plan
    compacted turns after its last source (SPEC §15.8's chunks)."""
    if base is None:
        return False
    row = conn.execute(
        "SELECT through_sequence FROM plans WHERE id = ? AND conversation_id = ?",
        (base.envelope.plan_id, base.envelope.conversation_id),
    ).fetchone()
    return row is not None and int(row[0]) > base.through_sequence


def stored_state(
    conn: sqlite3.Connection, cache: summaries.VersionCache, version: Version
) -> SourceDigests | None:
    """The fingerprint state of a version's stored source digests, which an extension of it
    is fingerprinted from: read once (O(covered)), then kept in the cache and extended with
    each rolling commit. None when they do not reproduce the version's fingerprint (its
    index was changed outside ledgerfold): the version is then not extended, as an
    extension would be bound to digests its sources do not have."""
    state = cache.digests(version)
    if state is not None:
        return state
    digests = [
        row[0]
        for row in conn.execute(
            "SELECT turn_digest FROM summary_sources WHERE summary_pk = ? ORDER BY position",
            (version.pk,),
        )
    ]
    try:
        joined = b"".join(digests)
    except TypeError:  # a digest stored as text
        return None
    if len(joined) != 32 * len(digests):
        return None  # (lengths that make up for each other shift digests: caught below)
    state = SourceDigests(joined)
    # O(log covered) on the state just built: the check is nearly free.
    if state.fingerprint() != version.envelope.source_fingerprint:
        return None
    cache.stage_digests(version, state)
    return state


def _base(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    pointed: tuple[Version, str, str | None] | None,
    policy_version: str,
    keep_tail: int,
    preserve_roles: tuple[str, ...],
) -> tuple[Version | None, SourceDigests | None, bool]:
    """The current summary a plan may extend with its fingerprint state, and whether one
    exists that cannot be extended."""
    if pointed is None:
        return None, None, False
    version, status, _ = pointed
    envelope = version.envelope
    if status != CURRENT or envelope.policy_version != policy_version:
        return None, None, False
    after = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM turns WHERE conversation_id = ? AND state = ?"
        " AND sequence > ? LIMIT ?)",
        (envelope.conversation_id, TURN_LIVE, version.through_sequence, keep_tail),
    ).fetchone()[0]
    if after < keep_tail:  # the tail reaches back into the summary's sources
        return None, None, True
    planned_roles = plan_roles.plan_roles(conn, envelope.plan_id)
    if planned_roles is None:  # unreadable (another tool's write): the context is raw
        return None, None, True
    if preserve_roles and list(planned_roles) != list(preserve_roles):
        marks = ",".join("?" * len(preserve_roles))
        if conn.execute(
            "SELECT 1 FROM summary_sources ss JOIN turns t ON t.conversation_id = ?"
            f" AND t.id = ss.turn_id WHERE ss.summary_pk = ? AND t.role IN ({marks}) LIMIT 1",
            (envelope.conversation_id, version.pk, *preserve_roles),
        ).fetchone():
            return None, None, True  # a source now has a preserved role
    state = stored_state(conn, cache, version)
    if state is None:  # a damaged source index: rebase from the ledger
        return None, None, True
    return version, state, False


def _sealed_current(
    conn: sqlite3.Connection,
    pointed: tuple[Version, str, str | None] | None,
    policy_version: str,
) -> bool:
    """Whether the conversation's summary is current, of this policy, and has sources a
    purge took (sealed, SPEC §15.5)."""
    if pointed is None or pointed[1] != CURRENT:
        return False
    version = pointed[0]
    return version.envelope.policy_version == policy_version and cites_purged(conn, version)


def _empty_plan(plan_id: str, conversation_id: str, revision: int) -> CompactionPlan:
    return CompactionPlan(
        plan_id=plan_id,
        conversation_id=conversation_id,
        source_revision=revision,
        compacted_ids=(),
        preserved_ids=(),
        through_sequence=0,
    )


def plan_view(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    pointed: tuple[Version, str, str | None] | None,
    conversation_id: str,
    keep_tail: int,
    policy_version: str,
    preserve_roles: tuple[str, ...],
    plan_id: str,
    *,
    relayout: bool = False,
) -> Planned:
    """Plan on the current ledger, reading only what the current summary does not cover
    when the plan can extend it. `relayout`: the current summary's layout must be made
    anew (SPEC §17.3) even when no new turn extends it, by a rebase unless it is sealed."""
    base, state, rebase_due = _base(conn, cache, pointed, policy_version, keep_tail, preserve_roles)
    row = ledger.conversation_row(conn, conversation_id)
    revision = 0 if row is None else int(row[0])
    if base is not None:
        # Text that is not UTF-8 reads as `NotUtf8`: a damaged turn is named, as by load().
        rows = lenient_rows(
            conn,
            f"SELECT {', '.join('t.' + c.strip() for c in TURN_COLUMNS.split(','))}"
            " FROM summary_kept k JOIN turns t ON t.pk = k.turn_pk"
            " WHERE k.summary_pk = ? AND t.state = ?"
            f" UNION ALL SELECT {TURN_COLUMNS} FROM turns"
            " WHERE conversation_id = ? AND state = ? AND sequence > ?",
            (base.pk, TURN_LIVE, conversation_id, TURN_LIVE, base.through_sequence),
        )
        partial = Conversation(conversation_id, revision, [turn_from_row(r) for r in rows])
        raw = ((t.id, t.sequence, t.role, t.meta) for t in partial.turns)
        if unit_splits.split_by_links(conn, conversation_id, base.pk, raw) is None:
            plan = plan_unchecked(partial, keep_tail, plan_id, preserve_roles)
            new_turns = tuple(partial.get(turn_id) for turn_id in plan.compacted_ids)
            if new_turns or not relayout:
                return _extension(conn, base, state, plan, new_turns, revision)  # type: ignore[arg-type]
            if _sealed_current(conn, pointed, policy_version):
                # A rebase would drop what the purged turns said (SPEC §17.5): the layout is
                # made anew (§17.3) by an extension adding no turn.
                return replace(_extension(conn, base, state, plan, (), revision), relaid=True)
            # Nothing to extend it with: a rebase lays the context out anew (SPEC §17.3).
        else:
            # The summary splits a unit (§17.2) in a database written before the store marked
            # such splits (the context falls back for the same reason): an extension would
            # keep the split, so a rebase.
            rebase_due = True
    if _sealed_current(conn, pointed, policy_version):
        # A rebase would supersede the only record of the purged turns with a summary of
        # the live ones: what they said would leave the context for good. The sealed
        # summary stays; compaction extends it again once the plan covers its live sources.
        return Planned(_empty_plan(plan_id, conversation_id, revision), None, (), False)
    conversation = ledger.load(conn, conversation_id)
    plan = plan_unchecked(conversation, keep_tail, plan_id, preserve_roles)
    stale = pointed is not None and pointed[1] == STALE
    # Or no pointer at all (a damaged record pointed at is rebased instead):
    if stale or (pointed is None and summaries.pointed_pk(conn, conversation_id) is None):
        head = None if pointed is None else pointed[0]
        rebuilt = _rebuild(conn, cache, head, conversation, plan, policy_version, revision)
        if rebuilt is not None:
            return rebuilt
    new_turns = tuple(conversation.get(turn_id) for turn_id in plan.compacted_ids)
    lost = stale and pointed is not None and cites_purged(conn, pointed[0])
    return Planned(plan, None, new_turns, rebase_due, sealed_lost=lost)  # type: ignore[arg-type]


def cites_purged(conn: sqlite3.Connection, version: Version) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM summary_sources ss JOIN turns t ON t.conversation_id = ?"
            " AND t.id = ss.turn_id WHERE ss.summary_pk = ? AND t.state = ? LIMIT 1",
            (version.envelope.conversation_id, version.pk, TURN_PURGED),
        ).fetchone()
        is not None
    )


def _rebuild(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    stale: Version | None,
    conversation: Conversation,
    plan: CompactionPlan,
    policy_version: str,
    revision: int,
) -> Planned | None:
    """SPEC §17.5: the plan extending the newest checkpoint (an ancestor of the stale
    summary) whose sources are all unchanged — checked on the live ledger, with its sealed
    digests, as the commit will — and within the fresh plan; None when there is none (a
    rebase). Its text never saw an edited turn's old content: every version it was built
    on covers a subset of its own sources, which are unchanged.

    `stale` None: the pointer is unset (an erasure of a source took the current summary,
    SPEC §15.5, and kept the checkpoints not citing it, §17.5): every version left is a
    candidate, newest first."""
    cid = conversation.id
    records = summaries.accepted_records(conn, cid)
    compacted = set(plan.compacted_ids)
    found: dict[int, tuple[Version, SourceDigests, tuple[Turn, ...]]] = {}
    ordered = (
        sorted(records, key=lambda record: record.pk, reverse=True)
        if stale is None
        else summaries.rebuild_order(conn, cid, records)  # its lineage, and the sealed base
    )
    if stale is not None and cites_purged(conn, stale):
        # A sealed summary whose edited sources were edited back is the newest version whose
        # sources are all unchanged: extended, what the purged turns said stays (SPEC §17.5).
        ordered = [*(r for r in records if r.pk == stale.pk), *ordered]

    def candidates() -> Iterator[tuple[int, bool]]:
        for record in ordered:
            version = summaries.version_at(conn, cache, record.pk)
            usable = version is not None and _usable(
                conn, cache, version, conversation, compacted, policy_version, found
            )
            yield record.pk, usable

    chosen = checkpoints.rebuild_from(candidates())
    if chosen is None:
        return None
    base, state, new_turns = found[chosen]
    partial = CompactionPlan(
        plan_id=plan.plan_id,
        conversation_id=cid,
        source_revision=revision,
        compacted_ids=tuple(turn.id for turn in new_turns),
        preserved_ids=plan.preserved_ids,
        through_sequence=plan.through_sequence,
    )
    extension = _extension(conn, base, state, partial, new_turns, revision)
    return Planned(
        extension.plan,
        base,
        new_turns,
        False,
        extension.base_digests,
        extension.extended,
        rebuild=True,
    )


def _usable(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    version: Version,
    conversation: Conversation,
    compacted: set[str],
    policy_version: str,
    found: dict[int, tuple[Version, SourceDigests, tuple[Turn, ...]]],
) -> bool:
    """Whether a checkpoint can be extended by the fresh plan (noting what for in `found`)."""
    envelope = version.envelope
    if envelope.policy_version != policy_version:
        return False
    sealed = retention.sealed_digests(conn, conversation.id, version.pk)
    if not check_summary(envelope, conversation, policy_version, sealed=sealed).current:
        return False
    # Coverage never shrinks: its live sources are all compacted by the fresh plan.
    if any(turn_id not in compacted for turn_id in envelope.source_ids if turn_id not in sealed):
        return False
    state = stored_state(conn, cache, version)
    if state is None:
        return False
    sources = set(envelope.source_ids)
    new_turns = tuple(
        conversation.get(turn_id) for turn_id in sorted_new(conversation, compacted, sources)
    )
    if not new_turns:  # nothing to extend it with
        return False
    found[version.pk] = (version, state, new_turns)  # type: ignore[assignment]
    return True


def sorted_new(conversation: Conversation, compacted: set[str], sources: set[str]) -> list[str]:
    """The compacted IDs not among `sources`, in sequence order."""
    return [
        turn.id for turn in conversation.turns if turn.id in compacted and turn.id not in sources
    ]


def _extension(
    conn: sqlite3.Connection,
    base: Version,
    state: SourceDigests | None,
    plan: CompactionPlan,
    new_turns: tuple[Turn, ...],
    revision: int,
) -> Planned:
    """The plan extending `base` with `new_turns` (planned on its kept and later turns)."""
    through = max(plan.through_sequence, base.through_sequence)
    compacted: tuple[str, ...] | SourceIds
    if all(turn.sequence > base.through_sequence for turn in new_turns):
        compacted = extend_ids(base.envelope.source_ids, plan.compacted_ids)
        digests: SourceDigests | bytes | None = state
        extended = True
    else:
        # A turn kept raw below the summary's slot became compactable (a confirmation
        # resolved, a call answered): the summary is extended over it all the same (SPEC
        # §17.5), never rebased away (a sealed one would lose its purged turns). The
        # sources stay in sequence order, sealed ones first, so the extension is
        # fingerprinted from the base's digests in that order, handed as bytes.
        compacted, digests = _merged_sources(conn, base, new_turns)
        extended = False
    full = CompactionPlan(
        plan_id=plan.plan_id,
        conversation_id=plan.conversation_id,
        source_revision=revision,
        compacted_ids=compacted,
        preserved_ids=plan.preserved_ids,
        through_sequence=through,
    )
    return Planned(full, base, new_turns, False, digests, extended)


def _merged_sources(
    conn: sqlite3.Connection, base: Version, new_turns: tuple[Turn, ...]
) -> tuple[tuple[str, ...], bytes]:
    """The base's sources with `new_turns` merged in: its sealed (purged) sources first as
    they stand, then the live ones and the new ones in sequence order; and the base's
    stored digests (source order). O(covered), read only when a turn below the slot joins."""
    rows = conn.execute(
        "SELECT ss.turn_id, ss.turn_digest, t.state, t.sequence FROM summary_sources ss"
        " LEFT JOIN turns t ON t.conversation_id = ? AND t.id = ss.turn_id"
        " WHERE ss.summary_pk = ? ORDER BY ss.position",
        (base.envelope.conversation_id, base.pk),
    ).fetchall()
    sealed = [row[0] for row in rows if row[2] != TURN_LIVE]
    live = [(int(row[3]), row[0]) for row in rows if row[2] == TURN_LIVE]
    live.extend((turn.sequence, turn.id) for turn in new_turns)
    live.sort()
    merged = tuple(sealed) + tuple(turn_id for _, turn_id in live)
    return merged, b"".join(bytes(row[1]) for row in rows)
