"""Tool calls paired with their results by the core's rule (SPEC §17.2: a result answers
the nearest call of its ID before it, else the first after it), over the few rows a store
check needs: the calls and results of the IDs a write touches, read by bounded walks of the
sequence index (`nearest_call`, `makers_back`) and asked of the core (`unit_roots`,
`open_calls`) as bodiless turns. Used by the unit checks (`_unit_splits`), retraction and
recall results."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold import _native
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import RECALL_TOOL_NAME, call_name, tool_calls_of
from ledgerfold._toolcalls import tool_call_ids, unit_roots
from ledgerfold.store._call_index import nearest_call, stored_form
from ledgerfold.store._schema import LIVE_ACCEPTED, TURN_LIVE

__all__ = [
    "Mention",
    "as_sequence",
    "as_text",
    "calls_before",
    "calls_in",
    "calls_since",
    "early_results",
    "layout",
    "makers_back",
    "merged",
    "named_calls",
    "nearest_call",
    "neighbour_call",
    "results_before",
    "results_of",
    "results_since",
    "stored_form",
    "units",
    "unpaired_calls",
]


class Mention:
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

    def only(self, ids: set[str]) -> Mention:
        """This mention restricted to calls of `ids`."""
        if self.answer is not None:
            return self
        return Mention(self.turn_id, self.sequence, calls=self.calls & ids)


def merged(mentions: Sequence[Mention]) -> list[Mention]:
    """One mention per turn (a call read twice, for two sets of IDs, names their union)."""
    by_turn: dict[str, Mention] = {}
    for m in mentions:
        seen = by_turn.get(m.turn_id)
        if seen is None or seen.answer is not None:
            by_turn[m.turn_id] = m
        else:
            by_turn[m.turn_id] = Mention(m.turn_id, m.sequence, calls=seen.calls | m.calls)
    return list(by_turn.values())


def layout(
    mentions: Sequence[Mention], *, open_calls: bool = False
) -> tuple[list[Mention], list[int], list[int]]:
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


def units(mentions: Sequence[Mention]) -> list[list[Mention]]:
    """The mentions grouped into the core's units, those of two or more only."""
    ordered, roots, _ = layout(mentions)
    members: dict[int, list[Mention]] = {}
    for mention, root in zip(ordered, roots, strict=True):
        members.setdefault(root, []).append(mention)
    return [unit for unit in members.values() if len(unit) > 1]


def unpaired_calls(mentions: Sequence[Mention]) -> tuple[set[str], set[str]]:
    """Call IDs of a result with no call of its ID before it among `mentions` (orphaned, or
    stored before its call: an earlier call elsewhere would be its own), and of a call among
    them left without a result (all the IDs such a turn calls: a superset is only
    rechecked)."""
    ordered, _, open_at = layout(mentions, open_calls=True)
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


def makers_back(
    conn: sqlite3.Connection,
    conversation_id: str,
    results: Sequence[Mention],
    limit: int | None = None,
) -> list[Mention]:
    """The live calls of the results' IDs, from the newest assistant turn back until each
    result has a call before it (or `limit` assistant turns were read): all a result's
    caller can be among (the core's pairing)."""
    below: dict[str, float] = {}  # call ID -> the lowest sequence still wanting a call before it
    for result in results:
        assert result.answer is not None
        below[result.answer] = min(below.get(result.answer, result.sequence), result.sequence)
    ids = set(below)
    found: list[Mention] = []
    rows = conn.execute(
        "SELECT id, sequence, meta FROM turns WHERE conversation_id = ? AND state = ?"
        " AND role = 'assistant' AND meta IS NOT NULL ORDER BY sequence DESC"
        + ("" if limit is None else " LIMIT ?"),
        (conversation_id, TURN_LIVE) + (() if limit is None else (limit,)),
    )
    for turn_id, sequence, meta in rows:
        named = named_calls(meta) & ids
        if not named:
            continue
        found.append(Mention(str(turn_id), int(sequence), calls=named))
        for call_id in named:
            if call_id in below and sequence < below[call_id]:
                del below[call_id]
        if not below:
            break
    return found


def calls_since(
    conn: sqlite3.Connection, conversation_id: str, ids: set[str], first: int
) -> list[Mention]:
    """The live calls of these IDs at or after sequence `first` (O(new turns + tail))."""
    return [
        Mention(str(turn_id), int(sequence), calls=named)
        for turn_id, sequence, meta in conn.execute(
            "SELECT id, sequence, meta FROM turns WHERE conversation_id = ? AND state = ?"
            " AND role = 'assistant' AND meta IS NOT NULL AND sequence >= ?",
            (conversation_id, TURN_LIVE, first),
        )
        if (named := named_calls(meta) & ids)
    ]


def calls_before(
    conn: sqlite3.Connection,
    conversation_id: str,
    ids: set[str],
    first: int,
    mentions: Sequence[Mention],
) -> list[Mention]:
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
        targets = [Mention("", first, answer=call_id) for call_id in doubtful]
        before |= {
            call_id
            for m in makers_back(conn, conversation_id, targets)
            if m.sequence < first
            for call_id in m.calls
        }
    return [Mention(f"before:{call_id}", first - 0.5, calls={call_id}) for call_id in before]


def results_of(
    conn: sqlite3.Connection, conversation_id: str, turn_id: str, call_ids: Iterable[str]
) -> set[str]:
    """The IDs of the live tool turns answering the calls a live assistant turn made: those
    the core's rule pairs with it (a result answers the nearest call of its ID before it,
    else the first after it), not every result of a call ID a later call made again.

    Cost: per call ID, walks of the answers index (`_schema.ANSWERS_INDEX`). A result after
    the turn is its own when no call of the ID lies between them (a walk of the rows between,
    stopping at the first such call); the results after that call are another call's, so
    the walk ends there. A result before the turn is its own only when no live call of the
    ID comes before the turn at all, which is looked for only when such a result exists (a
    result stored before its call, or an ID made again: then the nearest call is near)."""
    row = conn.execute(
        "SELECT sequence FROM turns WHERE conversation_id = ? AND id = ? AND state = ?",
        (conversation_id, turn_id, TURN_LIVE),
    ).fetchone()
    if row is None:
        return set()
    sequence = int(row[0])
    found: set[str] = set()
    for call_id in sorted(set(call_ids)):
        found |= _own_results(conn, conversation_id, call_id, sequence)
    return found


def _own_results(
    conn: sqlite3.Connection, conversation_id: str, call_id: str, sequence: int
) -> set[str]:
    """The live results of `call_id` the live call at `sequence` answers (`results_of`)."""
    own: set[str] = set()
    params = (conversation_id, call_id, sequence, TURN_LIVE)
    if conn.execute(_RESULTS_BEFORE + " LIMIT 1", params).fetchone() is not None and (
        nearest_call(conn, conversation_id, call_id, sequence, before=True) is None
    ):
        own.update(str(row[0]) for row in conn.execute(_RESULTS_BEFORE, params))
    checked = sequence  # no call of the ID lies in (sequence, checked]
    for result_id, _, at in conn.execute(_RESULTS_AFTER, params):
        at = int(at)
        if nearest_call(conn, conversation_id, call_id, at, before=True, above=checked):
            break  # a call of the ID between: this result and every later one are not ours
        own.add(str(result_id))
        checked = at
    return own


class Answered:
    """A stored result the first call of its ID among turns just appended answers: no live
    call of its ID comes before it (`results_before`)."""

    __slots__ = ("call", "call_id", "caller_id", "result_id", "result_pk")

    def __init__(
        self,
        result_id: str,
        result_pk: int,
        call_id: str,
        caller_id: str,
        call: Mapping[str, Any],
    ) -> None:
        self.result_id = result_id
        self.result_pk = result_pk
        self.call_id = call_id
        self.caller_id = caller_id
        self.call = call  # the caller's call object of this ID (its name, for recall)


#: The live tool turns answering a call ID before a sequence, oldest first: a walk of
#: `turns_by_answer` (`_schema.ANSWERS_INDEX`), whose expression and condition it repeats.
_RESULTS_BEFORE = (
    "SELECT id, pk, sequence FROM turns WHERE conversation_id = ? AND role = 'tool'"
    " AND json_valid(meta) AND json_extract(meta, '$.tool_call_id') = ?"
    " AND sequence < ? AND state = ? ORDER BY sequence"
)

#: The same after a sequence, oldest first.
_RESULTS_AFTER = _RESULTS_BEFORE.replace("sequence < ?", "sequence > ?")


def results_before(
    conn: sqlite3.Connection, conversation_id: str, appended: Sequence[Turn]
) -> list[Answered]:
    """The stored live results that a call among `appended` (turns just inserted at the
    conversation's newest sequences, in sequence order) now answers (SPEC §17.2: a result
    with no call of its ID before it answers the first one after it), where that changes
    something: a result an accepted version not yet stale cites (the call splits it from
    that version), or any when the call is `recall_history`'s (the result leaves the search
    index).

    Cost: for each call ID the appended turns make, one probe of the answers index for the
    oldest result of it stored before them (none for a fresh ID, the usual call). Only with
    one is a stored call of it after that result looked for (the walk stops at the nearest:
    a row or two for an ID made again, the turns since the result otherwise), and with none,
    whether such a result matters (one read of the source index); only then is the ledger
    before the result walked for a call of its ID (a result truly stored before its call,
    now summarised or recalled)."""
    first = min((turn.sequence for turn in appended), default=0)
    callers: dict[str, tuple[Turn, Mapping[str, Any]]] = {}
    for turn in appended:
        if turn.role != "assistant" or not turn.meta:
            continue
        for call in tool_calls_of(turn.meta):
            call_id = call.get("id")
            if isinstance(call_id, str):
                callers.setdefault(call_id, (turn, call))
    found: list[Answered] = []
    for call_id, (caller, call) in sorted(callers.items()):
        params = (conversation_id, call_id, first, TURN_LIVE)
        oldest = conn.execute(_RESULTS_BEFORE + " LIMIT 1", params).fetchone()
        if oldest is None:
            continue
        since = int(oldest[2])
        if nearest_call(conn, conversation_id, call_id, first, before=True, above=since):
            continue  # every stored result answers a stored call (the first after it at most)
        results = [
            Answered(str(result_id), int(result_pk), call_id, caller.id, call)
            for result_id, result_pk, _ in conn.execute(_RESULTS_BEFORE, params)
        ]
        if call_name(call) != RECALL_TOOL_NAME and not _cited(
            conn, conversation_id, [pair.result_id for pair in results]
        ):
            continue  # whichever call they answer, no version and no index changes
        if nearest_call(conn, conversation_id, call_id, since, before=True) is not None:
            continue  # the oldest result has its call before it, so every later one too
        found += results
    return found


def early_results(
    conn: sqlite3.Connection, conversation_id: str, call_ids: Iterable[str]
) -> list[int]:
    """pks of the live results of these call IDs with no live call of their ID before them
    (SPEC §17.2: each now answers the first call of its ID after it, or none): after a write
    took away the calls they answered (a purge), whether each answers `recall_history` is
    decided again (`search_index.redecide`: it may have gained such a call, or lost one)."""
    found: list[int] = []
    for call_id in sorted(set(call_ids)):
        oldest = conn.execute(
            _RESULTS_AFTER + " LIMIT 1", (conversation_id, call_id, -1, TURN_LIVE)
        ).fetchone()
        if oldest is None:
            continue
        # No live call lies between the oldest result and the first live call after it:
        # either the oldest has a call before it, and so has every later result, or none of
        # those before that call has.
        if nearest_call(conn, conversation_id, call_id, int(oldest[2]), before=True) is not None:
            continue
        first = nearest_call(conn, conversation_id, call_id, int(oldest[2]), before=False)
        bound = first[0] if first is not None else _NO_SEQUENCE
        found += [
            int(result_pk)
            for _, result_pk, _ in conn.execute(
                _RESULTS_BEFORE, (conversation_id, call_id, bound, TURN_LIVE)
            )
        ]
    return found


#: Above every sequence.
_NO_SEQUENCE = 2**63 - 1


def _cited(conn: sqlite3.Connection, conversation_id: str, turn_ids: list[str]) -> bool:
    """Whether an accepted version not yet stale cites one of these turns."""
    return (
        conn.execute(
            "SELECT 1 FROM summary_sources AS ss JOIN summaries AS s ON s.pk = ss.summary_pk"
            " WHERE ss.turn_id IN (SELECT value FROM json_each(?)) AND s.conversation_id = ?"
            f" AND s.status IN {LIVE_ACCEPTED} LIMIT 1",
            (json.dumps(turn_ids, ensure_ascii=False), conversation_id),
        ).fetchone()
        is not None
    )


def neighbour_call(
    conn: sqlite3.Connection, conversation_id: str, call_id: str, sequence: int, *, before: bool
) -> int | None:
    """The sequence of the live call of this ID nearest before (or after) `sequence`."""
    found = nearest_call(conn, conversation_id, call_id, sequence, before=before)
    return None if found is None else found[0]


def results_since(
    conn: sqlite3.Connection, conversation_id: str, ids: set[str], since: int = -1
) -> list[Mention]:
    """The live tool turns answering these call IDs, at or after sequence `since`."""
    # One ID (the usual read): rows not holding its text are passed over before any JSON
    # is parsed.
    only = stored_form(next(iter(ids))) if len(ids) == 1 else ""
    return [
        Mention(str(turn_id), int(sequence), answer=str(answered))
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


def as_sequence(value: object) -> int:
    """A sequence column (a damaged one, not an integer, sorts first)."""
    return value if isinstance(value, int) else -1


def as_text(value: object) -> str:
    """A column read as text, or as bytes on a revalidation connection."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def named_calls(meta_text: str) -> set[str]:
    """The call IDs a stored meta's `tool_calls` names (none when either is malformed)."""
    try:
        meta = json.loads(meta_text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return set()
    return calls_in(meta.get("tool_calls") if isinstance(meta, dict) else None)


def calls_in(raw: object) -> set[str]:
    """The call IDs of `tool_calls` text (none when it is not text of a list of calls)."""
    try:
        return set(tool_call_ids(raw)) if isinstance(raw, str) else set()
    except InvalidInput:
        return set()
