"""`ExtractiveSummarizer`: the built-in deterministic, offline summarizer (SPEC §13).

It makes no model call: one line per compacted turn with its sequence, role and first
sentence (tool output reduced to its size), after the still-relevant lines of the
previous summary. The same request always gives the same text, which makes it the
default for demos and tests and a safe fallback when no model is available.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ledgerfold import _validate

if TYPE_CHECKING:
    from ledgerfold.summarizers.base import SummaryRequest

__all__ = ["ExtractiveSummarizer"]

# A line this summarizer wrote for a turn: "[seq 12 user] ...".
_TURN_LINE = re.compile(r"^\[seq (\d+) [a-z]+[^\]]*\]")
# The line that counts turn lines dropped by `max_turns`.
_OMITTED_LINE = re.compile(r"^\[(\d+) earlier turn lines omitted\]$")
# The end of a first sentence: Latin punctuation before a space, or CJK full stops.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|(?<=[。！？])")
_WHITESPACE = re.compile(r"\s+")


class ExtractiveSummarizer:
    """Summarise by extraction: deterministic, offline, never blank for non-empty input.

    - Lines of the previous summary are kept (rolling summaries) unless they describe a
      turn of this request, which gets a fresh line instead — so re-compacting the same
      turns never duplicates them.
    - Each turn becomes ``[seq N role] first sentence…`` cut to `max_chars_per_turn`;
      tool turns become ``[seq N tool] <n> chars of output``; calls an assistant turn
      makes are listed by tool name.
    - `max_turns` (optional) keeps only the newest turn lines and counts the rest.
    """

    def __init__(self, max_chars_per_turn: int = 160, max_turns: int | None = None) -> None:
        self.max_chars_per_turn = _validate.integer(
            "max_chars_per_turn", max_chars_per_turn, minimum=8
        )
        if max_turns is not None:
            _validate.integer("max_turns", max_turns, minimum=1)
        self.max_turns = max_turns

    def __repr__(self) -> str:
        return (
            f"ExtractiveSummarizer(max_chars_per_turn={self.max_chars_per_turn}, "
            f"max_turns={self.max_turns})"
        )

    def __call__(self, request: SummaryRequest) -> str:
        fresh_sequences = {turn.sequence for turn in request.turns}
        omitted = 0
        notes: list[str] = []  # previous lines that are not about a turn
        turn_lines: list[tuple[int, str]] = []
        for line in _previous_lines(request.previous_summary):
            omitted_match = _OMITTED_LINE.match(line)
            if omitted_match:
                omitted += int(omitted_match.group(1))
                continue
            turn_match = _TURN_LINE.match(line)
            if turn_match is None:
                notes.append(line)
            elif int(turn_match.group(1)) not in fresh_sequences:
                turn_lines.append((int(turn_match.group(1)), line))
        turn_lines.extend((turn.sequence, self._turn_line(turn)) for turn in request.turns)
        turn_lines.sort(key=lambda pair: pair[0])  # stable: ties keep their order
        if self.max_turns is not None and len(turn_lines) > self.max_turns:
            omitted += len(turn_lines) - self.max_turns
            turn_lines = turn_lines[-self.max_turns :]
        lines = list(notes)
        if omitted:
            lines.append(f"[{omitted} earlier turn lines omitted]")
        lines.extend(line for _, line in turn_lines)
        return "\n".join(lines)

    def _turn_line(self, turn: Any) -> str:
        prefix = f"[seq {turn.sequence} {turn.role}]"
        meta: dict[str, str] = turn.meta or {}
        text: str = turn.text
        if turn.role == "tool":
            name = meta.get("name")
            named = f" {_one_line(name, 40)}" if name else ""
            return f"{prefix}{named} {len(text)} chars of output"
        calls = _tool_call_names(meta.get("tool_calls"))
        prose_lines = []
        for line in text.splitlines():
            # The transcript format appends one {"tool_call": ...} JSON line per call.
            if line.startswith('{"tool_call":'):
                calls.extend(_tool_call_names(f"[{line}]"))
            elif line.strip():
                prose_lines.append(line)
        sentence = _first_sentence(prose_lines[0]) if prose_lines else ""
        parts = [prefix]
        if sentence:
            parts.append(_one_line(sentence, self.max_chars_per_turn))
        elif not calls:
            parts.append("(empty)")
        if calls:
            parts.append("calls: " + ", ".join(_one_line(name, 40) for name in calls))
        return " ".join(parts)


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


def _tool_call_names(tool_calls_json: str | None) -> list[str]:
    """Tool names of an OpenAI-style ``tool_calls`` list or of ``{"tool_call": ...}`` lines."""
    if not tool_calls_json:
        return []
    try:
        calls = json.loads(tool_calls_json)
    except ValueError:
        return []
    names: list[str] = []
    if not isinstance(calls, list):
        return names
    for call in calls:
        if not isinstance(call, dict):
            continue
        call = call.get("tool_call", call)
        function = call.get("function", call) if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name.strip():
            names.append(name)
    return names
