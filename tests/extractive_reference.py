"""The slow reference of `ExtractiveSummarizer` (SPEC §13): its code as it was before the
per-turn work was cut (a turn line split the whole body and looked at every line; the budget
was met by composing and counting the text at each step of the bisection; `approx_tokens`
tried its class of wide ranges at each character). The differential tests
(`test_extractive_differential.py`) check that the package's summarizer writes the same text
for the same request, byte for byte. Keep it as it is: it is the oracle, not the code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ledgerfold import _validate
from ledgerfold._context import RECALL_PROMISE
from ledgerfold._worker import pause
from ledgerfold.tokens import _WIDE

if TYPE_CHECKING:
    from ledgerfold.summarizers._base import SummaryRequest

__all__ = ["ReferenceExtractiveSummarizer", "approx_tokens"]


def approx_tokens(text: str) -> int:
    """`ledgerfold.tokens.approx_tokens` as it was: `_WIDE` tried at each character."""
    if text.isascii():
        return (len(text) + 3) // 4
    wide = len(_WIDE.findall(text))
    narrow = len(text) - wide
    return wide + (narrow + 3) // 4


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
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|(?<=[。！？])")
_WHITESPACE = re.compile(r"\s+")


class ReferenceExtractiveSummarizer:
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
            f"ReferenceExtractiveSummarizer(max_chars_per_turn={self.max_chars_per_turn}, "
            f"max_turns={self.max_turns}, tool_head_chars={self.tool_head_chars})"
        )

    def __call__(self, request: SummaryRequest) -> str:
        fresh_sequences = {turn.sequence for turn in request.turns}
        omitted = _Omitted(purged=getattr(request, "purged_through", None))
        notes: list[str] = []  # previous lines that are not about a turn
        turn_lines: list[tuple[int, str, str]] = []  # (sequence, role, line)
        previous = _previous_lines(request.previous_summary)
        kept_first = min(
            (int(found.group(1)) for found in map(_TURN_LINE.match, previous) if found),
            default=None,
        )
        for line in previous:
            omitted_match = OMITTED_LINE.match(line)
            if omitted_match:
                omitted = _read_marker(omitted_match, omitted, kept_first)
                continue
            turn_match = _TURN_LINE.match(line)
            if turn_match is None:
                notes.append(line)
            elif int(turn_match.group(1)) not in fresh_sequences:
                turn_lines.append((int(turn_match.group(1)), turn_match.group(2), line))
        turn_lines.extend(
            (turn.sequence, turn.role, self._turn_line(turn)) for turn in request.turns
        )
        turn_lines.sort(key=lambda entry: entry[0])  # stable: ties keep their order
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
        low, high = 0, len(turn_lines)  # turn lines kept
        while low < high:
            keep = (low + high + 1) // 2
            candidate = _compose(notes, *_drop(omitted, turn_lines, len(turn_lines) - keep))
            if self.token_counter(candidate) <= budget:
                low = keep
            else:
                high = keep - 1
        text = _compose(notes, *_drop(omitted, turn_lines, len(turn_lines) - low))
        if self.token_counter(text) > budget:  # the notes alone are over: cut the text
            text = self._head(text, budget)
        return text

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
        pause()  # on a store's worker (a compaction's job), the loop may take the GIL
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
        calls = _tool_calls(meta.get("tool_calls"))
        prose_lines = []
        for line in text.splitlines():
            # The transcript format appends one {"tool_call": ...} JSON line per call.
            if line.startswith('{"tool_call":'):
                calls.extend(_tool_calls(f"[{line}]"))
            elif line.strip():
                prose_lines.append(line)
        names = _once(calls)
        sentence = _first_sentence(prose_lines[0]) if prose_lines else ""
        parts = [prefix]
        attached = attachments_note(meta)
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
    try:
        kinds = json.loads(meta.get("omitted_content_parts") or "[]")
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


def _drop(
    omitted: _Omitted, turn_lines: list[tuple[int, str, str]], count: int
) -> tuple[_Omitted, list[tuple[int, str, str]]]:
    """Leave out `count` turn lines: tool output first, then the assistant's and system
    lines, the user's last; the oldest first within each. The rest keep their order."""
    if count <= 0:
        return omitted, turn_lines
    order = sorted(
        range(len(turn_lines)),
        key=lambda index: (_DROP_ORDER.get(turn_lines[index][1], 1), turn_lines[index][0]),
    )
    dropped = set(order[:count])
    left_out = [turn_lines[index][0] for index in sorted(dropped)]
    kept = [entry for index, entry in enumerate(turn_lines) if index not in dropped]
    return omitted.add(left_out), kept


def _compose(notes: list[str], omitted: _Omitted, turn_lines: list[tuple[int, str, str]]) -> str:
    lines = list(notes)
    if omitted.count:
        lines.append(omitted.marker(turn_lines[0][0] if turn_lines else None))
    lines.extend(line for _, _, line in turn_lines)
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
    return [line.strip() for line in previous_summary.splitlines() if line.strip()]


def _first_sentence(line: str) -> str:
    return _SENTENCE_END.split(line.strip(), maxsplit=1)[0]


def _one_line(text: str, limit: int) -> str:
    text = _WHITESPACE.sub(" ", text).strip()
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
