"""The `ledgerfold` command line (SPEC §14), built with click and rich.

Subcommands: `demo`, `import`, `compact`, `context`, `inspect`, `purge`, `revalidate`.
A user error (missing file, unknown conversation, bad argument, a database that is not a
ledgerfold store, a directory) prints one line, ``ledgerfold: error: ...``, to stderr and
exits 2. Error lines name paths, IDs and fields, never turn bodies or summary text.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from ledgerfold.adapters.chat import to_chat_messages
from ledgerfold.compactor import CompactionOutcome, CompactionPolicy, Compactor
from ledgerfold.context import AssembledContext, HistoryBoundary, SummaryItem
from ledgerfold.errors import InvalidInput, LedgerfoldError
from ledgerfold.export import DEFAULT_TURNS_PER_FILE, export_parquet
from ledgerfold.model import Conversation, Turn
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import SQLiteStore
from ledgerfold.summarizers import ExtractiveSummarizer
from ledgerfold.transcripts import Transcript, iter_transcripts

__all__ = ["cli", "main"]

_log = logging.getLogger("ledgerfold.cli")

#: Exit status of every user error.
USAGE_EXIT = 2
DEFAULT_POLICY = "v1"
PREVIEW_CHARS = 60


class UserError(click.ClickException):
    """A mistake of the caller: one line on stderr, exit status 2."""

    exit_code = USAGE_EXIT


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _report_error(message: str) -> None:
    click.echo(f"ledgerfold: error: {_one_line(message)}", err=True)


class _Group(click.Group):
    """A group whose errors are one stderr line and exit 2, also under `CliRunner`."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        code: int
        try:
            result = super().main(
                args, prog_name or "ledgerfold", complete_var, standalone_mode=False, **extra
            )
            code = result if isinstance(result, int) and not isinstance(result, bool) else 0
        except click.exceptions.Abort:
            _report_error("aborted")
            code = 130
        except click.ClickException as error:
            _report_error(error.format_message())
            code = USAGE_EXIT
        except LedgerfoldError as error:
            # Every ledgerfold message names fields and IDs, never bodies (SPEC §10).
            _report_error(str(error))
            code = USAGE_EXIT
        except OSError as error:
            _report_error(f"{error.filename or 'file'}: {error.strerror or error}")
            code = USAGE_EXIT
        if standalone_mode:
            sys.exit(code)
        return code


def main(args: Sequence[str] | None = None, prog_name: str = "ledgerfold") -> NoReturn:
    """Entry point of the `ledgerfold` console script."""
    cli.main(args, prog_name=prog_name, standalone_mode=True)
    raise SystemExit(0)  # pragma: no cover - cli.main always exits


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ledgerfold", prog_name="ledgerfold")
@click.option(
    "-v", "--verbose", is_flag=True, help="Log ledgerfold records (IDs, counts) to stderr."
)
def cli(verbose: bool) -> None:
    """Versioned, verifiable compaction of agent conversations."""
    root = logging.getLogger("ledgerfold")
    if verbose:
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.INFO)
    else:
        # Library records stay quiet unless asked for (no "last resort" stderr lines).
        handler = logging.NullHandler()
    if not any(type(existing) is type(handler) for existing in root.handlers):
        root.addHandler(handler)


# --------------------------------------------------------------------------- helpers


def _stdout() -> Console:
    return Console(highlight=False, soft_wrap=False)


def _stderr() -> Console:
    return Console(stderr=True, highlight=False)


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


@contextmanager
def _open_store(db: str, *, create: bool = False) -> Iterator[SQLiteStore]:
    """Open an existing ledgerfold database (or create one when `create`)."""
    path = Path(db)
    if path.is_dir():
        raise UserError(f"{db}: is a directory, not a database file")
    if not path.exists():
        if not create:
            raise UserError(f"{db}: no such database")
        if not path.parent.is_dir():
            raise UserError(f"{db}: the directory {str(path.parent)!r} does not exist")
    store = SQLiteStore(path)  # StoreError (not ours, not SQLite) becomes one error line
    try:
        yield store
    finally:
        store.close()


def _require_conversation(store: SQLiteStore, conversation_id: str) -> None:
    if conversation_id not in store.conversation_ids():
        raise UserError(f"unknown conversation {conversation_id!r}")


def _e(value: object) -> str:
    """Data (IDs, paths, reasons, demo text) inside rich markup, escaped."""
    return escape(str(value))


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    flat = _one_line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _context_table(
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
                Text(_preview(item.text) if preview else str(len(item.text))),
                style="magenta",
            )
            continue
        turn = conversation.get(item.id)
        note = ""
        if turn is not None and turn.protected:
            note = f"[bold yellow]{_e(turn.protection_reason or 'protected')}[/]"
        elif item.id in tail_ids:
            note = "[cyan]tail[/]"
        table.add_row(
            str(item.sequence),
            item.role,
            Text(item.id),
            note,
            Text(_preview(item.text) if preview else str(len(item.text))),
        )
    return table


def _boundary_json(boundary: HistoryBoundary | None) -> dict[str, Any] | None:
    if boundary is None:
        return None
    return {
        "through_sequence": boundary.through_sequence,
        "reason": boundary.reason,
        "purged_at": boundary.purged_at,
    }


def _tail_ids(conversation: Conversation, keep_tail: int) -> frozenset[str]:
    return frozenset(turn.id for turn in conversation.turns[-keep_tail:])


# --------------------------------------------------------------------------- import


def _turn_spec(turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "role": turn.role,
        "body": turn.body,
        "protected": turn.protected,
        "protection_reason": turn.protection_reason,
        "group": turn.group,
        "meta": turn.meta,
    }


@cli.command("import")
@click.argument("db")
@click.argument("files", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def import_command(db: str, files: tuple[str, ...], as_json: bool) -> None:
    """Import JSONL transcripts (shared/data format) into DB, creating it if needed.

    A conversation already in DB is skipped with a note, so importing twice is harmless.
    """
    for name in files:
        path = Path(name)
        if path.is_dir():
            raise UserError(f"{name}: is a directory, not a transcript file")
        if not path.is_file():
            raise UserError(f"{name}: no such file")
    # Parse everything first: a malformed line imports nothing.
    transcripts: list[Transcript] = []
    for name in files:
        transcripts.extend(iter_transcripts(name))
    imported = skipped = turns = 0
    notes: list[str] = []
    with _open_store(db, create=True) as store:
        existing = set(store.conversation_ids())
        for transcript in transcripts:
            if transcript.conversation_id in existing:
                skipped += 1
                notes.append(f"skipped {transcript.conversation_id!r}: already in the database")
                continue
            written = store.append_many(
                transcript.conversation_id, [_turn_spec(turn) for turn in transcript.turns]
            )
            existing.add(transcript.conversation_id)
            imported += 1
            turns += len(written)
    _log.info("import: conversations=%d turns=%d skipped=%d", imported, turns, skipped)
    if as_json:
        _echo_json({"conversations": imported, "turns": turns, "skipped": skipped})
        return
    err = _stderr()
    for note in notes:
        err.print(Text(f"note: {note}", style="dim"))
    _stdout().print(
        f"imported [bold]{imported}[/] conversations, [bold]{turns}[/] turns"
        + (f"; skipped {skipped} already present" if skipped else "")
    )


# --------------------------------------------------------------------------- compact


def _outcome_json(conversation_id: str, outcome: CompactionOutcome) -> dict[str, Any]:
    summary = outcome.summary
    return {
        "conversation": conversation_id,
        "status": outcome.status,
        "reason": outcome.reason,
        "summary": summary.id if summary is not None else None,
        "sources": len(summary.source_ids) if summary is not None else 0,
    }


@cli.command("compact")
@click.argument("db")
@click.option("--conversation", "conversation_id", help="Only this conversation.")
@click.option("--keep-tail", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--policy-version", default=DEFAULT_POLICY, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
def compact_command(
    db: str, conversation_id: str | None, keep_tail: int, policy_version: str, as_json: bool
) -> None:
    """Force-compact conversations with the built-in ExtractiveSummarizer."""
    if not policy_version.strip():
        raise UserError("--policy-version: must not be blank")
    with _open_store(db) as store:
        if conversation_id is not None:
            _require_conversation(store, conversation_id)
            ids = [conversation_id]
        else:
            ids = store.conversation_ids()
        compactor = Compactor(
            store, CompactionPolicy(policy_version, keep_tail=keep_tail), ExtractiveSummarizer()
        )
        rows = [_outcome_json(cid, compactor.compact(cid, force=True)) for cid in ids]
    if as_json:
        _echo_json(rows)
        return
    table = Table(title=Text(f"compaction (policy {policy_version}, keep tail {keep_tail})"))
    for column in ("conversation", "status", "reason", "summary", "sources"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(str(row[key]) if row[key] is not None else "") for key in row))
    console = _stdout()
    console.print(table)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    console.print(
        Text(", ".join(f"{status}: {n}" for status, n in sorted(counts.items())) or "none")
    )


# --------------------------------------------------------------------------- context


@cli.command("context")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--policy-version", default=DEFAULT_POLICY, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print chat messages as JSON.")
@click.option("--preview", is_flag=True, help="Show a short text preview instead of lengths.")
def context_command(
    db: str, conversation_id: str, policy_version: str, as_json: bool, preview: bool
) -> None:
    """Print the assembled model context of CONVERSATION."""
    with _open_store(db) as store:
        _require_conversation(store, conversation_id)
        context = store.context(conversation_id, policy_version)
        conversation = store.load(conversation_id)
    if as_json:
        summary = context.summary
        _echo_json(
            {
                "conversation": conversation_id,
                "policy_version": policy_version,
                "summary": summary.id if summary is not None else None,
                "fallback": context.fallback,
                "history_boundary": _boundary_json(context.history_boundary),
                "messages": to_chat_messages(context),
            }
        )
        return
    console = _stdout()
    console.print(
        _context_table(
            context, conversation, title=f"context of {conversation_id}", preview=preview
        )
    )
    _print_context_status(console, context)


def _print_context_status(console: Console, context: AssembledContext) -> None:
    if context.fallback is None:
        summary = context.summary
        console.print(f"summary in use: [magenta]{_e(summary.id if summary else '-')}[/]")
    else:
        console.print(f"fallback: [bold red]{_e(context.fallback)}[/] (every turn raw)")
    if context.history_boundary is not None:
        boundary = context.history_boundary
        console.print(
            f"history boundary: turns through sequence {boundary.through_sequence} were purged"
            f" ({_e(boundary.reason)}); the agent continues from retained history only"
        )


# --------------------------------------------------------------------------- inspect


@cli.command("inspect")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def inspect_command(db: str, conversation_id: str, as_json: bool) -> None:
    """Show summary versions, the current summary's sources and the history boundary."""
    with _open_store(db) as store:
        _require_conversation(store, conversation_id)
        conversation = store.load(conversation_id)
        history = store.summary_history(conversation_id)
        current = store.current_summary(conversation_id)
        sources = store.sources_of(current.id) if current is not None else []
        boundary = store.history_boundary(conversation_id)
    versions = [
        {
            "id": record.envelope.id if record.envelope is not None else None,
            "plan_id": record.plan_id,
            "status": record.status,
            "reason": record.reason,
            "created_at": record.created_at,
            "policy_version": record.envelope.policy_version if record.envelope else None,
            "sources": len(record.envelope.source_ids) if record.envelope else 0,
            "fingerprint": record.envelope.source_fingerprint if record.envelope else None,
        }
        for record in history
    ]
    report = {
        "conversation": conversation_id,
        "revision": conversation.revision,
        "turns": len(conversation),
        "current_summary": current.id if current is not None else None,
        "versions": versions,
        "sources": [{"id": turn.id, "sequence": turn.sequence} for turn in sources],
        "history_boundary": _boundary_json(boundary),
    }
    if as_json:
        _echo_json(report)
        return
    console = _stdout()
    console.print(
        f"conversation [bold]{_e(conversation_id)}[/]: revision {conversation.revision},"
        f" {len(conversation)} turns"
    )
    console.print(_versions_table(versions))
    if current is not None:
        ranges = _sequence_ranges([turn.sequence for turn in sources])
        console.print(
            f"current summary [magenta]{_e(current.id)}[/] covers {len(sources)} turns"
            f" (sequences {ranges})"
        )
    else:
        console.print("no current summary")
    if boundary is not None:
        console.print(
            f"history boundary: through sequence {boundary.through_sequence}"
            f" ({_e(boundary.reason)}, {boundary.purged_at})"
        )
    else:
        console.print("history boundary: none (no turns purged)")


_STATUS_STYLE = {
    "current": "green",
    "superseded": "dim",
    "stale": "red",
    "failed": "yellow",
    "rejected": "yellow",
}


def _versions_table(versions: list[dict[str, Any]]) -> Table:
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


def _sequence_ranges(sequences: list[int]) -> str:
    """`[1, 2, 3, 5]` -> `1-3, 5`."""
    parts: list[tuple[int, int]] = []
    for sequence in sorted(sequences):
        if parts and parts[-1][1] == sequence - 1:
            parts[-1] = (parts[-1][0], sequence)
        else:
            parts.append((sequence, sequence))
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts) or "none"


# --------------------------------------------------------------------------- purge


@cli.command("purge")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--through", "through", type=click.IntRange(min=0), required=True)
@click.option("--reason", required=True, help="Why (recorded with the boundary).")
@click.option("--force", is_flag=True, help="Also purge protected turns.")
def purge_command(db: str, conversation_id: str, through: int, reason: str, force: bool) -> None:
    """Retention: delete the bodies of raw turns through sequence --through."""
    if not reason.strip():
        raise UserError("--reason: must not be blank")
    with _open_store(db) as store:
        _require_conversation(store, conversation_id)
        boundary = store.purge_through(conversation_id, through, reason, force=force)
    _stdout().print(
        f"purged {_e(conversation_id)}: raw turns through sequence {boundary.through_sequence}"
        f" ({_e(boundary.reason)}) at {boundary.purged_at}"
        + ("" if force else "; protected turns kept")
    )


# --------------------------------------------------------------------------- revalidate


@cli.command("revalidate")
@click.argument("db")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Conversations checked at once, one core each (each reads DB through its own"
    " read-only connection).  [default: every available core]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def revalidate_command(db: str, workers: int | None, as_json: bool) -> None:
    """Deep-check every current summary against its re-hashed source turns; mark the ones
    that no longer match as stale."""
    with _open_store(db):  # one clear line for a missing file, a directory, a foreign DB
        pass
    show_progress = sys.stderr.isatty() and not as_json
    if show_progress:
        with Progress(console=_stderr(), transient=True) as progress:
            task = progress.add_task("revalidating", total=None)
            report = revalidate_database(
                db, workers=workers, progress=lambda done: progress.advance(task, done)
            )
    else:
        report = revalidate_database(db, workers=workers)
    if as_json:
        _echo_json(report.as_json())
        return
    console = _stdout()
    console.print(
        f"checked {report.summaries_checked} current summaries in"
        f" {report.conversations} conversations: [green]{report.current} current[/],"
        f" [red]{report.stale} stale[/]; re-hashed {report.turns_hashed} turns"
        f" ({report.bytes_hashed:,} bytes) in {report.seconds:.2f} s"
        f" with {report.workers} worker(s)"
    )
    if report.stale_summaries:
        table = Table(title="stale summaries (now marked stale)", title_justify="left")
        for column in ("conversation", "summary", "reason", "turn"):
            table.add_column(column, overflow="fold")
        for item in report.stale_summaries:
            table.add_row(
                Text(item.conversation_id),
                Text(item.summary_id),
                Text(item.reason),
                Text(item.turn_id or ""),
            )
        console.print(table)


# --------------------------------------------------------------------------- export


@cli.command("export")
@click.argument("db")
@click.option(
    "--parquet",
    "out_dir",
    required=True,
    metavar="DIR",
    help="Write Parquet here (a new or empty directory): turns, summaries, sources.",
)
@click.option(
    "--turns-per-file",
    type=click.IntRange(min=1),
    default=DEFAULT_TURNS_PER_FILE,
    show_default=True,
    help="About this many turns a part; a conversation never spans two parts.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def export_command(db: str, out_dir: str, turns_per_file: int, as_json: bool) -> None:
    """Export DB as Parquet, partitioned by conversation (for `ledgerfold.dask`)."""
    with _open_store(db):  # one clear line for a missing file, a directory, a foreign DB
        pass
    try:
        report = export_parquet(db, out_dir, turns_per_file=turns_per_file)
    except ImportError as error:
        raise UserError(str(error)) from None
    except InvalidInput as error:
        if error.field != "out_dir":
            raise
        raise UserError("--parquet: " + str(error).removeprefix("out_dir: ")) from None
    if as_json:
        _echo_json(report.as_json())
        return
    _stdout().print(
        f"exported [bold]{report.conversations}[/] conversations, [bold]{report.turns}[/] turns,"
        f" {report.summaries} summaries and {report.summary_sources} source rows in"
        f" {report.parts} part(s) to {_e(report.out_dir)} in {report.seconds:.2f} s"
    )


# --------------------------------------------------------------------------- demo

_DEMO_POLICY = "demo-v1"
_DEMO_KEEP_TAIL = 6


def _call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, str]:
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
    ]
    return {"tool_calls": json.dumps(calls, separators=(",", ":"))}


def _demo_turns() -> list[dict[str, Any]]:
    """A few dozen synthetic turns of a file-organising agent (the demo's own text)."""
    turns: list[dict[str, Any]] = []

    def add(role: str, body: str, **extra: Any) -> None:
        turns.append({"id": f"m{len(turns) + 1}", "role": role, "body": body, **extra})

    def tool_round(call_id: str, name: str, args: dict[str, str], result: str, say: str) -> None:
        group = f"tools:{call_id}"
        add("assistant", say, group=group, meta=_call(call_id, name, args))
        add("tool", result, group=group, meta={"tool_call_id": call_id, "name": name})

    add("system", "You are a file-organising assistant running on this laptop.")
    add("user", "Help me tidy the project folder and tell me what is in it.")
    add(
        "user",
        "Only read local files: never upload or send anything anywhere.",
        protected=True,
        protection_reason="active-constraint",
    )
    add("assistant", "Understood: I will only read local files.")
    tool_round(
        "c1",
        "list_dir",
        {"path": "."},
        "report.md notes.txt draft-old.md tmp1.log tmp2.log tmp3.log",
        "Listing the project folder.",
    )
    add("assistant", "The folder holds six files: two documents, an old draft and three logs.")
    add("user", "What is in report.md?")
    tool_round(
        "c2",
        "read_file",
        {"path": "report.md"},
        "# Q3 report. Revenue grew 12%. Costs fell 3%.",
        "Reading report.md.",
    )
    add("assistant", "report.md is the Q3 report: revenue grew 12% and costs fell 3%.")
    add("user", "And notes.txt?")
    tool_round(
        "c3",
        "read_file",
        {"path": "notes.txt"},
        "- call the printer vendor\n- archive the old draft",
        "Reading notes.txt.",
    )
    add("assistant", "notes.txt has two to-dos: call the printer vendor; archive the old draft.")
    add(
        "assistant",
        "Shall I delete tmp1.log, tmp2.log and tmp3.log? I am waiting for your confirmation.",
        protected=True,
        protection_reason="pending-confirmation",
    )
    add("user", "Let me think about that. Meanwhile, what is in draft-old.md?")
    tool_round(
        "c4",
        "read_file",
        {"path": "draft-old.md"},
        "Outline: intro, revenue, costs, outlook.",
        "Reading draft-old.md.",
    )
    add("assistant", "draft-old.md is an early outline of the Q3 report.")
    add(
        "user",
        "From now on work only on the selected files: report.md and notes.txt.",
        protected=True,
        protection_reason="active-constraint",
    )
    add("assistant", "Noted: only report.md and notes.txt from here on.")
    add("user", "Summarise both in one paragraph.")
    add("assistant", "Q3 revenue grew 12% while costs fell 3%; two to-dos remain open.")
    add("user", "Which to-do is more urgent?")
    add("assistant", "Calling the printer vendor: the notes mark it first.")
    add("user", "How many words are in report.md?")
    tool_round("c5", "word_count", {"path": "report.md"}, "412", "Counting words in report.md.")
    add("assistant", "report.md has 412 words.")
    return turns


def _demo_conversation_id(store: SQLiteStore) -> str:
    existing = set(store.conversation_ids())
    candidate, n = "demo", 1
    while candidate in existing:
        n += 1
        candidate = f"demo-{n}"
    return candidate


def _run_demo(console: Console, db_path: Path) -> None:
    rule = console.rule
    with SQLiteStore(db_path) as store:
        cid = _demo_conversation_id(store)
        policy = CompactionPolicy(_DEMO_POLICY, keep_tail=_DEMO_KEEP_TAIL)
        numbers = iter(range(1, 1_000_000))
        compactor = Compactor(
            store,
            policy,
            ExtractiveSummarizer(max_chars_per_turn=80),
            summary_id_factory=lambda: f"{cid}-summary-{next(numbers)}",
        )

        rule("1. A conversation lands in the ledger")
        store.append_many(cid, _demo_turns())
        conversation = store.load(cid)
        protected = [turn for turn in conversation.turns if turn.protected]
        groups = {turn.group for turn in conversation.turns if turn.group}
        console.print(
            f"conversation [bold]{_e(cid)}[/] in {_e(db_path)}: {len(conversation)} turns,"
            f" {len(protected)} protected, {len(groups)} tool-call groups"
        )
        for turn in protected:
            console.print(
                f"  protected [yellow]{turn.protection_reason}[/] {turn.id} (seq {turn.sequence}):"
                f" {_e(_preview(turn.body, 90))}"
            )

        rule(f"2. Compact (ExtractiveSummarizer, keep_tail={_DEMO_KEEP_TAIL})")
        first = compactor.compact(cid)
        _print_outcome(console, first)
        _show_context(console, store, cid, "context after compaction")
        context = store.context(cid, _DEMO_POLICY)
        conversation = store.load(cid)
        raw_ids = {item.id for item in context.items if not isinstance(item, SummaryItem)}
        tail = _tail_ids(conversation, _DEMO_KEEP_TAIL)
        summary = context.summary
        ok_protected = all(turn.id in raw_ids for turn in protected)
        ok_tail = tail <= raw_ids
        console.print(
            f"{_tick(ok_protected)} every protected turn is raw   {_tick(ok_tail)} the newest"
            f" {_DEMO_KEEP_TAIL} turns are raw   {_tick(summary is not None)} the summary sits"
            f" in its slot after sequence {summary.through_sequence if summary else '-'}"
        )

        rule("3. Edit a summarised turn")
        edited_id = "m11"
        old = conversation.get(edited_id)
        store.edit(cid, edited_id, body="report.md is the Q3 report: revenue grew 15%, not 12%.")
        console.print(
            f"edited {edited_id} (seq {old.sequence if old else '?'}), one of the summary's"
            " sources; the summary citing it:"
        )
        first_id = first.summary.id if first.summary is not None else None
        for record in store.summary_history(cid):
            if record.envelope is not None and record.envelope.id == first_id:
                console.print(f"  {first_id}: [red]{record.status}[/] ({record.reason})")
        context = store.context(cid, _DEMO_POLICY)
        console.print(
            f"context fallback: [bold red]{context.fallback}[/] — all {len(context.items)} turns"
            " raw, nothing lost, the stale summary is not used"
        )

        rule("4. Re-compact")
        second = compactor.compact(cid)
        _print_outcome(console, second)

        rule("5. Append a new turn")
        new_id = f"m{len(store.load(cid)) + 1}"
        store.append(cid, "user", "Please archive draft-old.md when you get a moment.", id=new_id)
        context = store.context(cid, _DEMO_POLICY)
        reused = context.summary
        second_id = second.summary.id if second.summary is not None else None
        console.print(
            f"{_tick(reused is not None and reused.id == second_id)}"
            f" summary {reused.id if reused else '-'} still current and reused;"
            f" the new turn {new_id} appears raw: {_tick(new_id in context.ids)}"
        )
        _show_context(console, store, cid, "context after the append", rows_from=-4)

        rule("6. Compact again: a new version supersedes the old one")
        third = compactor.compact(cid)
        _print_outcome(console, third)

        rule("Version history")
        versions = [
            {
                "id": record.envelope.id if record.envelope is not None else None,
                "plan_id": record.plan_id,
                "status": record.status,
                "reason": record.reason,
                "created_at": record.created_at,
                "sources": len(record.envelope.source_ids) if record.envelope else 0,
                "fingerprint": record.envelope.source_fingerprint if record.envelope else None,
            }
            for record in store.summary_history(cid)
        ]
        console.print(_versions_table(versions))


def _tick(ok: bool) -> str:
    return "[green]✓[/]" if ok else "[red]✗[/]"


def _print_outcome(console: Console, outcome: CompactionOutcome) -> None:
    summary = outcome.summary
    detail = (
        f"summary {summary.id}: {len(summary.source_ids)} turns,"
        f" fingerprint {summary.source_fingerprint[:20]}…"
        if summary is not None
        else f"reason {outcome.reason}"
    )
    console.print(f"compaction [bold]{outcome.status}[/]: {_e(detail)}")


def _show_context(
    console: Console, store: SQLiteStore, cid: str, title: str, rows_from: int | None = None
) -> None:
    context = store.context(cid, _DEMO_POLICY)
    conversation = store.load(cid)
    if rows_from is not None:
        context = AssembledContext(
            context.items[rows_from:], context.fallback, context.history_boundary
        )
        title += f" (last {-rows_from} items)"
    console.print(
        _context_table(
            context,
            conversation,
            title=title,
            preview=True,
            tail_ids=_tail_ids(conversation, _DEMO_KEEP_TAIL),
        )
    )


@cli.command("demo")
@click.option("--db", "db", help="Keep the demo database at this path (default: a temp file).")
def demo_command(db: str | None) -> None:
    """Run an end-to-end story: compaction, a stale summary, recovery, versions."""
    console = _stdout()
    if db is not None:
        path = Path(db)
        if path.is_dir():
            raise UserError(f"{db}: is a directory, not a database file")
        if not path.parent.is_dir():
            raise UserError(f"{db}: the directory {str(path.parent)!r} does not exist")
        _run_demo(console, path)
        console.print(Text(f"database kept at {path}"))
        return
    directory = tempfile.mkdtemp(prefix="ledgerfold-demo-")
    try:
        _run_demo(console, Path(directory) / "demo.db")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
