"""Retention inside one transaction (SPEC §15.5): purge with a sealed summary, erasing the
versions that cite purged turns. Purge **seals** the current summary: it is checked current
inside the purge transaction, and afterwards its purged sources are checked by the digests
its source index kept (`sealed_digests`), which can no longer change. Every other version
citing a purged turn is erased (text and index rows) and counted with the pruned ones.
Erasing a turn and deleting a conversation are `_erasure`'s."""

from __future__ import annotations

import sqlite3
from typing import Any

from ledgerfold._context import HistoryBoundary
from ledgerfold._errors import InvalidInput
from ledgerfold._model import ROLES
from ledgerfold._summary import check_summary
from ledgerfold._toolcalls import open_call_turns, unit_roots
from ledgerfold.store import _call_pairs as call_pairs
from ledgerfold.store import _digests as digests
from ledgerfold.store import _ledger as ledger
from ledgerfold.store import _search_index as search_index
from ledgerfold.store import _sources as sources
from ledgerfold.store import _summaries as summaries
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._database import now
from ledgerfold.store._recall_answers import (
    calls_and_recall_groups,
    group_results_without_id,
    live_turns,
)
from ledgerfold.store._recall_results import blank_recall_results
from ledgerfold.store._rows import unit_turn
from ledgerfold.store._schema import CURRENT, STALE, TURN_LIVE, TURN_PURGED, TURN_RETRACTED

__all__ = [
    "PurgePreview",
    "citing",
    "preview",
    "purge",
    "retain",
    "retention_cutoff",
    "sealed_digests",
]

#: The turns a purge through `sequence` takes: live and retracted ones, protected ones only
#: when forced. Parameters: (conversation_id, sequence, force).
_SELECTED = (
    "SELECT {column} FROM turns WHERE conversation_id = ? AND sequence <= ?"
    " AND state IN ({states}) AND (protected = 0 OR ?){roles}"
)
_BOTH = f"{TURN_LIVE}, {TURN_RETRACTED}"


def _selected(column: str, keep_roles: tuple[str, ...] = (), kept_of: int | None = None) -> str:
    """`_SELECTED` for a column, leaving out turns of `keep_roles` (retention keeps the
    policy's preserved roles, such as the system prompt) and, with `kept_of`, the live turns
    that version keeps raw below its slot (it does not cover them). Roles are checked names
    and `kept_of` a row number, never user text, so they are written into the SQL."""
    assert all(role in ROLES for role in keep_roles)
    roles = f" AND role NOT IN ({', '.join(repr(r) for r in keep_roles)})" if keep_roles else ""
    if kept_of is not None:
        roles += f" AND pk NOT IN ({_kept(kept_of)})"
    return _SELECTED.format(column=column, states=_BOTH, roles=roles)


def _kept(summary_pk: int) -> str:
    return f"SELECT turn_pk FROM summary_kept WHERE summary_pk = {int(summary_pk)}"


def sealed_digests(
    conn: sqlite3.Connection, conversation_id: str, summary_pk: int
) -> dict[str, bytes]:
    """The stored digests of a version's purged sources, by turn ID (empty when none)."""
    return {
        row[0]: bytes(row[1])
        for row in conn.execute(
            "SELECT ss.turn_id, ss.turn_digest FROM summary_sources ss JOIN turns t"
            " ON t.conversation_id = ? AND t.id = ss.turn_id"
            " WHERE ss.summary_pk = ? AND t.state = ?",
            (conversation_id, summary_pk, TURN_PURGED),
        )
    }


def _require(conn: sqlite3.Connection, conversation_id: str) -> None:
    if ledger.conversation_row(conn, conversation_id) is None:
        raise InvalidInput(
            f"conversation_id: unknown conversation {conversation_id!r}",
            field="conversation_id",
            problem="unknown-value",
        )


def _seal(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    conversation_id: str,
    *,
    mark: bool = True,
) -> tuple[int | None, str | None]:
    """The pk and ID of the current summary once checked current on the whole ledger (with
    the sealed sources of earlier purges), or None. A current one that fails the check goes
    stale here with the check's reason (unless `mark` is False: a preview only reads)."""
    pointed = summaries.pointed(conn, cache, conversation_id)
    if pointed is None or pointed[1] != CURRENT:
        return None, None
    version, envelope = pointed[0], pointed[0].envelope
    sealed = sealed_digests(conn, conversation_id, version.pk)
    conversation = ledger.checkable(conn, conversation_id)  # no body read: damage stops none
    check = check_summary(envelope, conversation, envelope.policy_version, sealed=sealed)
    if check.reason == "source-modified" and (
        mended := digests.mended_cited(conn, conversation_id, version.pk)
    ):  # a cited turn's stored digest alone was changed: checked by its bytes', repaired
        conversation = ledger.checkable(conn, conversation_id, mended)
        check = check_summary(envelope, conversation, envelope.policy_version, sealed=sealed)
        if check.current and mark:
            digests.repair(conn, [(conversation_id, turn_id) for turn_id in mended])
    if check.current:
        return version.pk, envelope.id
    if mark:
        conn.execute(
            f"UPDATE summaries SET status = '{STALE}', reason = ? WHERE pk = ?",
            (check.reason, version.pk),
        )
    return None, None


def citing(selected: str, sealed_pk: int | None) -> str:
    """Versions (other than the sealed one) whose index or rejected sources name a selected
    turn. Parameters: conversation_id, then the selection's, twice, then sealed_pk."""
    return (
        "SELECT pk FROM summaries WHERE conversation_id = ? AND (pk IN (SELECT summary_pk"
        f" FROM summary_sources WHERE turn_id IN ({selected})) OR (rejected_source_ids IS NOT"
        " NULL AND EXISTS (SELECT 1 FROM json_each(rejected_source_ids)"
        f" WHERE value IN ({selected})))) AND pk IS NOT ?"
    )


def purge(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    conversation_id: str,
    sequence: int,
    reason: str,
    force: bool,
    keep_roles: tuple[str, ...] = (),
) -> tuple[HistoryBoundary, int, int, int]:
    """Retention through `sequence`: seal the current summary, erase every other version
    citing a purged turn, blank the purged bodies and their earlier versions, record the
    boundary; returns it, the purged turn count, the new revision and the versions erased.
    A `sequence` beyond the last one written is recorded as the last one. Without `force`,
    `keep_roles` turns stay raw and it stops before a unit it would split (`_unsplit`)."""
    _require(conn, conversation_id)
    last = conn.execute(
        "SELECT last_sequence FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()[0]
    sealed_pk, _ = _seal(conn, cache, conversation_id)
    sequence = min(sequence, int(last))
    if force:
        keep_roles = ()
    else:
        sequence = _unsplit(conn, conversation_id, sequence, sealed_pk, keep_roles)
    return _purge_sealed(
        conn, cache, conversation_id, sequence, reason, force, sealed_pk, keep_roles
    )


def _unsplit(
    conn: sqlite3.Connection,
    conversation_id: str,
    sequence: int,
    sealed_pk: int | None,
    keep_roles: tuple[str, ...] = (),
    covered_only: bool = False,
) -> int:
    """The largest purge sequence <= `sequence` that takes no unanswered tool call and splits
    no compaction unit (SPEC §17.2): a purge must not take a call and leave a result of it
    live, raw (providers refuse a tool message without its call) or covered by the sealed
    summary (the purged call's meta goes, so a later erasure of the call could no longer
    find the result quoting what it fetched, SPEC §17.7), nor take a call whose result is
    still to come. A kept turn of `keep_roles` that the sealed summary covers stops it too,
    so every sealed source still precedes the live ones. `covered_only`: the purge takes
    only the sealed summary's sources (retention): a unit it keeps raw stays whole."""
    covered = {
        row[0]
        for row in conn.execute(
            "SELECT turn_id FROM summary_sources WHERE summary_pk IS ?", (sealed_pk,)
        )
    }
    # A row damaged in storage stops nothing (`unit_turn`); one whose ID or sequence
    # cannot be read links to no unit.
    read = lenient_rows(
        conn,
        "SELECT id, sequence, role, grp, meta, protected FROM turns"
        " WHERE conversation_id = ? AND state = ? ORDER BY sequence",
        (conversation_id, TURN_LIVE),
    )
    units = [(row, unit_turn(*row[:5])) for row in read]
    rows = [row for row, turn in units if turn is not None]
    turns = [turn for _, turn in units if turn is not None]
    open_calls = open_call_turns(turns)
    members: dict[int, list[int]] = {}
    for index, root in enumerate(unit_roots(turns)):
        members.setdefault(root, []).append(index)
    kept_covered = [int(row[1]) for row in rows if row[2] in keep_roles and row[0] in covered]
    while True:
        stop = min((at for at in kept_covered if at <= sequence), default=None)
        for unit in members.values():
            taken = [
                at
                for at in unit
                if rows[at][1] <= sequence
                and not rows[at][5]
                and rows[at][2] not in keep_roles
                and (rows[at][0] in covered or not covered_only)
            ]
            if not taken:
                continue
            if len(taken) < len(unit) or any(rows[at][0] in open_calls for at in taken):
                first = int(rows[taken[0]][1])
                stop = first if stop is None else min(stop, first)
        if stop is None:
            return sequence
        sequence = stop - 1


def retain(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    conversation_id: str,
    sequence: int,
    reason: str,
    keep_roles: tuple[str, ...],
) -> tuple[HistoryBoundary, int, int, int] | None:
    """The retention policy's purge through `sequence`: only turns the current summary
    covers go, once it is sealed (none when it cannot be). A turn it keeps raw below its
    slot (a preserved role, an open or protected group) stays; a covered turn of
    `keep_roles` stops the purge just before it, so every sealed source still precedes the
    live ones. Returns as `purge`, or None when nothing goes."""
    sealed_pk, _ = _seal(conn, cache, conversation_id)
    if sealed_pk is None:
        return None
    if keep_roles:
        marks = ",".join("?" * len(keep_roles))
        first = conn.execute(
            "SELECT MIN(sequence) FROM turns WHERE conversation_id = ? AND state = ?"
            f" AND sequence <= ? AND role IN ({marks}) AND pk NOT IN ({_kept(sealed_pk)})",
            (conversation_id, TURN_LIVE, sequence, *keep_roles),
        ).fetchone()[0]
        if first is not None:
            sequence = int(first) - 1
    sequence = _unsplit(conn, conversation_id, sequence, sealed_pk, keep_roles, True)
    selected = _selected("pk", keep_roles, sealed_pk)
    if not conn.execute(f"{selected} LIMIT 1", (conversation_id, sequence, 0)).fetchone():
        return None
    return _purge_sealed(
        conn, cache, conversation_id, sequence, reason, False, sealed_pk, keep_roles, sealed_pk
    )


def _purge_sealed(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    conversation_id: str,
    sequence: int,
    reason: str,
    force: bool,
    sealed_pk: int | None,
    keep_roles: tuple[str, ...] = (),
    kept_of: int | None = None,
) -> tuple[HistoryBoundary, int, int, int]:
    params = (conversation_id, sequence, int(force))
    selected = _selected("id", keep_roles, kept_of)
    if conn.execute(f"{selected} LIMIT 1", params).fetchone() is None:
        # Nothing goes: no boundary, same revision (SPEC §8: None unless turns were purged);
        # it returns the boundary the conversation has, else the one asked (unrecorded).
        row = ledger.conversation_row(conn, conversation_id)
        found = ledger.boundary(conn, conversation_id) or HistoryBoundary(sequence, reason, now())
        return found, 0, 0 if row is None else int(row[0]), 0
    base = _sealed_base(conn, cache, conversation_id, selected, params, sealed_pk)
    doomed = [
        row[0]
        for row in conn.execute(
            citing(selected, sealed_pk), (conversation_id, *params, *params, sealed_pk)
        )
        if row[0] != base
    ]
    if doomed:
        summaries.delete_records(conn, conversation_id, doomed)
    # The versions between the base and the sealed summary went: one source run again, so
    # the base stays its ancestor (`_checkpoints.lineage`) when the sealed one's run differs.
    if base is not None and (run := summaries.run_of(conn, sealed_pk)) is not None:
        sources.adopt(conn, base, run)
    pks = _selected("pk", keep_roles, kept_of)
    # SPEC §17.7: the recall results quoting a purged turn lose the quote (before the
    # purge changes the states the selection reads); those purged with it are blanked below.
    blank_recall_results(conn, conversation_id, selected, params, pks, params)
    conn.execute(f"DELETE FROM turn_history WHERE turn_pk IN ({pks})", params)
    search_index.unindex(conn, f"pk IN ({pks})", params)
    purged_calls, recall_groups = calls_and_recall_groups(conn, pks, params)
    purged = conn.execute(
        f"UPDATE turns SET state = ?, body = '', meta = NULL WHERE pk IN ({pks})",
        (TURN_PURGED, *params),
    ).rowcount
    revision = ledger.bump_revision(conn, conversation_id)
    boundary = HistoryBoundary(sequence, reason, now())
    conn.execute(
        "INSERT INTO history_boundaries (conversation_id, through_sequence, reason,"
        " purged_at) VALUES (?, ?, ?, ?)",
        (conversation_id, sequence, reason, boundary.purged_at),
    )
    # SPEC §17.2: a live result whose call went answers the first later call of its ID, or
    # none (one without a call ID: its group's); the index follows, both ways (§16.5).
    early = call_pairs.early_results(conn, conversation_id, purged_calls)
    search_index.redecide(
        conn,
        conversation_id,
        [
            *live_turns(conn, conversation_id, early),
            *group_results_without_id(conn, conversation_id, recall_groups),
        ],
    )
    search_index.scrub(conn)
    return boundary, purged, revision, len(doomed)


def _sealed_base(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    conversation_id: str,
    selected: str,
    params: tuple[Any, ...],
    sealed_pk: int | None,
) -> int | None:
    """The checkpoint a purge keeps besides the sealed summary (SPEC §17.5): the newest of
    its ancestors (with none to seal, of `summaries.rebuild_order`: a stale one's) whose
    sources are all purged once this purge is done and that is current on the ledger now
    (their digests are then final); None when the sealed summary is itself wholly purged,
    or there is none. An edit of a live source of the sealed summary, or one made before
    the purge, is later rebuilt from it instead of losing the purged turns' summary."""
    records = summaries.accepted_records(conn, conversation_id)
    going = {row[0] for row in conn.execute(selected, params)}

    def wholly_purged(pk: int) -> bool:
        for turn_id, state in conn.execute(
            "SELECT ss.turn_id, t.state FROM summary_sources ss LEFT JOIN turns t"
            " ON t.conversation_id = ? AND t.id = ss.turn_id WHERE ss.summary_pk = ?",
            (conversation_id, pk),
        ):
            if state != TURN_PURGED and turn_id not in going:
                return False
        return True

    if sealed_pk is not None and wholly_purged(sealed_pk):
        return None
    conversation = None
    for record in summaries.rebuild_order(conn, conversation_id, records):
        if not wholly_purged(record.pk):
            continue
        if (version := summaries.version_at(conn, cache, record.pk)) is None:
            continue
        if conversation is None:
            conversation = ledger.checkable(conn, conversation_id)
        envelope = version.envelope
        sealed = sealed_digests(conn, conversation_id, record.pk)
        if check_summary(envelope, conversation, envelope.policy_version, sealed=sealed).current:
            return record.pk
    return None


class PurgePreview(dict[str, Any]):
    """What a purge would do, as JSON-ready fields (nothing is written)."""


def preview(
    conn: sqlite3.Connection,
    cache: summaries.VersionCache,
    conversation_id: str,
    sequence: int,
    force: bool,
    keep_roles: tuple[str, ...] = (),
) -> PurgePreview:
    """`purge_through(..., dry_run=True)`: the turns that would go (and protected ones that
    would stay), the summary that would be sealed and how many versions would be erased.
    Runs the purge's own checks and writes nothing (a read transaction will do)."""
    _require(conn, conversation_id)
    row = conn.execute(
        "SELECT last_sequence FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    sealed_pk, sealed_id = _seal(conn, cache, conversation_id, mark=False)
    sequence = min(sequence, int(row[0]))
    if force:
        keep_roles = ()
    else:
        sequence = _unsplit(conn, conversation_id, sequence, sealed_pk, keep_roles)
    params = (conversation_id, sequence, int(force))
    selected = _selected("id", keep_roles)
    turns = conn.execute(
        f"SELECT COUNT(*), MIN(sequence), MAX(sequence) FROM turns WHERE id IN ({selected})"
        " AND conversation_id = ?",
        (*params, conversation_id),
    ).fetchone()
    kept_protected = conn.execute(
        "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND sequence <= ?"
        " AND state IN (?, ?) AND protected = 1 AND NOT ?",
        (conversation_id, sequence, TURN_LIVE, TURN_RETRACTED, int(force)),
    ).fetchone()[0]
    marks = ",".join("?" * len(keep_roles))
    roles_kept = (
        conn.execute(
            "SELECT COUNT(*) FROM turns WHERE conversation_id = ? AND sequence <= ?"
            f" AND state IN (?, ?) AND protected = 0 AND role IN ({marks})",
            (conversation_id, sequence, TURN_LIVE, TURN_RETRACTED, *keep_roles),
        ).fetchone()[0]
        if keep_roles
        else 0
    )
    base = _sealed_base(conn, cache, conversation_id, selected, params, sealed_pk)
    erased = conn.execute(
        f"SELECT COUNT(*) FROM ({citing(selected, sealed_pk)}) WHERE pk IS NOT ?",
        (conversation_id, *params, *params, sealed_pk, base),
    ).fetchone()[0]
    # Live turns that go without being a source of the sealed summary (or, with none, of the
    # base kept): what they said leaves the agent's context for good.
    unsummarised = conn.execute(
        f"SELECT COUNT(*) FROM turns WHERE id IN ({selected}) AND conversation_id = ?"
        " AND state = ? AND id NOT IN (SELECT turn_id FROM summary_sources"
        " WHERE summary_pk IS ?)",
        (*params, conversation_id, TURN_LIVE, base if sealed_pk is None else sealed_pk),
    ).fetchone()[0]
    return PurgePreview(
        conversation_id=conversation_id,
        through_sequence=sequence,
        last_sequence=int(row[0]),
        turns=int(turns[0]),
        first_sequence=turns[1],
        last_purged_sequence=turns[2],
        protected_kept=int(kept_protected),
        roles_kept=int(roles_kept),
        sealed_summary=sealed_id,
        versions_erased=int(erased),
        unsummarised=int(unsummarised),
    )


def retention_cutoff(
    conn: sqlite3.Connection,
    conversation_id: str,
    retain_turns: int | None,
    written_before: str | None,
    keep_roles: tuple[str, ...] = (),
) -> int | None:
    """The sequence a retention purge would go through, or None when nothing is due: turns
    beyond the newest `retain_turns` live ones, or written before `written_before`, but
    never past the current summary's last source, so nothing it does not cover is lost.
    Turns of `keep_roles` (the policy's preserved roles) and protected ones are kept."""
    pointed = conn.execute(
        "SELECT s.through_sequence FROM conversations c JOIN summaries s"
        f" ON s.pk = c.current_summary WHERE c.id = ? AND s.status = '{CURRENT}'",
        (conversation_id,),
    ).fetchone()
    if pointed is None:
        return None
    candidates: list[int] = []
    if retain_turns is not None:
        row = conn.execute(
            "SELECT sequence FROM turns WHERE conversation_id = ? AND state = ?"
            " ORDER BY sequence DESC LIMIT 1 OFFSET ?",
            (conversation_id, TURN_LIVE, retain_turns),
        ).fetchone()
        if row is not None:
            candidates.append(int(row[0]))
    if written_before is not None:
        row = conn.execute(
            "SELECT MAX(sequence) FROM turns WHERE conversation_id = ? AND state = ?"
            " AND created_at < ?",
            (conversation_id, TURN_LIVE, written_before),
        ).fetchone()
        if row[0] is not None:
            candidates.append(int(row[0]))
    if not candidates:
        return None
    through = min(max(candidates), int(pointed[0]))
    purged = conn.execute(
        f"SELECT 1 FROM ({_selected('pk', keep_roles)}) LIMIT 1", (conversation_id, through, 0)
    ).fetchone()
    return through if purged else None
