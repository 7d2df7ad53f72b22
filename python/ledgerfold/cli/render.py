"""Console output shared by the subcommands and the demo: consoles, JSON, escaping, previews
and the context and summary-version tables."""

from __future__ import annotations

import json
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ledgerfold.context import AssembledContext, HistoryBoundary, SummaryItem
from ledgerfold.model import Conversation

__all__ = [
    "PREVIEW_CHARS",
    "boundary_json",
    "context_table",
    "echo_json",
    "esc",
    "one_line",
    "sequence_ranges",
    "stderr_console",
    "stdout_console",
    "tail_ids",
    "text_preview",
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


def stdout_console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def echo_json(value: object) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def one_line(text: str) -> str:
    return " ".join(text.split())


def esc(value: object) -> str:
    """Data (IDs, paths, reasons, demo text) inside rich markup, escaped."""
    return escape(str(value))


def text_preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = one_line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def tail_ids(conversation: Conversation, keep_tail: int) -> frozenset[str]:
    return frozenset(turn.id for turn in conversation.turns[-keep_tail:])


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
        title=Text(title), title_justify="left", expand=True, box=box.SIMPLE_HEAD, pad_edge=False
    )
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("kind/role", no_wrap=True)
    table.add_column("id", overflow="fold", max_width=24)
    table.add_column("raw because / covers", no_wrap=True)
    table.add_column("text" if preview else "chars", overflow="fold", ratio=1, min_width=24)
    for item in context.items:
        if isinstance(item, SummaryItem):
            table.add_row(
                f"≤{item.through_sequence}",
                Text("SUMMARY", style="bold"),
                Text(item.id),
                f"{len(item.source_ids)} turns",
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
        table.add_row(
            str(item.sequence),
            item.role,
            Text(item.id),
            note,
            Text(text_preview(item.text) if preview else str(len(item.text))),
        )
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
            Text(version["id"] or f"(plan {version['plan_id']})"),
            Text(status, style=_STATUS_STYLE.get(status, "")),
            Text(version["reason"] or ""),
            Text(version["created_at"][:19].replace("T", " ")),
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
