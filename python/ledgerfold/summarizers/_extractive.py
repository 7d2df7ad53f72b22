"""`ExtractiveSummarizer`: the built-in deterministic, offline summarizer (SPEC §13).

It makes no model call: one line per compacted turn with its sequence, role and first
sentence (tool output reduced to its size), after the still-relevant lines of the
previous summary. The same request always gives the same text, which makes it the
default for demos and tests and a safe fallback when no model is available.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ledgerfold import _validate
from ledgerfold._context import RECALL_PROMISE
from ledgerfold._worker import pause
from ledgerfold.tokens import approx_of_counts, approx_tokens, wide_chars

if TYPE_CHECKING:
    from ledgerfold.summarizers._base import SummaryRequest

__all__ = ["OMITTED_LINE", "ExtractiveSummarizer", "attachments", "attachments_note"]

# A line this summarizer wrote for a turn: "[seq 12 user] ...". Numbers are of at most 19
# ASCII digits (a sequence is an i64): a previous summary's line with more, from another
# summarizer, is a note (Python refuses to read 4,300 digits as an int).
_TURN_LINE = re.compile(r"^\[seq ([0-9]{1,19}) ([a-z]+)[^\]]*\]")
# The line that counts the turn lines dropped (by `max_turns` or the token budget):
# "[57 earlier turn lines omitted: sequences 2–58; recall_history returns them]" when they
# all come before the lines kept, else "[57 turn lines omitted among sequences 2–90; ...]"
# (tool output goes first: the range holds kept lines too). It holds no "[seq", so it is
# never read as a citation (SPEC §16.5); the form without a range, which summaries stored
# before it hold, is still read. Written after a purge (SPEC §15.5) through sequence P, it
# does not promise what recall cannot return: "...; purged: recall_history cannot return
# them]" when every omitted line lies at or below P, else "...; recall_history returns only
# those after sequence P]".
OMITTED_LINE = re.compile(
    r"^\[([0-9]{1,19}) (?:earlier )?turn lines omitted(?::| among)?"
    r"(?: sequences? ([0-9]{1,19})(?:–([0-9]{1,19}))?)?"
    r"(?:; (?:recall_history returns them|purged: recall_history cannot return them"
    r"|recall_history returns only those after sequence [0-9]{1,19}))?\]$"
)
#: What the marker says of recall when no omitted line was purged (SPEC §16.5's example).
RETURNS_THEM = f"{RECALL_PROMISE} them"
# Which turn lines are dropped first when some must go: tool output, then the assistant's
# (and system) lines, the user's last — the user's request outlives the rest.
_DROP_ORDER = {"tool": 0, "user": 2}
# Turn lines written between two pauses (`pause`): a few microseconds each (one tool call
# line's JSON, a first line and its sentence), far below the worker's `YIELD_EVERY_S`.
_PAUSE_EVERY = 4


@dataclass
class _Omitted:
    """The turn lines a summary leaves out: how many, and the range of their sequences
    (None when unknown: a marker written before ranges were)."""

    count: int = 0
    first: int | None = None
    last: int | None = None
    unknown: bool = False
    #: The sequence the conversation was purged through (`SummaryRequest.purged_through`).
    purged: int | None = None

    def add(self, sequences: list[int]) -> _Omitted:
        if not sequences:
            return self
        first = min(sequences) if self.first is None else min(self.first, *sequences)
        last = max(sequences) if self.last is None else max(self.last, *sequences)
        return replace(self, count=self.count + len(sequences), first=first, last=last)

    def recall(self) -> str:
        """What the marker says recall returns: the omitted lines' originals, except those a
        purge deleted (never promised)."""
        purged, known = self.purged, not (self.unknown or self.first is None)
        if purged is None or (known and self.first is not None and self.first > purged):
            return RETURNS_THEM
        if known and self.last is not None and self.last <= purged:
            return "purged: recall_history cannot return them"
        return f"{RECALL_PROMISE} only those after sequence {purged}"

    def marker(self, first_kept: int | None = None) -> str:
        """The marker line; "earlier" only when every omitted line comes before `first_kept`
        (the first turn line kept), else the range is where they lie ("among")."""
        among = self.last is not None and first_kept is not None and self.last > first_kept
        if self.first is None or self.last is None or self.unknown:
            where = ""
        elif self.first == self.last:
            where = f": sequence {self.first}"
        else:
            where = f"{' among' if among else ':'} sequences {self.first}–{self.last}"
        what = "turn lines omitted" if among else "earlier turn lines omitted"
        return f"[{self.count} {what}{where}; {self.recall()}]"


def _read_marker(found: re.Match[str], omitted: _Omitted, kept_first: int | None) -> _Omitted:
    """Fold a previous summary's marker into `omitted`. An old marker has no range: its lines
    lay before the previous summary's first kept turn line, so from 1 up to that one."""
    count = int(found.group(1))
    if found.group(2) is not None:
        first = int(found.group(2))
        last = int(found.group(3)) if found.group(3) is not None else first
    elif kept_first is not None and kept_first > 1:
        first, last = 1, kept_first - 1
    else:
        return replace(omitted, count=omitted.count + count, unknown=True)
    merged = omitted.add([first, last])
    return replace(merged, count=omitted.count + count)


# The end of a first sentence: Latin punctuation before a space, or CJK full stops.
#: What a recall result reads as in a summarizer's request (`ledgerfold._recall_stand_in`).
_STAND_IN = re.compile(r"recall_history result: \d+ passages")
# Matched at the sentence's last character (a search that starts at a character class).
_SENTENCE_END = re.compile(r"[.!?。！？](?:(?<=[。！？])|(?=\s))")
# What a transcript's tool call line starts with; and the characters `str.splitlines` ends
# a line at (all of them whitespace).
_CALL_LINE = '{"tool_call":'
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class ExtractiveSummarizer:
    """Summarise by extraction: deterministic, offline, never blank for non-empty input.

    - Lines of the previous summary are kept (rolling summaries) unless they describe a
      turn of this request, which gets a fresh line instead — so re-compacting the same
      turns never duplicates them.
    - Each turn becomes ``[seq N role] first sentence…`` cut to `max_chars_per_turn`;
      tool turns become ``[seq N tool] <name>: <head of the output>… (<n> chars)``; the calls
      an assistant turn makes are listed once each by tool name (a call both in
      `meta["tool_calls"]` and as a transcript ``{"tool_call": ...}`` line counts once).
    - `max_turns` (optional) keeps at most that many turn lines.
    - The request's `max_summary_tokens` (SPEC §15.2) is honoured: turn lines are dropped
      until the text fits (measured with `token_counter`).
    - Lines are dropped tool output first, then the assistant's, the user's last (the
      oldest first within each), so the user's request outlives the tool output. One marker
      line counts them and names their range:
      ``[57 earlier turn lines omitted: sequences 2–58; recall_history returns them]``.
    """

    def __init__(
        self,
        max_chars_per_turn: int = 160,
        max_turns: int | None = None,
        *,
        tool_head_chars: int = 80,
        token_counter: Callable[[str], int] | None = None,
    ) -> None:
        self.max_chars_per_turn = _validate.integer(
            "max_chars_per_turn", max_chars_per_turn, minimum=8
        )
        if max_turns is not None:
            _validate.integer("max_turns", max_turns, minimum=1)
        self.max_turns = max_turns
        self.tool_head_chars = _validate.integer("tool_head_chars", tool_head_chars, minimum=0)
        _validate.callback("token_counter", token_counter, "str -> int")
        self.token_counter = token_counter if token_counter is not None else approx_tokens

    def __repr__(self) -> str:
        return (
            f"ExtractiveSummarizer(max_chars_per_turn={self.max_chars_per_turn}, "
            f"max_turns={self.max_turns}, tool_head_chars={self.tool_head_chars})"
        )

    def __call__(self, request: SummaryRequest) -> str:
        fresh_sequences = {turn.sequence for turn in request.turns}
        omitted = _Omitted(purged=getattr(request, "purged_through", None))
        notes: list[str] = []  # previous lines that are not about a turn
        turn_lines: list[tuple[int, str, str]] = []  # (sequence, role, line)
        markers: list[re.Match[str]] = []  # the previous omitted markers (no turn line is)
        kept_first: int | None = None  # the previous summary's first turn line's sequence
        for line in _previous_lines(request.previous_summary):
            turn_match = _TURN_LINE.match(line)
            if turn_match is None:
                marker = OMITTED_LINE.match(line)
                if marker is None:
                    notes.append(line)
                else:
                    markers.append(marker)
                continue
            sequence = int(turn_match.group(1))
            if kept_first is None or sequence < kept_first:
                kept_first = sequence
            if sequence not in fresh_sequences:
                turn_lines.append((sequence, turn_match.group(2), line))
        for marker in markers:
            omitted = _read_marker(marker, omitted, kept_first)
        for index, turn in enumerate(request.turns):
            if not index % _PAUSE_EVERY:
                pause()  # on a store's worker (a compaction's job), the loop may take the GIL
            turn_lines.append((turn.sequence, turn.role, self._turn_line(turn)))
        turn_lines.sort(key=itemgetter(0))  # stable: ties keep their order
        if self.max_turns is not None and len(turn_lines) > self.max_turns:
            omitted, turn_lines = _drop(omitted, turn_lines, len(turn_lines) - self.max_turns)
        text = _compose(notes, omitted, turn_lines)
        budget = getattr(request, "max_summary_tokens", None)
        if budget is not None and self.token_counter(text) > budget:
            text = self._fit(notes, omitted, turn_lines, budget)
        return text

    def _fit(
        self,
        notes: list[str],
        omitted: _Omitted,
        turn_lines: list[tuple[int, str, str]],
        budget: int,
    ) -> str:
        """Drop turn lines (tool output first, the user's last, oldest first within each;
        counted) until the text fits `budget` tokens; the largest number kept that fits is
        found by bisection."""
        order = _drop_order(turn_lines)
        fits = self._fits(notes, omitted, turn_lines, order, budget)
        low, high = 0, len(turn_lines)  # turn lines kept
        while low < high:
            keep = (low + high + 1) // 2
            if fits(keep):
                low = keep
            else:
                high = keep - 1
        text = _compose(notes, *_drop(omitted, turn_lines, len(turn_lines) - low, order))
        if self.token_counter(text) > budget:  # the notes alone are over: cut the text
            text = self._head(text, budget)
        return text

    def _fits(
        self,
        notes: list[str],
        omitted: _Omitted,
        turn_lines: list[tuple[int, str, str]],
        order: list[int],
        budget: int,
    ) -> Callable[[int], bool]:
        """Whether the text that keeps `keep` turn lines (`_drop` in `order`) fits `budget`.
        With the default counter, `approx_tokens`, it is counted from each line's characters
        (wide ones, all), which the text's count is the sum of, without composing it."""
        total = len(turn_lines)
        if self.token_counter is not approx_tokens:
            counter = self.token_counter

            def composed(keep: int) -> bool:
                kept = _drop(omitted, turn_lines, total - keep, order)
                return counter(_compose(notes, *kept)) <= budget

            return composed
        wide = [wide_chars(line) for _, _, line in turn_lines]
        chars = [len(line) for _, _, line in turn_lines]
        all_wide = sum(wide) + sum(map(wide_chars, notes))
        all_chars = sum(chars) + sum(map(len, notes))

        def counted(keep: int) -> bool:
            dropped = order[: total - keep]
            text_wide = all_wide - sum(wide[index] for index in dropped)
            text_chars = all_chars - sum(chars[index] for index in dropped)
            lines = len(notes) + keep
            left_out = omitted.add([turn_lines[index][0] for index in dropped])
            if left_out.count:
                out = set(dropped)
                first = next((index for index in range(total) if index not in out), None)
                marker = left_out.marker(None if first is None else turn_lines[first][0])
                text_wide += wide_chars(marker)
                text_chars += len(marker)
                lines += 1
            if not lines:
                return budget >= 0  # the empty text: no tokens
            text_chars += lines - 1  # the line breaks
            return approx_of_counts(text_chars, text_wide) <= budget

        return counted

    def _head(self, text: str, budget: int) -> str:
        """The longest head of `text` that fits `budget` by the token counter (found by
        bisection: a counter may charge several tokens for one character), never empty."""
        low, high = 1, len(text)  # characters kept: the largest that fits, at least one
        while low < high:
            keep = (low + high + 1) // 2
            if self.token_counter(text[:keep]) <= budget:
                low = keep
            else:
                high = keep - 1
        return text[:low]

    def _turn_line(self, turn: Any) -> str:
        prefix = f"[seq {turn.sequence} {turn.role}]"
        meta: dict[str, str] = turn.meta or {}
        text: str = turn.text
        if turn.role == "tool":
            if _STAND_IN.fullmatch(text):
                # A recall result's stand-in (SPEC §17.7) names its tool and counts its
                # passages: shown whole, without the name again or the size of a text that
                # is not the output.
                return f"{prefix} {text}"
            name = meta.get("name")
            named = f" {_one_line(name, 40)}:" if name else ""
            head = _one_line(text, self.tool_head_chars) if self.tool_head_chars else ""
            shown = f" {head}" if head else ""
            attached = attachments_note(meta)
            failed = ", the call failed" if meta.get("status") == "error" else ""
            return f"{prefix}{named}{shown} ({len(text)} chars of output{failed}){attached}"
        listed = meta.get("tool_calls")
        calls = _tool_calls(listed) if listed else []
        if _CALL_LINE in text:
            # The transcript format appends one {"tool_call": ...} JSON line per call.
            lines = text.splitlines()
            for line in lines:
                if line.startswith(_CALL_LINE):
                    calls.extend(_tool_calls(f"[{line}]"))
            prose = next((ln for ln in lines if not ln.startswith(_CALL_LINE) and ln.strip()), "")
        else:
            prose = _first_line(text)
        names = _once(calls) if calls else []
        sentence = _first_sentence(prose) if prose else ""
        parts = [prefix]
        attached = attachments_note(meta) if meta.get("omitted_content_parts") else ""
        if sentence:
            parts.append(_one_line(sentence, self.max_chars_per_turn))
        elif not names and not attached:
            parts.append("(empty)")
        if names:
            parts.append("calls: " + ", ".join(_one_line(name, 40) for name in names))
        return " ".join(parts) + attached


# A content part's type as the APIs name them (`image_url`, `input_audio`, `file`,
# `input_image`): any other str (the caller's) is shown as "part", so that nothing else of a
# message (no "[seq" a citation would read) reaches the summary.
_PART_TYPE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
# The parts that are the model's own reasoning, not something sent with the message.
_NOT_ATTACHED = frozenset({"thinking", "redacted_thinking", "reasoning"})
_ATTACHED_SHOWN = 6


def attachments(meta: dict[str, str]) -> list[str]:
    """The types of a turn's non-text content parts (an image, audio, a file), each once,
    from the chat adapter's `meta["omitted_content_parts"]`: what an image-only message sent,
    which its (empty) text does not say."""
    parts = meta.get("omitted_content_parts")
    if not parts:
        return []
    try:
        kinds = json.loads(parts)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return []
    names: list[str] = []
    for kind in kinds if isinstance(kinds, list) else []:
        name = kind if isinstance(kind, str) and _PART_TYPE.fullmatch(kind) else "part"
        if name not in names and name not in _NOT_ATTACHED:
            names.append(name)
    return names


def attachments_note(meta: dict[str, str]) -> str:
    """The note a turn line ends with when the turn has such parts (`attachments`):
    ` (attached: image_url, file)`; else the empty string."""
    names = attachments(meta)
    if not names:
        return ""
    more = len(names) - _ATTACHED_SHOWN
    shown = ", ".join(names[:_ATTACHED_SHOWN]) + (f" and {more} more" if more > 0 else "")
    return f" (attached: {shown})"


def _drop_order(turn_lines: list[tuple[int, str, str]]) -> list[int]:
    """The indexes of `turn_lines` in the order `_drop` leaves them out."""
    return sorted(
        range(len(turn_lines)),
        key=lambda index: (_DROP_ORDER.get(turn_lines[index][1], 1), turn_lines[index][0]),
    )


def _drop(
    omitted: _Omitted,
    turn_lines: list[tuple[int, str, str]],
    count: int,
    order: list[int] | None = None,
) -> tuple[_Omitted, list[tuple[int, str, str]]]:
    """Leave out `count` turn lines: tool output first, then the assistant's and system
    lines, the user's last; the oldest first within each (`order`, `_drop_order`'s when
    known). The rest keep their order."""
    if count <= 0:
        return omitted, turn_lines
    if order is None:
        order = _drop_order(turn_lines)
    dropped = set(order[:count])
    left_out = [turn_lines[index][0] for index in sorted(dropped)]
    kept = [entry for index, entry in enumerate(turn_lines) if index not in dropped]
    return omitted.add(left_out), kept


def _compose(notes: list[str], omitted: _Omitted, turn_lines: list[tuple[int, str, str]]) -> str:
    lines = list(notes)
    if omitted.count:
        lines.append(omitted.marker(turn_lines[0][0] if turn_lines else None))
    lines.extend([line for _, _, line in turn_lines])
    return "\n".join(lines)


def _once(calls: list[tuple[str | None, str]]) -> list[str]:
    """Tool names, each call once: a call seen again under the same ID is the same call."""
    seen: set[str] = set()
    names: list[str] = []
    for call_id, name in calls:
        if call_id is not None:
            if call_id in seen:
                continue
            seen.add(call_id)
        names.append(name)
    return names


def _previous_lines(previous_summary: str | None) -> list[str]:
    if not previous_summary:
        return []
    return [line for line in map(str.strip, previous_summary.splitlines()) if line]


def _first_line(text: str) -> str:
    """The first line of `text` that is not blank, as `str.splitlines` cuts it, without its
    leading whitespace (every line break is whitespace); "" when there is none. Only that
    line is scanned, not the whole text."""
    text = text.lstrip()
    found = _LINE_BREAK.search(text)
    return text if found is None else text[: found.start()]


def _first_sentence(line: str) -> str:
    line = line.strip()
    found = _SENTENCE_END.search(line)
    return line if found is None else line[: found.start() + 1]


def _one_line(text: str, limit: int) -> str:
    """`text` with its whitespace runs made one space, stripped, cut to `limit` characters
    (the last one "…" when cut). Only a head of a long text is read: a head's words are a
    head of the text's, so when they are over `limit` so is the text, with the same cut."""
    if len(text) > 2 * limit:
        head = " ".join(text[: 2 * limit].split())
        if len(head) > limit:
            return head[: limit - 1].rstrip() + "…"
    text = " ".join(text.split())
    if len(text) > limit:
        return text[: limit - 1].rstrip() + "…"
    return text


def _tool_calls(tool_calls_json: str | None) -> list[tuple[str | None, str]]:
    """`(id, tool name)` of an OpenAI-style ``tool_calls`` list or ``{"tool_call": ...}``
    lines."""
    if not tool_calls_json:
        return []
    try:
        calls = json.loads(tool_calls_json)
    except (ValueError, RecursionError):
        return []
    found: list[tuple[str | None, str]] = []
    if not isinstance(calls, list):
        return found
    for call in calls:
        if not isinstance(call, dict):
            continue
        call = call.get("tool_call", call)
        if not isinstance(call, dict):
            continue
        # A function call's `function`, a custom tool call's `custom` (openai's `type:
        # "custom"`), or a flat call (`{"tool_call": ...}` lines).
        function = call.get("function", call.get("custom", call))
        name = function.get("name") if isinstance(function, dict) else None
        call_id = call.get("id")
        if isinstance(name, str) and name.strip():
            found.append((call_id if isinstance(call_id, str) else None, name))
    return found
