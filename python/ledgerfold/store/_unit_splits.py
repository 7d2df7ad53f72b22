"""Compaction units split by tool-call links (SPEC §15.4, §17.2): a summary that covers
part of a unit (a call without its results, or a result without its call) is stale
(`group-split`). The checks and the eager marks run inside the caller's transaction: at an
append or edit (`mark_group_split`), at a commit (`calls_split`), at a context read and a
revalidation of a database written before the rule (`split_unit`, `split_by_links`), and
after an edit takes calls from a turn (`mark_repaired_split`). Calls and results are paired
by `_call_pairs`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold._context import TurnItem
from ledgerfold._model import Turn
from ledgerfold.store._call_pairs import (
    Answered,
    Mention,
    as_sequence,
    as_text,
    calls_before,
    calls_in,
    calls_since,
    makers_back,
    merged,
    nearest_call,
    neighbour_call,
    results_of,
    results_since,
    units,
    unpaired_calls,
)
from ledgerfold.store._schema import LIVE_ACCEPTED, STALE, TURN_LIVE

__all__ = [
    "calls_split",
    "mark_group_split",
    "mark_repaired_split",
    "split_by_links",
    "split_unit",
]


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
    mentions: list[Mention] = []
    for turn_id, sequence, role, meta in raw:
        if not meta:
            continue
        answered = meta.get("tool_call_id")
        if role == "tool" and isinstance(answered, str):
            mentions.append(Mention(turn_id, sequence, answer=answered))
        elif role == "assistant":
            made = calls_in(meta.get("tool_calls"))
            if made:
                mentions.append(Mention(turn_id, sequence, calls=made))
    orphaned, unanswered = unpaired_calls(mentions)
    suspects = orphaned | unanswered
    if not suspects:
        return None
    # The sources' results of these IDs first (a pending call's ID, the usual suspect, has
    # none: one read); their calls only where a result needs its caller found. Found through
    # the answers index (`_schema.ANSWERS_INDEX`, whose expression and condition this
    # repeats), each checked against the summary's sources: O(suspects), where reading the
    # sources for them cost O(covered) at every context read the cache does not serve.
    found = [
        Mention(as_text(turn_id), as_sequence(sequence), answer=as_text(answered))
        for turn_id, sequence, answered in conn.execute(
            "SELECT t.id, t.sequence, json_extract(t.meta, '$.tool_call_id') FROM turns t"
            " WHERE t.conversation_id = ? AND t.role = 'tool' AND json_valid(t.meta)"
            " AND json_extract(t.meta, '$.tool_call_id') IN (SELECT value FROM json_each(?))"
            " AND t.state = ? AND EXISTS (SELECT 1 FROM summary_sources ss"
            " WHERE ss.summary_pk = ? AND ss.turn_id = t.id)",
            (conversation_id, json.dumps(sorted(suspects)), TURN_LIVE, summary_pk),
        )
    ]
    raw_ids = {mention.turn_id for mention in mentions}
    callers = orphaned | {m.answer for m in found if m.answer is not None}
    if callers:
        # Each result's own call (the core's rule: the nearest live call of its ID before
        # it, else the first after it), found through the calls index (`nearest_call`),
        # kept when the summary cites it. Reading the sources for every call of these IDs
        # cost O(covered) at every context read beside a raw result without a raw call, or
        # a raw call whose ID a covered result answers (an ID made again).
        wanted = [m for m in mentions + found if m.answer in callers]
        found += _source_callers(conn, conversation_id, summary_pk, wanted, raw_ids)
    found = merged(found)
    if not found:
        return None
    relevant = [m.only(suspects) for m in mentions] + found
    for unit in units(relevant):
        if any(m.turn_id in raw_ids for m in unit) and any(m.turn_id not in raw_ids for m in unit):
            return next(m.turn_id for m in unit if m.turn_id in raw_ids)
    return None


def _callers(
    conn: sqlite3.Connection, conversation_id: str, results: Sequence[Mention]
) -> list[Mention]:
    """The live call each result answers (the core's rule: the nearest of its ID before it,
    else the first after it), as mentions of those IDs alone: an index probe or two each
    (`nearest_call`), where a walk of the newest assistant turns read up to 2,000 of them
    for a result whose call was never made."""
    calls: dict[int, set[str]] = {}
    for result in results:
        assert result.answer is not None
        at = int(result.sequence)
        found = nearest_call(conn, conversation_id, result.answer, at, before=True)
        if found is None:
            found = nearest_call(conn, conversation_id, result.answer, at, before=False)
        if found is not None:
            calls.setdefault(found[0], set()).add(result.answer)
    if not calls:
        return []
    rows = conn.execute(
        "SELECT id, sequence FROM turns WHERE conversation_id = ? AND state = ?"
        " AND sequence IN (SELECT value FROM json_each(?))",
        (conversation_id, TURN_LIVE, json.dumps(sorted(calls))),
    ).fetchall()
    return [
        Mention(as_text(turn_id), int(sequence), calls=calls[int(sequence)])
        for turn_id, sequence in rows
    ]


def _source_callers(
    conn: sqlite3.Connection,
    conversation_id: str,
    summary_pk: int,
    results: Sequence[Mention],
    raw_ids: set[str],
) -> list[Mention]:
    """The calls these results answer (`_callers`) that are sources of the summary, not
    raw turns."""
    found = [m for m in _callers(conn, conversation_id, results) if m.turn_id not in raw_ids]
    if not found:
        return []
    cited = {
        as_text(row[0])
        for row in conn.execute(
            "SELECT turn_id FROM summary_sources WHERE summary_pk = ?"
            " AND turn_id IN (SELECT value FROM json_each(?))",
            (summary_pk, json.dumps([m.turn_id for m in found], ensure_ascii=False)),
        )
    }
    return [m for m in found if m.turn_id in cited]


def mark_group_split(
    conn: sqlite3.Connection,
    conversation_id: str,
    joined: Sequence[Turn],
    *,
    answers_too: bool = False,
    known_results: set[str] | None = None,
    answered: Sequence[Answered] = (),
) -> list[str]:
    """A turn that joins a group holding a summary's source, without being a source itself,
    splits the group (SPEC §15.4): every version citing a member goes stale (`group-split`)
    in the same transaction; returns their IDs. A late tool result is the usual case;
    tool-call links count as groups do (SPEC §17.2). With `answers_too` (an edit), a
    joining assistant turn's results are looked up too (a read of the conversation's tool
    turns); `known_results`, when the caller has them, are those of the one joining call.
    An append passes instead the stored results its calls answer (`answered`, from
    `results_before`: results stored before their call, which the call joins)."""
    stale = _mark_call_split(conn, conversation_id, joined, answers_too, known_results, answered)
    groups = sorted({turn.group for turn in joined if turn.group is not None})
    if not groups:
        return stale
    joined_ids = _ids_json(joined)
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
    answers_too: bool = False,
    known_results: set[str] | None = None,
    answered: Sequence[Answered] = (),
) -> list[str]:
    """SPEC §17.2: a tool turn answering a call joins the caller's unit whatever its group,
    so versions citing the caller but not the answer go stale (`group-split`). The caller
    is the nearest assistant turn before the result naming its call (the core's pairing),
    searched from the newest assistant turn back, so a result arriving after its call costs
    a row or two (a result whose call never was made reads them all). Likewise a call
    arriving after its result (`answered`): versions citing the result go stale."""
    answers = [
        Mention(turn.id, turn.sequence, answer=turn.meta["tool_call_id"])
        for turn in joined
        if turn.role == "tool" and turn.meta and "tool_call_id" in turn.meta
    ]
    made = {
        turn.id: Mention(turn.id, turn.sequence, calls=calls_in(turn.meta.get("tool_calls")))
        for turn in (joined if answers_too else ())
        if turn.role == "assistant" and turn.meta
    }
    made = {turn_id: mention for turn_id, mention in made.items() if mention.calls}
    callers: list[str] = []
    if answers:
        makers = _callers(conn, conversation_id, answers)
        joined_answers = {mention.turn_id for mention in answers}
        for unit in units(answers + makers):
            if any(m.turn_id in joined_answers for m in unit):
                callers.extend(m.turn_id for m in unit if m.calls)
    for turn_id, mention in made.items():
        # An edited call (rare): its results are the tool turns paired with it.
        if known_results is None or len(made) != 1:
            known_results = results_of(conn, conversation_id, turn_id, mention.calls)
        callers.extend(sorted(known_results))
    # A stored result the joining call answers: versions citing it (never the call, just
    # appended) split the pair.
    callers.extend(pair.result_id for pair in answered)
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
            (conversation_id, json.dumps(callers, ensure_ascii=False), _ids_json(joined)),
        ).fetchall()
    ]


def _ids_json(turns: Sequence[Turn]) -> str:
    """The turns' IDs as a JSON array (for `json_each`): made only when a statement uses
    it, not for every append."""
    return json.dumps([turn.id for turn in turns], ensure_ascii=False)


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
        Mention(turn.id, turn.sequence, answer=turn.meta["tool_call_id"])
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
    mentions = makers_back(conn, conversation_id, answers) + answers
    if calls:
        mentions += calls_since(conn, conversation_id, calls, first)
        mentions += results_since(conn, conversation_id, calls, since=first)
        mentions += calls_before(conn, conversation_id, calls, first, mentions)
    mentions = merged(mentions)
    covered = set(sources)
    new_ids = {turn.id for turn in new_turns}
    for unit in units(mentions):
        if any(m.turn_id in new_ids for m in unit) and any(m.turn_id not in covered for m in unit):
            return True
    return False


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
        caller = neighbour_call(conn, conversation_id, call_id, int(sequence), before=True)
        if caller is None:
            caller = neighbour_call(conn, conversation_id, call_id, int(sequence), before=False)
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
