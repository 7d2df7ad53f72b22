"""What the HTML inspector shows, gathered from a database (rendering is in `html.py`).

A conversation becomes one state per turn (purged, retracted, compacted, protected,
preserved, raw), aggregated into runs ("marks") so that a 100k-turn conversation is a few
hundred marks, never one DOM node per turn. Purged and retracted rows are not part of
`store.load()`; they are read from the same file through a read-only connection.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerfold._citations import cited_sequences
from ledgerfold._cli.html_attention import FALLING_BACK, damaged_why
from ledgerfold._cli.html_attention import attention as needs_attention
from ledgerfold._cli.html_reads import (
    DamagedTurn,
    context_or_damage,
    load_marking_damage,
    preserve_roles,
    read_only,
    stored_versions,
    summaries_marking_damage,
    unreadable_plan,
)
from ledgerfold._cli.main import key_text
from ledgerfold._cli.orphans import orphan_damage, orphan_keys
from ledgerfold._context import HistoryBoundary
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Conversation
from ledgerfold._summary import SummaryEnvelope
from ledgerfold._toolcalls import open_call_turns
from ledgerfold.adapters._chat import to_chat_messages
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._schema import ACCEPTED, CURRENT, FAILED, STALE, TURN_PURGED, TURN_RETRACTED
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.store._stats import StoreStats, conversation_states, read_stats

__all__ = [
    "MAX_MARKS",
    "STATES",
    "TURN_MARKS",
    "ConversationRow",
    "ConversationView",
    "DatabaseView",
    "Mark",
    "VersionRow",
    "aggregate",
    "gather_conversation",
    "gather_database",
]

#: Turn states, in legend order; a live row changed outside ledgerfold is `DAMAGED_TURN`.
DAMAGED_TURN = "damaged"
STATES = ("raw", "protected", "preserved", "compacted", "purged", "retracted", DAMAGED_TURN)
#: Above this many runs, short runs are merged into "mixed" marks.
MAX_MARKS = 600
#: Up to this many turns, every turn is its own mark (named in its tooltip).
TURN_MARKS = 300
#: Context messages shown at the start and at the end; the rest is one "omitted" line.
CONTEXT_HEAD = 40
CONTEXT_TAIL = 40
#: Characters of one context message shown (the rest is counted, not shown).
MESSAGE_CHARS = 3000
#: Conversations listed (and inspector pages written) by `report`, and stale/failed
#: versions listed.
REPORT_ROWS = 2000


@dataclass(frozen=True, slots=True)
class Mark:
    """`count` turns from `first` to `last` (sequences) at axis position `start`; `state` is
    one of STATES or ``mixed`` (then `mix` counts each state)."""

    state: str
    detail: str
    first: int
    last: int
    start: int
    count: int
    mix: tuple[tuple[str, int], ...] = ()
    label: str = ""  # the turn's role and ID, for a one-turn mark of a small conversation


@dataclass(frozen=True, slots=True)
class VersionRow:
    id: str | None
    plan_id: str
    status: str
    reason: str | None
    created_at: str
    sources: int
    fingerprint: str | None
    parent_id: str | None
    policy_version: str | None
    damaged: bool = False  # the store cannot read the record (changed outside ledgerfold)


@dataclass(frozen=True, slots=True)
class CitedTurn:
    """A source the summary cites (SPEC §16.3): `anchor` is its element's ID on the page."""

    anchor: str
    turn_id: str
    sequence: int
    role: str
    text: str


@dataclass(frozen=True, slots=True)
class ConversationView:
    conversation_id: str
    revision: int
    total: int  # rows on the axis: live, purged and retracted turns
    counts: dict[str, int]
    marks: tuple[Mark, ...]
    summary: SummaryEnvelope | None
    band: tuple[int, int, int, int] | None  # axis start, axis end (exclusive), first, last seq
    boundary: HistoryBoundary | None
    boundary_at: int | None  # axis position just after the last purged sequence
    versions: tuple[VersionRow, ...]
    policy_version: str
    preserve_roles: tuple[str, ...] | None  # None: its plan's roles cannot be read back
    fallback: str | None
    messages: tuple[dict[str, Any], ...]  # head of the context, then tail
    omitted: int  # context messages between head and tail not shown
    message_count: int
    # Each line of the current summary with the sources it cites, and those sources.
    summary_lines: tuple[tuple[str, tuple[CitedTurn, ...]], ...] = ()
    cited: tuple[CitedTurn, ...] = ()
    dropped: int = 0  # raw turns the messages leave out (`context.dropped`, SPEC §17.2)
    unsendable: str | None = None  # why the context gives no chat messages (a damaged row)
    raises: str = "InvalidInput"  # what the call that gives them raises, then
    damaged: tuple[DamagedTurn, ...] = ()  # live turns changed outside ledgerfold
    summary_damage: str | None = None  # why a summary record cannot be read back


@dataclass(frozen=True, slots=True)
class ConversationRow:
    conversation_id: str
    revision: int
    counts: dict[str, int]  # live, purged, retracted, covered (current summary sources)
    statuses: dict[str, int]
    current: str | None
    boundary: int | None
    why: tuple[str, ...] = ()  # why it needs attention; empty when it does not
    named: bool = True  # False: its key is not UTF-8 text (bad bytes shown replaced): no page


@dataclass(frozen=True, slots=True)
class DatabaseView:
    path: str
    conversations: tuple[ConversationRow, ...]
    total_conversations: int
    problems: tuple[tuple[str, str | None, str, str, str | None, str], ...] = field(default=())
    stats: StoreStats | None = None
    attention_total: int = 0  # conversations that need attention, listed or not
    failed_now: int = 0  # failed records since their conversation's last accepted summary
    orphaned: int = 0  # of them, keys of turns with no `conversations` row (`orphans`)


def gather_conversation(
    store: SQLiteStore, path: Path, conversation_id: str, policy_version: str | None = None
) -> ConversationView:
    """Everything the conversation page shows. The context is assembled for
    `policy_version`, by default the current summary's own (so a summary in use shows), or
    the newest summary's when none is current (so a stale one gives why it went stale, as
    `stats()` does, not `policy-mismatch`)."""
    conversation, damaged = load_marking_damage(store, path, conversation_id)
    current, history, summary_damage = summaries_marking_damage(store, conversation_id)
    current, bad_id, summary_damage = unreadable_plan(path, current, summary_damage)
    boundary = store.history_boundary(conversation_id)
    if history is not None:
        versions = tuple(_version(record, bad_id) for record in history)
    else:  # a record the store cannot read: the records as stored, that one marked
        versions = tuple(VersionRow(*row) for row in stored_versions(path, conversation_id))
    newest = next(
        (v.policy_version for v in reversed(versions) if v.status in (CURRENT, STALE)), None
    )
    default = current.policy_version if current is not None else newest
    policy = policy_version or default or "v1"
    context, unassembled = context_or_damage(
        store, conversation_id, policy, bool(damaged) or summary_damage is not None
    )
    with read_only(path) as conn:
        gone = lenient_rows(
            conn,
            "SELECT sequence, id, state FROM turns WHERE conversation_id = ? AND state != 0",
            (conversation_id,),
        )
        roles = preserve_roles(conn, current.plan_id if current else None, conversation_id)
    roles = () if bad_id is not None else roles  # unknown: no turn is judged preserved by role
    sources = frozenset(current.source_ids) if current is not None else frozenset()
    pinned = open_call_turns(conversation.turns)
    held_groups: set[str] = set()
    for turn in conversation.turns:
        if turn.group is not None and (turn.protected or turn.id in pinned or turn.role in roles):
            held_groups.add(turn.group)
    rows: list[tuple[int, str, str, str]] = []  # sequence, id, state, detail
    roles_of = {}
    for turn in conversation.turns:
        roles_of[turn.id] = turn.role
        if turn.id in sources:
            state, detail = "compacted", f"into summary {current.id}" if current else ""
        elif turn.protected:
            state, detail = "protected", turn.protection_reason or "protected"
        elif turn.role in roles:
            state, detail = "preserved", f"{turn.role} role"
        elif turn.id in pinned:
            state, detail = "preserved", "open tool-call group"
        elif turn.group is not None and turn.group in held_groups:
            state, detail = "preserved", "group pinned"
        else:
            state, detail = "raw", "raw"
        rows.append((turn.sequence, turn.id, state, detail))
    for bad in damaged:  # changed outside ledgerfold: marked, never read
        rows.append((bad.sequence, bad.turn_id, DAMAGED_TURN, f"{bad.column} unreadable"))
    for sequence, turn_id, code in gone:
        turn_id = key_text(turn_id)
        if code == TURN_PURGED:
            rows.append((sequence, turn_id, "purged", "below the history boundary"))
        elif code == TURN_RETRACTED:
            rows.append((sequence, turn_id, "retracted", "retracted"))
    rows.sort()
    band = None
    if current is not None:
        where = {turn_id: index for index, (_, turn_id, _, _) in enumerate(rows)}
        covered = sorted(where[i] for i in current.source_ids if i in where)
        if covered:
            band = (covered[0], covered[-1] + 1, rows[covered[0]][0], rows[covered[-1]][0])
    boundary_at = None
    if boundary is not None:
        boundary_at = sum(1 for row in rows if row[0] <= boundary.through_sequence)
    summary_lines, cited = _cited_lines(current, conversation)
    unsendable, messages = unassembled, []
    try:
        messages = to_chat_messages(context) if context is not None else []
    except InvalidInput as error:  # a row changed outside ledgerfold: the page still shows it
        unsendable = str(error)
    shown = messages
    omitted = 0
    if len(messages) > CONTEXT_HEAD + CONTEXT_TAIL:
        shown = messages[:CONTEXT_HEAD] + messages[-CONTEXT_TAIL:]
        omitted = len(messages) - CONTEXT_HEAD - CONTEXT_TAIL
    return ConversationView(
        conversation_id=conversation_id,
        revision=conversation.revision,
        total=len(rows),
        counts=dict(Counter(row[2] for row in rows)),
        marks=_marks(rows, roles_of),
        summary=current,
        band=band,
        boundary=boundary,
        boundary_at=boundary_at,
        versions=versions,
        policy_version=policy,
        preserve_roles=None if bad_id is not None else tuple(roles),
        fallback=context.fallback if context is not None else None,
        messages=tuple(shown),
        omitted=omitted,
        message_count=len(messages),
        summary_lines=summary_lines,
        cited=cited,
        dropped=context.dropped if context is not None else 0,
        unsendable=unsendable,
        raises="StoreError" if context is None else "InvalidInput",
        damaged=damaged,
        summary_damage=summary_damage,
    )


def _cited_lines(
    summary: SummaryEnvelope | None, conversation: Conversation
) -> tuple[tuple[tuple[str, tuple[CitedTurn, ...]], ...], tuple[CitedTurn, ...]]:
    """Each line of the summary with the live sources it cites (`ledgerfold.citations`'
    rule, line by line), and every cited source once, in sequence order."""
    if summary is None:
        return (), ()
    sources = frozenset(summary.source_ids)
    by_sequence = {turn.sequence: turn for turn in conversation.turns if turn.id in sources}
    cited_all = sorted(
        sequence for sequence in cited_sequences(summary.text) if sequence in by_sequence
    )
    anchors = {
        sequence: CitedTurn(
            f"source-{index}",
            by_sequence[sequence].id,
            sequence,
            by_sequence[sequence].role,
            by_sequence[sequence].body,
        )
        for index, sequence in enumerate(cited_all)
    }
    lines = tuple(
        (line, tuple(anchors[s] for s in sorted(cited_sequences(line)) if s in anchors))
        for line in summary.text.split("\n")
    )
    return lines, tuple(anchors[sequence] for sequence in cited_all)


def _marks(rows: list[tuple[int, str, str, str]], roles: dict[str, str]) -> tuple[Mark, ...]:
    if len(rows) > TURN_MARKS:
        return aggregate([(sequence, state, detail) for sequence, _, state, detail in rows])
    return tuple(
        Mark(state, detail, sequence, sequence, index, 1, label=f"{roles.get(tid, '')} {tid}")
        for index, (sequence, tid, state, detail) in enumerate(rows)
    )


def _version(record: Any, damaged_id: str | None = None) -> VersionRow:
    envelope: SummaryEnvelope | None = record.envelope
    return VersionRow(
        id=envelope.id if envelope else None,
        plan_id=record.plan_id,
        status=record.status,
        reason=record.reason,
        created_at=record.created_at,
        sources=len(envelope.source_ids) if envelope else 0,
        fingerprint=envelope.source_fingerprint if envelope else None,
        parent_id=envelope.parent_id if envelope else None,
        policy_version=envelope.policy_version if envelope else None,
        damaged=envelope is not None and envelope.id == damaged_id,
    )


def aggregate(
    turns: Sequence[tuple[int, str, str]], max_marks: int = MAX_MARKS
) -> tuple[Mark, ...]:
    """Runs of same-state, same-detail turns `(sequence, state, detail)` as marks. When there
    are more than `max_marks` runs, runs shorter than total/max_marks are merged into
    ``mixed`` marks of about that many turns, so the count of marks stays near `max_marks`."""
    runs: list[Mark] = []
    for index, (sequence, state, detail) in enumerate(turns):
        last = runs[-1] if runs else None
        if last is not None and last.state == state and last.detail == detail:
            runs[-1] = Mark(state, detail, last.first, sequence, last.start, last.count + 1)
        else:
            runs.append(Mark(state, detail, sequence, sequence, index, 1))
    if len(runs) <= max_marks:
        return tuple(runs)
    size = -(-len(turns) // max_marks)
    marks: list[Mark] = []
    pending: list[Mark] = []

    def flush() -> None:
        if not pending:
            return
        if len(pending) == 1:
            marks.append(pending[0])
        else:
            mix: Counter[str] = Counter()
            for run in pending:
                mix[run.state] += run.count
            marks.append(
                Mark(
                    "mixed",
                    "",
                    pending[0].first,
                    pending[-1].last,
                    pending[0].start,
                    sum(mix.values()),
                    tuple(sorted(mix.items(), key=lambda item: (-item[1], item[0]))),
                )
            )
        pending.clear()

    for run in runs:
        if run.count >= size:
            flush()
            marks.append(run)
            continue
        pending.append(run)
        if sum(p.count for p in pending) >= size:
            flush()
    flush()
    return tuple(marks)


def _text(value: object) -> str | None:
    """A stored text as read leniently: text that is not UTF-8 (a damaged record) is None."""
    return value if isinstance(value, str) else None


def gather_database(
    path: Path, damage: Callable[[sqlite3.Connection, str], str | None] = lambda _c, _i: None
) -> DatabaseView:
    """Every conversation with its counts — those that need attention first (their context
    falls back to a stale or damaged summary or cannot use its current one, summaries
    failed since the last accepted one, purged turns without a current summary or that it
    does not cover; turns whose key has no `conversations` row, as damage, counted among
    the conversations), each with why, then the rest by ID — capped at REPORT_ROWS; and the
    stale and failed versions (newest first); and the store's totals
    (`SQLiteStore.stats()`), shown above — all read in one read transaction, so a writer's
    commit shows in all of them or in none; the fallbacks and purges of the rows are the
    very states the totals count (`conversation_states`). `damage` says why a conversation's
    rows cannot be read back (`main.damaged_turns`), None when they can, read through the
    connection it is given, in that transaction too. The store keeps no log of
    revalidation runs, so the page says nothing of them."""
    with read_only(path) as conn:
        conn.execute("BEGIN")  # one snapshot for every read below
        states = conversation_states(conn, None)
        stats = read_stats(conn, None, states)
        by_id = {state.conversation_id: state for state in states}
        counts: dict[object, Counter[str]] = {}
        names = {0: "live", TURN_PURGED: "purged", TURN_RETRACTED: "retracted"}
        # Read leniently, as every query below: a key that is not UTF-8 text is `NotUtf8`.
        for cid, state, number in lenient_rows(
            conn, "SELECT conversation_id, state, count(*) FROM turns GROUP BY 1, 2"
        ):
            counts.setdefault(cid, Counter())[names.get(state, "other")] += number
        statuses: dict[object, Counter[str]] = {}
        for cid, status, number in lenient_rows(
            conn, "SELECT conversation_id, status, count(*) FROM summaries GROUP BY 1, 2"
        ):
            statuses.setdefault(cid, Counter())[status] = number
        boundaries = dict(
            lenient_rows(
                conn,
                "SELECT conversation_id, max(through_sequence) FROM history_boundaries GROUP BY 1",
            )
        )
        total = conn.execute("SELECT count(*) FROM conversations").fetchone()[0]
        attention: list[tuple[int, ConversationRow]] = []
        rest: list[ConversationRow] = []
        failed_now = 0
        # Failures count after the newest record ever accepted. Read leniently: a record
        # damaged outside ledgerfold (text that is not UTF-8) is listed, not a crash.
        for cid, revision, current, covered, accepted, failed, failure in lenient_rows(
            conn,
            "SELECT c.id, c.revision, s.id, s.source_count, a.pk,"
            " (SELECT count(*) FROM summaries f WHERE f.conversation_id = c.id"
            f"   AND f.status = '{FAILED}' AND f.pk > COALESCE(a.pk, 0)),"
            " (SELECT f.reason FROM summaries f WHERE f.conversation_id = c.id"
            f"   AND f.status = '{FAILED}' AND f.pk > COALESCE(a.pk, 0)"
            "   ORDER BY f.pk DESC LIMIT 1)"
            # The pointer stays on a summary gone stale: only a current one is named.
            " FROM conversations c LEFT JOIN summaries s ON s.pk = c.current_summary"
            f"   AND s.status = '{CURRENT}'"
            " LEFT JOIN (SELECT conversation_id, max(pk) AS pk FROM summaries"
            f"   WHERE status IN {ACCEPTED} GROUP BY 1) a"
            "   ON a.conversation_id = c.id"
            " ORDER BY c.id",
        ):
            state = by_id[cid]
            failed_now += failed
            turn_counts = dict(counts.get(cid, Counter()))
            # Only a current summary the context reads is named and counted as covering (by
            # its stored count: one that is no count, another tool's write, covers none).
            turn_counts["covered"] = covered if state.summarised and type(covered) is int else 0
            rank, why = needs_attention(
                state, failed, _text(failure), accepted is not None, damage(conn, cid)
            )
            row = ConversationRow(
                key_text(cid),
                revision,
                turn_counts,
                dict(statuses.get(cid, Counter())),
                _text(current) if state.summarised else None,
                boundaries.get(cid),
                why,
                named=isinstance(cid, str),
            )
            if why:
                attention.append((rank, row))
            else:
                rest.append(row)
        # Turns whose key has no `conversations` row (another tool changed its key there, or
        # deleted the row): the totals count them (live turns), so they are listed too, as
        # damage that no command can name (no page), with the SQL that selects them.
        orphans = orphan_keys(conn)
        for key in orphans:
            orphan = ConversationRow(
                key_text(key),
                0,
                {**counts.get(key, Counter()), "covered": 0},
                dict(statuses.get(key, Counter())),
                None,
                boundaries.get(key),
                (damaged_why(orphan_damage(key)),),
                named=False,
            )
            attention.append((FALLING_BACK, orphan))
        problems = [
            (
                key_text(row[0]),
                _text(row[1]),
                _text(row[2]) or "?",
                str(row[3]),
                _text(row[4]),
                _text(row[5]) or "?",
            )
            for row in lenient_rows(
                conn,
                "SELECT conversation_id, id, plan_id, status, reason, created_at FROM summaries"
                f" WHERE status IN ('{STALE}', '{FAILED}') ORDER BY pk DESC LIMIT ?",
                (REPORT_ROWS,),
            )
        ]
    # By class (broken now first), then by ID (read in ID order; the sort is stable).
    attention.sort(key=lambda ranked: ranked[0])
    rows = ([row for _, row in attention] + rest)[:REPORT_ROWS]
    return DatabaseView(
        str(path),
        tuple(rows),
        total + len(orphans),
        tuple(problems),
        stats=stats,
        attention_total=len(attention),
        failed_now=failed_now,
        orphaned=len(orphans),
    )
