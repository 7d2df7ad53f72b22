"""Loader for the JSONL transcript format of `tests/data/transcripts/README.md`.

One conversation per line: ``{"conversation_id", "source", "turns": [{"id", "sequence",
"role", "body", "tool_call_ids"}]}``. Bodies are kept exactly as given (they are the ledger
facts), and so are sequences (turns sorted by them, gaps kept); tool calls are also restored
into meta in OpenAI form, and each assistant turn that calls tools shares a `group` with the
tool turns answering it, so they compact atomically.

A line of an OpenAI fine-tuning file, ``{"messages": [...]}`` with no ``conversation_id``,
is read with `from_chat_messages`; its conversation ID is ``<file stem>:<line number>``
(``<name>:<line number>`` when `iter_transcripts` is given a `name`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Union

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput
from ledgerfold._model import ROLES, Conversation, Turn
from ledgerfold._sized import sized
from ledgerfold._toolcalls import check_meta
from ledgerfold.adapters._chat import from_chat_messages

__all__ = ["Transcript", "iter_transcripts", "load_transcripts"]

PathArg = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True, slots=True, repr=False)
class Transcript:
    """One conversation of a transcript file; `turns` in sequence order; `line` its line
    number in the file (0 when not read from one)."""

    conversation_id: str
    source: str
    turns: tuple[Turn, ...]
    line: int = field(default=0, compare=False)

    def conversation(self, revision: int = 0) -> Conversation:
        """The transcript as a ledger snapshot."""
        return Conversation(self.conversation_id, revision, self.turns)

    def __repr__(self) -> str:
        return (
            f"Transcript(conversation_id={self.conversation_id!r}, source={self.source!r}, "
            f"turns={sized(len(self.turns), 'turn')})"
        )


class _LineError(Exception):
    """A problem in one line, before the file name and line number are attached."""

    def __init__(self, detail: str, field: str, problem: str):
        super().__init__(detail)
        self.field = field
        self.problem = problem


def iter_transcripts(path: PathArg, *, name: str | None = None) -> Iterator[Transcript]:
    """Transcripts of one JSONL file, read line by line; blank lines are skipped. A
    fine-tuning line's conversation is `<name>:<line number>`, `name` the file's stem unless
    given (a pipe's stem, such as `63` of `/dev/fd/63`, names nothing).

    A malformed line raises `InvalidInput` naming the file, the line number and the field
    (never a body).
    """
    file_name = os.fspath(path)
    prefix = Path(file_name).stem if name is None else name
    # Binary lines split on b"\n" only: bodies hold U+2028 and other Unicode line breaks.
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
                if not line.strip():
                    continue
                yield replace(_transcript(line, f"{prefix}:{line_number}"), line=line_number)
            except UnicodeDecodeError:
                raise InvalidInput(
                    f"{file_name}:{line_number}: not valid UTF-8", field="line", problem="not-utf8"
                ) from None
            except _LineError as error:
                raise InvalidInput(
                    f"{file_name}:{line_number}: {error}",
                    field=error.field,
                    problem=error.problem,
                ) from None


def load_transcripts(paths: PathArg | Iterable[PathArg]) -> list[Transcript]:
    """Every transcript of the given files; a directory stands for its `*.jsonl` files
    in name order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    transcripts: list[Transcript] = []
    for path in paths:
        if Path(path).is_dir():
            for child in sorted(Path(path).glob("*.jsonl")):
                transcripts.extend(iter_transcripts(child))
        else:
            transcripts.extend(iter_transcripts(path))
    return transcripts


def _field(record: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in record:  # not "got NoneType": the line has no such key
        raise _LineError(f"{where}{key}: missing (must be {kind.__name__})", key, "wrong-type")
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise _LineError(
            f"{where}{key}: must be {kind.__name__}, got {type(value).__name__}",
            key,
            "wrong-type",
        )
    return value


def _text(record: dict[str, Any], key: str, where: str) -> str:
    """A text field (`_field`) that encodes as UTF-8 (`_utf8`)."""
    return _utf8(f"{where}{key}", key, _field(record, key, str, where))


def _utf8(name: str, key: str, value: str) -> str:
    """`value`, refused unless it encodes as UTF-8 with `_validate.text`'s message naming
    `name`, as the conversation ID and every text of a fine-tuning line are (a body, a turn
    or call ID, the source: one message whatever the field)."""
    try:
        return _validate.text(name, value, blank_ok=True)
    except InvalidInput as error:
        raise _LineError(str(error), key, error.problem or "invalid") from None


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class _TooDeep(Exception):
    """JSON nested deeper than Python's parser can follow (a RecursionError inside it)."""


class _NotJson(ValueError):
    """NaN or ±Infinity: Python reads them, JSON has no such values."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON")


def _loads(text: str) -> Any:
    """Strict JSON (no NaN/Infinity); `_TooDeep` for nesting beyond the parser's stack."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise _TooDeep from None


def _transcript(line: str, chat_id: str) -> Transcript:
    """One line; `chat_id` names the conversation of a fine-tuning (`messages`) line."""
    try:
        record = _loads(line)
    except _TooDeep:
        raise _LineError("not valid JSON (nested too deeply)", "line", "not-allowed") from None
    except ValueError as error:
        # JSONDecodeError's msg and column say what is wrong without quoting the line.
        detail = (
            f"{error.msg} at column {error.colno}"
            if isinstance(error, json.JSONDecodeError)
            else str(error)
            if isinstance(error, _NotJson)
            else "invalid JSON"
        )
        raise _LineError(f"not valid JSON ({detail})", "line", "wrong-type") from None
    if not isinstance(record, dict):
        raise _LineError("must be a JSON object", "line", "wrong-type")
    if "conversation_id" not in record and "messages" in record:
        return _chat_transcript(record, chat_id)
    conversation_id = _field(record, "conversation_id", str, "")
    try:
        _validate.identifier("conversation_id", conversation_id)
    except InvalidInput as error:
        raise _LineError(str(error), "conversation_id", error.problem or "invalid") from None
    source = _text(record, "source", "")
    raw_turns = _field(record, "turns", list, "")

    turns: list[Turn] = []
    group_of_call: dict[str, str] = {}
    seen_ids: set[str] = set()
    # Sequences are kept: turns are read in sequence order, gaps and all.
    for index in _sequence_order(raw_turns):
        raw_turn = raw_turns[index]
        where = f"turns[{index}]."
        turn_id = _text(raw_turn, "id", where)
        sequence = raw_turn["sequence"]
        role = _field(raw_turn, "role", str, where)
        body = _text(raw_turn, "body", where)
        call_ids = raw_turn.get("tool_call_ids", [])
        if not isinstance(call_ids, list) or not all(
            isinstance(call_id, str) and call_id for call_id in call_ids
        ):
            raise _LineError(
                f"{where}tool_call_ids: must be a list of non-empty str",
                "tool_call_ids",
                "wrong-type",
            )
        for call_index, call_id in enumerate(call_ids):
            _utf8(f"{where}tool_call_ids[{call_index}]", "tool_call_ids", call_id)
        if role not in ROLES:
            raise _LineError(
                f"{where}role: must be one of {', '.join(ROLES)}", "role", "unknown-value"
            )
        if turn_id in seen_ids:
            raise _LineError(f"{where}id: {turn_id!r} appears twice", "id", "duplicate")
        seen_ids.add(turn_id)

        meta: dict[str, str] = {}
        group: str | None = None
        if call_ids and role == "assistant":
            calls = _appended_calls(body, call_ids, where)
            meta["tool_call_ids"] = _compact_json(call_ids)
            meta["tool_calls"] = _compact_json(calls)
            group = "tools:" + call_ids[0]
            for call_id in call_ids:
                if call_id in group_of_call:
                    raise _LineError(
                        f"{where}tool_call_ids: call {call_id!r} was already made",
                        "tool_call_ids",
                        "duplicate",
                    )
                group_of_call[call_id] = group
        elif call_ids and role == "tool":
            if len(call_ids) != 1:
                raise _LineError(
                    f"{where}tool_call_ids: a tool turn answers exactly one call",
                    "tool_call_ids",
                    "out-of-range",
                )
            meta["tool_call_id"] = call_ids[0]
            group = group_of_call.get(call_ids[0])  # None: answers no earlier call
        elif call_ids:
            raise _LineError(
                f"{where}tool_call_ids: only assistant and tool turns carry call ids",
                "tool_call_ids",
                "not-allowed",
            )
        try:
            turns.append(Turn(turn_id, sequence, role, body, group=group, meta=meta or None))
        except InvalidInput as error:
            raise _LineError(
                f"turn {turn_id!r}: {error.field or 'turn'} rejected "
                f"({error.problem or 'invalid'})",
                error.field or "turns",
                error.problem or "invalid",
            ) from None
    return Transcript(conversation_id, source, tuple(turns))


def _sequence_order(raw_turns: list[Any]) -> list[int]:
    """Indexes of the turns in sequence order; every turn an object with a distinct int
    `sequence` above 0."""
    seen: set[int] = set()
    for index, raw_turn in enumerate(raw_turns):
        if not isinstance(raw_turn, dict):
            raise _LineError(f"turns[{index}]: must be a JSON object", "turns", "wrong-type")
        sequence = _field(raw_turn, "sequence", int, f"turns[{index}].")
        if sequence < 1 or sequence > 2**63 - 1:
            raise _LineError(
                f"turns[{index}].sequence: must be between 1 and 2**63-1",
                "sequence",
                "out-of-range",
            )
        if sequence in seen:
            raise _LineError(
                f"turns[{index}].sequence: {sequence} appears twice", "sequence", "duplicate"
            )
        seen.add(sequence)
    return sorted(range(len(raw_turns)), key=lambda index: raw_turns[index]["sequence"])


def _chat_transcript(record: dict[str, Any], conversation_id: str) -> Transcript:
    """A fine-tuning line: `messages` through `from_chat_messages` (sequences 1..n)."""
    try:
        turns = from_chat_messages(_field(record, "messages", list, ""))
        for index, turn in enumerate(turns):
            check_meta(turn.meta, f"messages[{index}].meta")
    except InvalidInput as error:
        raise _LineError(
            str(error), error.field or "messages", error.problem or "invalid"
        ) from None
    return Transcript(conversation_id, "chat-messages", tuple(turns))


def _appended_calls(body: str, call_ids: list[str], where: str) -> list[dict[str, Any]]:
    """The OpenAI-form tool calls from the `{"tool_call": ...}` lines that end `body`."""
    # split("\n"), not splitlines(): only "\n" separates the appended lines.
    lines = body.split("\n")
    if len(lines) < len(call_ids):
        raise _LineError(f"{where}body: missing appended tool_call lines", "body", "wrong-type")
    calls: list[dict[str, Any]] = []
    for call_id, call_line in zip(call_ids, lines[len(lines) - len(call_ids) :], strict=True):
        try:
            parsed = _loads(call_line)
        except _TooDeep:
            raise _LineError(
                f"{where}body: tool_call line for call {call_id!r} is nested too deeply",
                "body",
                "not-allowed",
            ) from None
        except ValueError:
            parsed = None
        call = parsed.get("tool_call") if isinstance(parsed, dict) else None
        if not isinstance(call, dict) or call.get("id") != call_id:
            raise _LineError(
                f"{where}body: no appended tool_call line for call {call_id!r}",
                "body",
                "wrong-type",
            )
        name = call.get("name")
        if not isinstance(name, str):
            raise _LineError(
                f"{where}body: tool_call {call_id!r} has no str name", "body", "wrong-type"
            )
        arguments = call.get("arguments", {})
        # Key order kept: it is the model's own output.
        try:
            arguments_text = (
                arguments
                if isinstance(arguments, str)
                else json.dumps(arguments, separators=(",", ":"))
            )
        except RecursionError:
            raise _LineError(
                f"{where}body: tool_call {call_id!r} arguments are nested too deeply",
                "body",
                "not-allowed",
            ) from None
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments_text},
            }
        )
    return calls
