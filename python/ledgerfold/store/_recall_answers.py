"""Which tool turns answer a `recall_history` call (SPEC §17.7), known through their unit
(§17.2) among the turns being written and the stored ones: such a result is never indexed
(`search_index`), and is blanked when an original it returned is erased (`recall_results`);
and the stored results whose answer a write may have changed (`live_turns`,
`group_results_without_id`), whose index status the write decides again."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerfold._errors import StoreError
from ledgerfold._model import Turn
from ledgerfold._recall_stand_in import RECALL_TOOL_NAME, call_name, tool_calls_of
from ledgerfold.store._batch_reads import lenient_rows
from ledgerfold.store._call_pairs import named_calls, nearest_call
from ledgerfold.store._rows import TURN_COLUMNS, turn_from_row
from ledgerfold.store._schema import TURN_LIVE, TURN_RETRACTED

__all__ = [
    "NO_BATCH",
    "BatchCalls",
    "answers_no_call",
    "answers_recall",
    "calls_and_recall_groups",
    "group_results_without_id",
    "live_turns",
    "stored_meta",
]


def stored_meta(raw: object) -> Mapping[str, Any]:
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return {}
    return value if isinstance(value, dict) else {}


class BatchCalls:
    """The tool calls of the assistant turns among a batch being written, by call ID (with
    the sequence of the turn making each, ascending) and by group: built once per batch, so
    that checking each of its tool turns costs that turn, not the batch (an `append_many` of
    10,000 turns checked every tool turn against every assistant turn before)."""

    __slots__ = ("_by_group", "_by_id")

    def __init__(self, batch: Sequence[Turn] = ()) -> None:
        self._by_id: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
        self._by_group: dict[str, list[Mapping[str, Any]]] = {}
        for turn in sorted((t for t in batch if t.role == "assistant"), key=_sequence):
            calls = tool_calls_of(turn.meta)
            for call in calls:
                call_id = call.get("id")
                if isinstance(call_id, str):
                    self._by_id.setdefault(call_id, []).append((turn.sequence, call))
            if turn.group is not None:
                self._by_group.setdefault(turn.group, []).extend(calls)

    def before(self, call_id: str, sequence: int) -> tuple[int, Mapping[str, Any]] | None:
        """The nearest call of this ID made before `sequence`, with its turn's sequence."""
        made = [found for found in self._by_id.get(call_id, ()) if found[0] < sequence]
        return made[-1] if made else None

    def after(self, call_id: str, sequence: int) -> tuple[int, Mapping[str, Any]] | None:
        """The first call of this ID made after `sequence`, with its turn's sequence."""
        return next((found for found in self._by_id.get(call_id, ()) if found[0] > sequence), None)

    def in_group(self, group: str) -> list[Mapping[str, Any]]:
        return self._by_group.get(group, [])


def _sequence(turn: Turn) -> int:
    return turn.sequence


#: No turn being written alongside.
NO_BATCH = BatchCalls()


def answers_recall(
    conn: sqlite3.Connection,
    conversation_id: str,
    role: str,
    group: str | None,
    meta: Mapping[str, Any],
    batch: BatchCalls,
    sequence: int,
    *,
    live: bool = True,
) -> bool:
    """Whether the tool turn at `sequence` answers a `recall_history` call (SPEC §17.7), known
    through its unit, as `ledgerfold._recall_stand_in.recall_result_ids` knows it: with a
    `tool_call_id`, the call it is paired with (§17.2: the nearest call of that ID before it,
    in `batch` or stored, else the first after it) decides by its name (`function.name`, or
    a flat `name`); without one, any `recall_history` call in its group does (a copy is
    never indexed by mistake). Calls are looked for among the live turns, as the core pairs
    a live result; a retracted result (`live=False`, retracted with its call) among the live
    and retracted ones."""
    if role != "tool":
        return False
    calls = _answered(conn, conversation_id, group, meta, batch, sequence, live)
    return any(call_name(call) == RECALL_TOOL_NAME for call in calls)


def answers_no_call(
    conn: sqlite3.Connection,
    conversation_id: str,
    group: str | None,
    meta: Mapping[str, Any],
    sequence: int,
) -> bool:
    """Whether a stored tool turn answers no call of a live or retracted turn: its call was
    purged (its meta goes), or it never had one. What it holds can no longer be told from
    its unit (`recall_results` blanks such a turn when it quotes an erased one)."""
    return not _answered(conn, conversation_id, group, meta, NO_BATCH, sequence, False)


def _answered(
    conn: sqlite3.Connection,
    conversation_id: str,
    group: str | None,
    meta: Mapping[str, Any],
    batch: BatchCalls,
    sequence: int,
    live: bool,
) -> list[Mapping[str, Any]]:
    """The calls that decide what a tool turn answers (`answers_recall`): the call it is
    paired with, or its group's calls."""
    call_id = meta.get("tool_call_id")
    if isinstance(call_id, str):
        # A batch is the newest turns: a call in it before the result is the nearest one.
        in_batch = batch.before(call_id, sequence)
        if in_batch is None:
            in_batch = _stored_call(conn, conversation_id, call_id, sequence, True, live)
        if in_batch is None:
            later = [
                found
                for found in (
                    batch.after(call_id, sequence),
                    _stored_call(conn, conversation_id, call_id, sequence, False, live),
                )
                if found is not None
            ]
            in_batch = min(later, key=lambda found: found[0], default=None)
        return [] if in_batch is None else [in_batch[1]]
    if group is None:
        return []
    return [*batch.in_group(group), *_stored_group_calls(conn, conversation_id, group, live)]


def _stored_call(
    conn: sqlite3.Connection,
    conversation_id: str,
    call_id: str,
    sequence: int,
    before: bool,
    live: bool,
) -> tuple[int, Mapping[str, Any]] | None:
    """The stored call of this ID nearest before `sequence` (or first after it) among the
    live turns (and the retracted ones unless `live`), with its turn's sequence."""
    states = (TURN_LIVE,) if live else (TURN_LIVE, TURN_RETRACTED)
    found = nearest_call(conn, conversation_id, call_id, sequence, before=before, states=states)
    return None if found is None else (found[0], stored_meta(found[1]))


def _stored_group_calls(
    conn: sqlite3.Connection, conversation_id: str, group: str, live: bool
) -> list[Mapping[str, Any]]:
    """The tool calls of the stored live (and, unless `live`, retracted) assistant turns of
    a group."""
    calls: list[Mapping[str, Any]] = []
    states = f"({TURN_LIVE})" if live else f"({TURN_LIVE}, {TURN_RETRACTED})"
    for row in lenient_rows(  # meta damaged in storage names no call (`stored_meta`)
        conn,
        "SELECT meta FROM turns WHERE conversation_id = ? AND grp = ? AND role = 'assistant'"
        f" AND state IN {states}",
        (conversation_id, group),
    ):
        calls += tool_calls_of(stored_meta(row[0]))
    return calls


def calls_and_recall_groups(
    conn: sqlite3.Connection, turn_pks_sql: str, params: Sequence[object]
) -> tuple[set[str], set[str]]:
    """The call IDs the assistant turns among `turn_pks_sql` make, and the groups among theirs
    where one makes a `recall_history` call: read before a write takes those calls away."""
    call_ids: set[str] = set()
    groups: set[str] = set()
    for meta, group in lenient_rows(  # damaged in storage: names no call
        conn,
        f"SELECT meta, grp FROM turns WHERE pk IN ({turn_pks_sql}) AND role = 'assistant'"
        " AND meta IS NOT NULL",
        tuple(params),
    ):
        if not isinstance(meta, str):
            continue
        call_ids |= named_calls(meta)
        if isinstance(group, str) and any(
            call_name(call) == RECALL_TOOL_NAME for call in tool_calls_of(stored_meta(meta))
        ):
            groups.add(group)
    return call_ids, groups


def live_turns(
    conn: sqlite3.Connection, conversation_id: str, turn_pks: Sequence[int]
) -> list[tuple[int, Turn]]:
    """`(pk, turn)` of the live turns among `turn_pks`, in sequence order (a damaged row is
    left out: left as it is)."""
    if not turn_pks:
        return []
    return _readable(
        lenient_rows(
            conn,
            f"SELECT pk, {TURN_COLUMNS} FROM turns WHERE conversation_id = ? AND state = ?"
            " AND pk IN (SELECT value FROM json_each(?)) ORDER BY sequence",
            (conversation_id, TURN_LIVE, json.dumps(sorted(set(turn_pks)))),
        )
    )


def group_results_without_id(
    conn: sqlite3.Connection, conversation_id: str, groups: Iterable[str]
) -> list[tuple[int, Turn]]:
    """`(pk, turn)` of the live tool turns of these groups without a `tool_call_id`: a
    `recall_history` call of their group, or none, decides what they are."""
    found: list[tuple[int, Turn]] = []
    for group in sorted(set(groups)):
        found += [
            (turn_pk, turn)
            for turn_pk, turn in _readable(
                lenient_rows(
                    conn,
                    f"SELECT pk, {TURN_COLUMNS} FROM turns WHERE conversation_id = ?"
                    " AND grp = ? AND role = 'tool' AND state = ?",
                    (conversation_id, group, TURN_LIVE),
                )
            )
            if not isinstance((turn.meta or {}).get("tool_call_id"), str)
        ]
    return found


def _readable(rows: Iterable[tuple[Any, ...]]) -> list[tuple[int, Turn]]:
    found: list[tuple[int, Turn]] = []
    for row in rows:
        try:
            found.append((int(row[0]), turn_from_row(row[1:])))
        except StoreError:
            continue  # a damaged row: left as it is
    return found
