"""Compaction units split by tool-call links (SPEC §15.4, §17.2): a summary that covers
part of a unit (a call without its results, or a result without its call) is stale
(`group-split`). The checks and the eager marks run inside the caller's transaction: at an
append or edit (`mark_group_split`), at a commit (`calls_split`), at a context read and a
revalidation of a database written before the rule (`split_unit`, `split_by_links`)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold import _native
from ledgerfold._context import TurnItem
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Turn
from ledgerfold._toolcalls import tool_call_ids, unit_roots
from ledgerfold.store._schema import LIVE_ACCEPTED, STALE, TURN_LIVE

__all__ = [
    "calls_in",
    "calls_split",
    "mark_group_split",
    "mark_repaired_split",
    "results_of",
    "split_by_links",
    "split_unit",
]

#: How many assistant turns back an appended result's caller is looked for (newest first).
_CALLER_SCAN = 2000


def split_unit(
    conn: sqlite3.Connection, conversation_id: str, summary_pk: int, items: Iterable[object]
) -> str | None:
    """The ID of a raw context item whose compaction unit holds a source of the summary
    (SPEC §17.2), or None: the context's own check, for a database written before tool-call
    links made units (appends mark such summaries stale now). Only a raw result whose call
    is not raw, or a raw call whose results are not all raw, is looked up among the sources
    (groups were marked at write time already)."""
    links = (
        (item.id, item.sequence, item.role, item.meta)
        for item in items
        if isinstance(item, TurnItem) and item.meta
    )
    return split_by_links(conn, conversation_id, summary_pk, links)


def split_by_links(
    conn: sqlite3.Connection,
    conversation_id: str,
    summary_pk: int,
    raw: Iterable[tuple[str, int, str, Mapping[str, Any] | None]],
) -> str | None:
    """`split_unit` over `(id, sequence, role, meta)` of the raw turns in sequence order
    (revalidation reads these without any body or summary text). Works on a connection
    returning text as bytes too. The raw turns' calls are first paired among themselves
    (the core's rule: a result answers the nearest call of its ID before it); a call left
    with a result missing, or a result left without its call, is looked up among the
    sources, and the calls of those IDs are paired again over both."""
    mentions: list[_Mention] = []
    for turn_id, sequence, role, meta in raw:
        if not meta:
            continue
        answered = meta.get("tool_call_id")
        if role == "tool" and isinstance(answered, str):
            mentions.append(_Mention(turn_id, sequence, answer=answered))
        elif role == "assistant":
            made = calls_in(meta.get("tool_calls"))
            if made:
                mentions.append(_Mention(turn_id, sequence, calls=made))
    orphaned, unanswered = _unpaired_calls(mentions)
    suspects = orphaned | unanswered
    if not suspects:
        return None
    # The sources' results of these IDs first (a pending call's ID, the usual suspect, has
    # none: one read); their calls only where a result needs its caller found.
    found = [
        _Mention(_text(turn_id), _number(sequence), answer=_text(answered))
        for turn_id, sequence, answered in conn.execute(
            "SELECT t.id, t.sequence, CASE WHEN json_valid(t.meta)"
            " THEN json_extract(t.meta, '$.tool_call_id') END AS answered"
            " FROM summary_sources ss JOIN turns t"
            " ON t.conversation_id = ? AND t.id = ss.turn_id WHERE ss.summary_pk = ?"
            " AND t.state = ? AND t.role = 'tool'"
            " AND answered IN (SELECT value FROM json_each(?))",
            (conversation_id, summary_pk, TURN_LIVE, json.dumps(sorted(suspects))),
        )
    ]
    callers = orphaned | {m.answer for m in found if m.answer is not None}
    if callers:
        found += [
            _Mention(_text(turn_id), _number(sequence), calls=_named_calls(meta) & callers)
            for turn_id, sequence, meta in conn.execute(
                "SELECT t.id, t.sequence, t.meta FROM summary_sources ss JOIN turns t"
                " ON t.conversation_id = ? AND t.id = ss.turn_id WHERE ss.summary_pk = ?"
                " AND t.state = ? AND t.role = 'assistant' AND json_valid(t.meta)"
                " AND EXISTS (SELECT 1 FROM json_each(json_extract(t.meta, '$.tool_calls')) c"
                " WHERE json_valid(json_extract(t.meta, '$.tool_calls'))"
                " AND json_extract(c.value, '$.id') IN (SELECT value FROM json_each(?)))",
                (conversation_id, summary_pk, TURN_LIVE, json.dumps(sorted(callers))),
            )
        ]
    if not found:
        return None
    raw_ids = {mention.turn_id for mention in mentions}
    relevant = [m.only(suspects) for m in mentions] + found
    for unit in _units(relevant):
        if any(m.turn_id in raw_ids for m in unit) and any(m.turn_id not in raw_ids for m in unit):
            return next(m.turn_id for m in unit if m.turn_id in raw_ids)
    return None


def mark_group_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    joined: Sequence[Turn],
    *,
    answers_too: bool = False,
    known_results: set[str] | None = None,
) -> list[str]:
    """A turn that joins a group holding a summary's source, without being a source itself,
    splits the group (SPEC §15.4): every version citing a member goes stale (`group-split`)
    in the same transaction; returns their IDs. A late tool result is the usual case;
    tool-call links count as groups do (SPEC §17.2). With `answers_too` (an edit), a
    joining assistant turn's results are looked up too (a read of the conversation's tool
    turns: appends skip it, since a call's results come after it); `known_results`, when
    the caller has them, are those of the one joining call."""
    joined_ids = json.dumps([turn.id for turn in joined], ensure_ascii=False)
    stale = _mark_call_split(conn, conversation_id, joined, joined_ids, answers_too, known_results)
    groups = sorted({turn.group for turn in joined if turn.group is not None})
    if not groups:
        return stale
    marks = ",".join("?" * len(groups))
    # Versions citing a member of the group, but not the joining turn itself.
    return stale + [
        str(row[0])
        for row in conn.execute(
            f"UPDATE summaries SET status = '{STALE}', reason = 'group-split'"
            f" WHERE conversation_id = ? AND status IN {LIVE_ACCEPTED}"
            " AND pk IN (SELECT ss.summary_pk FROM turns AS t"
            " JOIN summary_sources AS ss ON ss.turn_id = t.id"
            f" WHERE t.conversation_id = ? AND t.grp IN ({marks}) AND t.state = ?)"
            " AND pk NOT IN (SELECT summary_pk FROM summary_sources"
            " WHERE turn_id IN (SELECT value FROM json_each(?))) RETURNING id",
            (conversation_id, conversation_id, *groups, TURN_LIVE, joined_ids),
        ).fetchall()
    ]


def _mark_call_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    joined: Sequence[Turn],
    joined_ids: str,
    answers_too: bool = False,
    known_results: set[str] | None = None,
) -> list[str]:
    """SPEC §17.2: a tool turn answering a call joins the caller's unit whatever its group,
    so versions citing the caller but not the answer go stale (`group-split`). The caller
    is the nearest assistant turn before the result naming its call (the core's pairing),
    searched from the newest assistant turn back, so a result arriving after its call costs
    a row or two (a result whose call never was made reads them all)."""
    answers = [
        _Mention(turn.id, turn.sequence, answer=turn.meta["tool_call_id"])
        for turn in joined
        if turn.role == "tool" and turn.meta and "tool_call_id" in turn.meta
    ]
    made = {
        turn.id: _Mention(turn.id, turn.sequence, calls=calls_in(turn.meta.get("tool_calls")))
        for turn in (joined if answers_too else ())
        if turn.role == "assistant" and turn.meta
    }
    made = {turn_id: mention for turn_id, mention in made.items() if mention.calls}
    callers: list[str] = []
    if answers:
        # Bounded, so an app writing results for calls it never records does not pay a read
        # of the ledger per append; a caller further back is caught by the context's check.
        makers = _makers_back(conn, conversation_id, answers, limit=_CALLER_SCAN)
        joined_answers = {mention.turn_id for mention in answers}
        for unit in _units(answers + makers):
            if any(m.turn_id in joined_answers for m in unit):
                callers.extend(m.turn_id for m in unit if m.calls)
    for turn_id, mention in made.items():
        # An edited call (rare): its results are the tool turns paired with it.
        if known_results is None or len(made) != 1:
            known_results = results_of(conn, conversation_id, turn_id, mention.calls)
        callers.extend(sorted(known_results))
    if not callers:
        return []
    return [
        str(row[0])
        for row in conn.execute(
            f"UPDATE summaries SET status = '{STALE}', reason = 'group-split'"
            f" WHERE conversation_id = ? AND status IN {LIVE_ACCEPTED}"
            " AND pk IN (SELECT summary_pk FROM summary_sources"
            " WHERE turn_id IN (SELECT value FROM json_each(?)))"
            " AND pk NOT IN (SELECT summary_pk FROM summary_sources"
            " WHERE turn_id IN (SELECT value FROM json_each(?))) RETURNING id",
            (conversation_id, json.dumps(callers, ensure_ascii=False), joined_ids),
        ).fetchall()
    ]


def calls_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    new_turns: Sequence[Turn],
    sources: Sequence[str],
) -> bool:
    """Whether turns newly covered by a summary leave part of their compaction unit out of
    `sources` through a tool-call link (SPEC §17.2; groups are checked by the caller): the
    call a covered result answers, or a result (at or after the first new turn, so the read
    is O(new turns + tail)) answering a covered call. Calls and results are paired by the
    core's rule (a result answers the nearest call of its ID before it)."""
    answers = [
        _Mention(turn.id, turn.sequence, answer=turn.meta["tool_call_id"])
        for turn in new_turns
        if turn.role == "tool" and turn.meta and "tool_call_id" in turn.meta
    ]
    calls: set[str] = set()
    for turn in new_turns:
        if turn.role == "assistant" and turn.meta:
            calls |= calls_in(turn.meta.get("tool_calls"))
    if not answers and not calls:
        return False
    first = min(turn.sequence for turn in new_turns)
    # The call of each covered result: the calls of its ID from the newest back to the one
    # before it (the core's pairing picks among them).
    mentions = _makers_back(conn, conversation_id, answers) + answers
    if calls:
        mentions += _calls_since(conn, conversation_id, calls, first)
        mentions += _results(conn, conversation_id, calls, since=first)
        mentions += _calls_before(conn, conversation_id, calls, first, mentions)
    mentions = _merged(mentions)
    covered = set(sources)
    new_ids = {turn.id for turn in new_turns}
    for unit in _units(mentions):
        if any(m.turn_id in new_ids for m in unit) and any(m.turn_id not in covered for m in unit):
            return True
    return False


class _Mention:
    """A turn as the pairing reads it: the calls it makes (of the IDs asked about) or the
    call it answers, at its sequence."""

    __slots__ = ("answer", "calls", "sequence", "turn_id")

    def __init__(
        self,
        turn_id: str,
        sequence: float,
        *,
        calls: set[str] | frozenset[str] = frozenset(),
        answer: str | None = None,
    ) -> None:
        self.turn_id = turn_id
        self.sequence = sequence
        self.calls = frozenset(calls)
        self.answer = answer

    def only(self, ids: set[str]) -> _Mention:
        """This mention restricted to calls of `ids`."""
        if self.answer is not None:
            return self
        return _Mention(self.turn_id, self.sequence, calls=self.calls & ids)


def _merged(mentions: Sequence[_Mention]) -> list[_Mention]:
    """One mention per turn (a call read twice, for two sets of IDs, names their union)."""
    by_turn: dict[str, _Mention] = {}
    for m in mentions:
        seen = by_turn.get(m.turn_id)
        if seen is None or seen.answer is not None:
            by_turn[m.turn_id] = m
        else:
            by_turn[m.turn_id] = _Mention(m.turn_id, m.sequence, calls=seen.calls | m.calls)
    return list(by_turn.values())


def _layout(
    mentions: Sequence[_Mention], *, open_calls: bool = False
) -> tuple[list[_Mention], list[int], list[int]]:
    """The mentions with a call or a result, in sequence order, with the core's unit roots
    over their calls and results alone (`unit_roots`) and, with `open_calls`, the positions of
    the calls left without a result (`open_calls`): the one pairing rule, not a second one."""
    ordered = sorted(
        (m for m in mentions if m.calls or m.answer is not None), key=lambda m: m.sequence
    )
    turns = [
        Turn(
            f"m{at}",
            at + 1,
            "tool" if m.answer is not None else "assistant",
            "",
            meta=(
                {"tool_call_id": m.answer}
                if m.answer is not None
                else {"tool_calls": json.dumps([{"id": c} for c in sorted(m.calls)])}
            ),
        )
        for at, m in enumerate(ordered)
    ]
    return ordered, unit_roots(turns), _native.open_calls(turns) if open_calls else []


def _units(mentions: Sequence[_Mention]) -> list[list[_Mention]]:
    """The mentions grouped into the core's units, those of two or more only."""
    ordered, roots, _ = _layout(mentions)
    members: dict[int, list[_Mention]] = {}
    for mention, root in zip(ordered, roots, strict=True):
        members.setdefault(root, []).append(mention)
    return [unit for unit in members.values() if len(unit) > 1]


def _unpaired_calls(mentions: Sequence[_Mention]) -> tuple[set[str], set[str]]:
    """Call IDs of a result with no call of its ID before it among `mentions` (orphaned, or
    stored before its call: an earlier call elsewhere would be its own), and of a call among
    them left without a result (all the IDs such a turn calls: a superset is only
    rechecked)."""
    ordered, _, open_at = _layout(mentions, open_calls=True)
    earliest: dict[str, float] = {}
    for m in ordered:
        for call_id in m.calls:
            earliest.setdefault(call_id, m.sequence)
    orphaned = {
        m.answer
        for m in ordered
        if m.answer is not None and earliest.get(m.answer, math.inf) >= m.sequence
    }
    unanswered: set[str] = set()
    for at in open_at:
        unanswered |= ordered[at].calls
    return orphaned, unanswered


def _makers_back(
    conn: sqlite3.Connection,
    conversation_id: str,
    results: Sequence[_Mention],
    limit: int | None = None,
) -> list[_Mention]:
    """The live calls of the results' IDs, from the newest assistant turn back until each
    result has a call before it (or `limit` assistant turns were read): all a result's
    caller can be among (the core's pairing)."""
    below: dict[str, float] = {}  # call ID -> the lowest sequence still wanting a call before it
    for result in results:
        assert result.answer is not None
        below[result.answer] = min(below.get(result.answer, result.sequence), result.sequence)
    ids = set(below)
    found: list[_Mention] = []
    rows = conn.execute(
        "SELECT id, sequence, meta FROM turns WHERE conversation_id = ? AND state = ?"
        " AND role = 'assistant' AND meta IS NOT NULL ORDER BY sequence DESC"
        + ("" if limit is None else " LIMIT ?"),
        (conversation_id, TURN_LIVE) + (() if limit is None else (limit,)),
    )
    for turn_id, sequence, meta in rows:
        named = _named_calls(meta) & ids
        if not named:
            continue
        found.append(_Mention(str(turn_id), int(sequence), calls=named))
        for call_id in named:
            if call_id in below and sequence < below[call_id]:
                del below[call_id]
        if not below:
            break
    return found


def _calls_since(
    conn: sqlite3.Connection, conversation_id: str, ids: set[str], first: int
) -> list[_Mention]:
    """The live calls of these IDs at or after sequence `first` (O(new turns + tail))."""
    return [
        _Mention(str(turn_id), int(sequence), calls=named)
        for turn_id, sequence, meta in conn.execute(
            "SELECT id, sequence, meta FROM turns WHERE conversation_id = ? AND state = ?"
            " AND role = 'assistant' AND meta IS NOT NULL AND sequence >= ?",
            (conversation_id, TURN_LIVE, first),
        )
        if (named := _named_calls(meta) & ids)
    ]


def _calls_before(
    conn: sqlite3.Connection,
    conversation_id: str,
    ids: set[str],
    first: int,
    mentions: Sequence[_Mention],
) -> list[_Mention]:
    """For each ID, a stand-in for its nearest call before `first`, so a result after
    `first` with no call of its ID between is paired with that one, not a later call. Read
    (a scan back) only for an ID with a result before every call of it from `first` on, which
    pairs with a later call only when no call of its ID was made before `first`."""
    earliest_call: dict[str, float] = {}
    for m in mentions:
        for call_id in m.calls & ids:
            earliest_call[call_id] = min(earliest_call.get(call_id, m.sequence), m.sequence)
    doubtful = {
        m.answer
        for m in mentions
        if m.answer in ids and m.sequence >= first and m.sequence < earliest_call.get(m.answer, -1)
    }
    before = set(ids) - doubtful
    if doubtful:
        targets = [_Mention("", first, answer=call_id) for call_id in doubtful]
        before |= {
            call_id
            for m in _makers_back(conn, conversation_id, targets)
            if m.sequence < first
            for call_id in m.calls
        }
    return [_Mention(f"before:{call_id}", first - 0.5, calls={call_id}) for call_id in before]


def results_of(
    conn: sqlite3.Connection, conversation_id: str, turn_id: str, call_ids: Iterable[str]
) -> set[str]:
    """The IDs of the live tool turns answering the calls a live assistant turn made: those
    the core's rule pairs with it (a result answers the nearest call of its ID before it),
    not every result of a call ID a later call made again. For each ID only the results
    between the calls of that ID next to the turn are read (all of them when the ID is
    used once)."""
    row = conn.execute(
        "SELECT sequence FROM turns WHERE conversation_id = ? AND id = ? AND state = ?",
        (conversation_id, turn_id, TURN_LIVE),
    ).fetchone()
    if row is None:
        return set()
    sequence = int(row[0])
    ids = set(call_ids)
    own = _Mention(turn_id, sequence, calls=ids)
    mentions = [own]
    for call_id in sorted(ids):
        below = _neighbour_call(conn, conversation_id, call_id, sequence, before=True)
        above = _neighbour_call(conn, conversation_id, call_id, sequence, before=False)
        # The calls next to it stand in for every other call of the ID: the results
        # between them are all a result of this turn can be.
        mentions += [_Mention("", at, calls={call_id}) for at in (below, above) if at is not None]
        mentions += [
            m
            for m in _results(
                conn, conversation_id, {call_id}, since=-1 if below is None else below + 1
            )
            if above is None or m.sequence < above
        ]
    for unit in _units(mentions):
        if any(m is own for m in unit):
            return {m.turn_id for m in unit if m.answer is not None}
    return set()


def _neighbour_call(
    conn: sqlite3.Connection, conversation_id: str, call_id: str, sequence: int, *, before: bool
) -> int | None:
    """The sequence of the live call of this ID nearest before (or after) `sequence`: a walk
    of the sequence index from there that stops at the first one."""
    row = conn.execute(
        "SELECT t.sequence FROM turns AS t, json_each(json_extract(t.meta, '$.tool_calls')) AS c"
        " WHERE t.conversation_id = ? AND t.state = ? AND t.role = 'assistant'"
        " AND (instr(t.meta, ?) > 0 OR instr(t.meta, '\\u') > 0)"
        " AND json_valid(json_extract(t.meta, '$.tool_calls'))"
        " AND json_extract(c.value, '$.id') = ?"
        + (
            " AND t.sequence < ? ORDER BY t.sequence DESC"
            if before
            else " AND t.sequence > ? ORDER BY t.sequence"
        )
        + " LIMIT 1",
        (conversation_id, TURN_LIVE, _stored_form(call_id), call_id, sequence),
    ).fetchone()
    return None if row is None else int(row[0])


def mark_repaired_split(
    conn: sqlite3.Connection, conversation_id: str, results: set[str]
) -> list[str]:
    """After an edit took calls away from a turn: each of its former `results` now answers
    the call the core's rule pairs it with (the nearest live call of its ID before it, else
    the first after it), if any; every version citing one of the two but not the other goes
    stale (`group-split`). Returns their IDs."""
    pairs: list[tuple[str, str]] = []
    for result_id, sequence, call_id in conn.execute(
        "SELECT id, sequence, json_extract(meta, '$.tool_call_id') FROM turns"
        " WHERE conversation_id = ? AND state = ? AND role = 'tool' AND json_valid(meta)"
        " AND id IN (SELECT value FROM json_each(?))",
        (conversation_id, TURN_LIVE, json.dumps(sorted(results), ensure_ascii=False)),
    ).fetchall():
        if not isinstance(call_id, str):
            continue
        caller = _neighbour_call(conn, conversation_id, call_id, int(sequence), before=True)
        if caller is None:
            caller = _neighbour_call(conn, conversation_id, call_id, int(sequence), before=False)
        if caller is None:
            continue  # answers no call now: it links nothing, so it splits nothing
        (caller_id,) = conn.execute(
            "SELECT id FROM turns WHERE conversation_id = ? AND sequence = ?",
            (conversation_id, caller),
        ).fetchone()
        pairs.append((str(result_id), str(caller_id)))
    stale: list[str] = []
    for pair in pairs:
        stale += [
            str(row[0])
            for row in conn.execute(
                f"UPDATE summaries SET status = '{STALE}', reason = 'group-split'"
                f" WHERE conversation_id = ? AND status IN {LIVE_ACCEPTED} AND pk IN"
                " (SELECT summary_pk FROM summary_sources WHERE turn_id IN (?, ?)"
                " GROUP BY summary_pk HAVING COUNT(DISTINCT turn_id) = 1) RETURNING id",
                (conversation_id, *pair),
            )
        ]
    return stale


def _results(
    conn: sqlite3.Connection, conversation_id: str, ids: set[str], since: int = -1
) -> list[_Mention]:
    """The live tool turns answering these call IDs, at or after sequence `since`."""
    # One ID (the usual read): rows not holding its text are passed over before any JSON
    # is parsed.
    only = _stored_form(next(iter(ids))) if len(ids) == 1 else ""
    return [
        _Mention(str(turn_id), int(sequence), answer=str(answered))
        for turn_id, sequence, answered in conn.execute(
            "SELECT id, sequence, CASE WHEN json_valid(meta)"
            " THEN json_extract(meta, '$.tool_call_id') END AS answered FROM turns"
            " WHERE conversation_id = ? AND state = ? AND sequence >= ? AND role = 'tool'"
            " AND (instr(meta, ?) > 0 OR instr(meta, '\\u') > 0)"
            " AND answered IN (SELECT value FROM json_each(?))",
            (
                conversation_id,
                TURN_LIVE,
                since,
                only,
                json.dumps(sorted(ids), ensure_ascii=False),
            ),
        )
    ]


def _stored_form(call_id: str) -> str:
    """Text every stored meta naming this call ID holds unless it holds a `\\u` escape (the
    ID is a `tool_call_id` value or inside `tool_calls`' JSON text, which a writer may
    escape): the ID itself when JSON needs no escape for any of its characters (then only
    `\\u` can spell them otherwise), else "" (which any text holds)."""
    escaped = json.dumps(call_id, ensure_ascii=False)[1:-1]
    return call_id if escaped == call_id and "/" not in call_id else ""


def _number(value: object) -> int:
    """A sequence column (a damaged one, not an integer, sorts first)."""
    return value if isinstance(value, int) else -1


def _text(value: object) -> str:
    """A column read as text, or as bytes on a revalidation connection."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _named_calls(meta_text: str) -> set[str]:
    """The call IDs a stored meta's `tool_calls` names (none when either is malformed)."""
    try:
        meta = json.loads(meta_text)
    except ValueError:
        return set()
    return calls_in(meta.get("tool_calls") if isinstance(meta, dict) else None)


def calls_in(raw: object) -> set[str]:
    """The call IDs of `tool_calls` text (none when it is not text of a list of calls)."""
    try:
        return set(tool_call_ids(raw)) if isinstance(raw, str) else set()
    except InvalidInput:
        return set()
