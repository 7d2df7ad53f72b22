"""Console output shared by the subcommands and the demo: consoles, JSON, escaping, previews
and the context and summary-version tables.

Everything printed from the ledger (bodies, IDs, reasons) goes through `safe_text`, so a
transcript cannot move the cursor, clear the screen, retitle the window or plant a link in
the user's terminal (SPEC §15.7). Tables print as plain tab-separated rows when stdout is not
a terminal, one line per row.
"""

from __future__ import annotations

import errno
import json
import re
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ledgerfold._compactor import CompactionOutcome
from ledgerfold._context import AssembledContext, HistoryBoundary, SummaryItem
from ledgerfold._errors import InvalidInput
from ledgerfold._model import Conversation
from ledgerfold._native import unsendable

__all__ = [
    "PREVIEW_CHARS",
    "boundary_json",
    "context_table",
    "counted",
    "echo_json",
    "elided_caption",
    "esc",
    "label_for",
    "one_line",
    "outcome_json",
    "plural",
    "print_rule",
    "print_table",
    "safe_text",
    "sequence_ranges",
    "stderr_console",
    "stdout_console",
    "tail_ids",
    "text_preview",
    "turn_id_cell",
    "versions_table",
]

PREVIEW_CHARS = 60

_STATUS_STYLE = {
    "current": "green",
    "superseded": "dim",
    "stale": "red",
    "failed": "yellow",
    "rejected": "yellow",
}


# C0 and C1 controls, DEL, and the invisible characters that reorder or break a line
# (bidirectional overrides and isolates, line and paragraph separators).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# json.dumps escapes C0 itself; a C0 character in its output is its own layout.
_UNSAFE_IN_JSON = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "", 1))
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def safe_text(value: object) -> str:
    """`value` as text a terminal shows as is: every control character spelled out
    (ESC as ``\\x1b``, a newline as ``\\n``). Applying it twice changes nothing more."""
    return _UNSAFE.sub(_escaped, str(value))


class _StdoutConsole(Console):
    """A console whose closed stdout (`ledgerfold list DB | head -1`) is the same
    `BrokenPipeError` as `click.echo`'s, which the group turns into its one exit status;
    rich's own reaction is `SystemExit(1)`."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def stdout_console() -> Console:
    console = _StdoutConsole(highlight=False, soft_wrap=False)
    # Piped output is never wrapped at an assumed width: one line stays one line.
    console.soft_wrap = not console.is_terminal
    return console


def stderr_console() -> Console:
    console = Console(stderr=True, highlight=False)
    # A warning written to a log or a pipe stays one line too.
    console.soft_wrap = not console.is_terminal
    return console


def echo_json(value: object) -> None:
    """Strict JSON (no NaN/Infinity); the control characters JSON leaves raw (DEL, C1,
    bidirectional overrides) are written as \\u escapes too."""
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    except ValueError:
        raise InvalidInput(
            "output: holds NaN or Infinity, which JSON cannot carry",
            field="output",
            problem="not-allowed",
        ) from None
    click.echo(_UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text))


def plural(count: int, word: str, words: str | None = None) -> str:
    """`word` as a count of `count` reads it: `turn` for one, `turns` (or `words`) else."""
    return word if count == 1 else words or word + "s"


_ONE = {
    "conversations": "conversation",
    "turns": "turn",
    "summaries": "summary",
    "contexts": "context",
    "versions": "version",
    "messages": "message",
    "keys": "key",
}


def label_for(count: int, label: str) -> str:
    """A label shown with a count, as that count reads it: `live turns` for 2 (and 0),
    `live turn` for 1."""
    return label if count != 1 else " ".join(_ONE.get(word, word) for word in label.split(" "))


def counted(count: int, word: str, words: str | None = None) -> str:
    """`1 turn`, `2 turns`, `1,000 turns`: the count (grouped) and its word."""
    return f"{count:,} {plural(count, word, words)}"


def one_line(text: str) -> str:
    return safe_text(" ".join(text.split()))


def esc(value: object) -> str:
    """Data (IDs, paths, reasons, demo text) inside rich markup, escaped for markup and for
    the terminal."""
    return escape(safe_text(value))


def text_preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = one_line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def print_table(console: Console, table: Table) -> None:
    """`table` as drawn by rich on a terminal; otherwise its title, header and rows as
    tab-separated lines, one line per row, no box drawing and no wrapping."""
    if console.is_terminal:
        console.print(table)
        return
    lines: list[str] = []
    if table.title:
        lines.append(_plain(table.title))
    columns = table.columns
    lines.append("\t".join(_plain(column.header) for column in columns))
    cells = [list(column.cells) for column in columns]
    for row in range(table.row_count):
        lines.append("\t".join(_plain(column[row]) for column in cells))
    _write_lines(console, lines)


def _write_lines(console: Console, lines: list[str]) -> None:
    """Lines as they are (rich would expand tabs), unless the console is quiet."""
    if not console.quiet:
        console.file.write("".join(line + "\n" for line in lines))


class _Elided(Text):
    """A cell a terminal shows shortened; piped rows print `whole`, the value itself."""

    whole: str = ""


def turn_id_cell(turn_id: str, conversation_id: str) -> Text:
    """A turn ID as a terminal table shows it: an imported ID repeats its conversation's
    (`<conversation>:94`), which the table's title names already: `…:94`, so that the
    column stays one line a row. Piped output prints the whole ID."""
    if conversation_id and turn_id.startswith(f"{conversation_id}:"):
        cell = _Elided(safe_text("…" + turn_id[len(conversation_id) :]))
        cell.whole = turn_id
        return cell
    return Text(safe_text(turn_id))


def elided_caption(table: Table, conversation_id: str) -> None:
    """Say what `…:N` stands for under a table that has such cells (terminal only)."""
    if any(isinstance(cell, _Elided) for column in table.columns for cell in column.cells):
        table.caption = Text(safe_text(f"…:N is turn {conversation_id}:N"))
        table.caption_justify = "left"


def _plain(cell: object) -> str:
    if isinstance(cell, _Elided):
        return safe_text(cell.whole)
    if isinstance(cell, Text):
        return safe_text(cell.plain)
    if isinstance(cell, str):
        return safe_text(Text.from_markup(cell).plain)
    return safe_text(cell)


def print_rule(console: Console, title: str) -> None:
    """A section heading: rich's rule on a terminal, a plain line otherwise."""
    if console.is_terminal:
        console.rule(escape(safe_text(title)))
    else:
        _write_lines(console, [f"== {safe_text(title)} =="])


def tail_ids(conversation: Conversation, keep_tail: int) -> frozenset[str]:
    return frozenset(turn.id for turn in conversation.turns[-keep_tail:])


def outcome_json(key: str, value: str, outcome: CompactionOutcome) -> dict[str, Any]:
    """A compaction outcome as `--json` prints it, under `key` (the conversation or step)."""
    summary = outcome.summary
    return {
        key: value,
        "status": outcome.status,
        "reason": outcome.reason,
        "summary": summary.id if summary is not None else None,
        "sources": len(summary.source_ids) if summary is not None else 0,
    }


def boundary_json(boundary: HistoryBoundary | None) -> dict[str, Any] | None:
    if boundary is None:
        return None
    return {
        "through_sequence": boundary.through_sequence,
        "reason": boundary.reason,
        "purged_at": boundary.purged_at,
    }


def context_table(
    context: AssembledContext,
    conversation: Conversation,
    *,
    title: str,
    preview: bool,
    tail_ids: frozenset[str] = frozenset(),
) -> Table:
    """One row per context item: sequence, kind/role, id, why it is raw or what it
    covers, and its text (a short preview, or its length when `preview` is False)."""
    table = Table(
        title=Text(safe_text(title)),
        title_justify="left",
        expand=True,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("kind/role", no_wrap=True)
    table.add_column("id", overflow="fold", max_width=24)
    table.add_column("raw because / covers", no_wrap=True)
    table.add_column("text" if preview else "chars", overflow="fold", ratio=1, min_width=24)
    # A raw turn in the summary's span is one the summary may not take (its role, an open
    # tool call, a group held whole): say so, as the inspector page does.
    through = context.summary.through_sequence if context.summary is not None else None
    # Items the chat messages leave out (a call without its results, a result without its
    # call: SPEC §17.2), as `--json` and the inspector page show.
    unsent = frozenset(unsendable(context.items)) if context.dropped else frozenset()
    for at, item in enumerate(context.items):
        if isinstance(item, SummaryItem):
            table.add_row(
                f"≤{item.through_sequence}",
                Text("SUMMARY", style="bold"),
                Text(safe_text(item.id)),
                f"{len(item.source_ids)} {plural(len(item.source_ids), 'turn')}",
                Text(text_preview(item.text) if preview else str(len(item.text))),
                style="magenta",
            )
            continue
        turn = conversation.get(item.id)
        note = ""
        if turn is not None and turn.protected:
            note = f"[bold yellow]{esc(turn.protection_reason or 'protected')}[/]"
        elif item.id in tail_ids:
            note = "[cyan]tail[/]"
        elif through is not None and item.sequence < through:
            note = "preserved" + (f" ({item.role} role)" if item.role == "system" else "")
        elif through is not None:
            note = "after the summary"
        elif context.fallback is not None:  # no summary in use: every turn raw, say why
            note = "no summary yet" if context.fallback == "no-summary" else "fallback"
        if at in unsent:
            note = "[red]not sent[/] (unpaired tool call or result)"
        table.add_row(
            str(item.sequence),
            item.role,
            turn_id_cell(item.id, conversation.id),
            note,
            Text(text_preview(item.text) if preview else str(len(item.text))),
        )
    elided_caption(table, conversation.id)
    return table


def versions_table(versions: list[dict[str, Any]]) -> Table:
    """Summary versions, oldest first (rows as `inspect --json` prints them)."""
    table = Table(title="summary versions (oldest first)", title_justify="left", expand=True)
    for column in ("id", "status", "reason", "created_at", "sources", "fingerprint"):
        table.add_column(column, overflow="fold")
    for version in versions:
        status = version["status"]
        fingerprint = version["fingerprint"]
        table.add_row(
            Text(safe_text(version["id"] or f"(plan {version['plan_id']})")),
            Text(status, style=_STATUS_STYLE.get(status, "")),
            Text(safe_text(version["reason"] or "")),
            Text(safe_text(version["created_at"][:19].replace("T", " "))),
            str(version["sources"]),
            Text((fingerprint[:16] + "…") if fingerprint else ""),
        )
    return table


def sequence_ranges(sequences: list[int]) -> str:
    """`[1, 2, 3, 5]` -> `1-3, 5`."""
    parts: list[tuple[int, int]] = []
    for sequence in sorted(sequences):
        if parts and parts[-1][1] == sequence - 1:
            parts[-1] = (parts[-1][0], sequence)
        else:
            parts.append((sequence, sequence))
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts) or "none"
