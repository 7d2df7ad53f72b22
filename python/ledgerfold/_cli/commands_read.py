"""The subcommands that only read a database: `context`, `inspect` and `export`."""

from __future__ import annotations

import shlex
from pathlib import Path

import click
from rich.console import Console

from ledgerfold._cli.commands_html import write_inspect_html  # also registers `report`
from ledgerfold._cli.commands_upgrade import schema_state
from ledgerfold._cli.html_reads import (
    load_marking_damage,
    stored_versions,
    summaries_marking_damage,
    unreadable_plan,
)
from ledgerfold._cli.main import (
    DEFAULT_POLICY,
    NOT_STDIO,
    STDIO,
    Count,
    Label,
    UserError,
    cli,
    open_store,
    require_conversation,
    summary_policy,
)
from ledgerfold._cli.render import (
    boundary_json,
    context_table,
    echo_json,
    esc,
    plural,
    print_table,
    sequence_ranges,
    stdout_console,
    versions_table,
)
from ledgerfold._context import AssembledContext
from ledgerfold._errors import InvalidInput
from ledgerfold.adapters._chat import to_chat_messages
from ledgerfold.export import DEFAULT_TURNS_PER_FILE, export_parquet
from ledgerfold.store._schema import SCHEMA_VERSION

__all__ = ["context_command", "export_command", "inspect_command"]


# --------------------------------------------------------------------------- context


@cli.command("context", short_help="Print the model context of a conversation.")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option(
    "--policy-version",
    type=Label(),
    help=f"Assemble under this policy.  [default: the newest summary's, else {DEFAULT_POLICY}]",
)
@click.option("--json", "as_json", is_flag=True, help="Print chat messages as JSON.")
@click.option("--preview", is_flag=True, help="Show a short text preview instead of lengths.")
def context_command(
    db: str, conversation_id: str, policy_version: str | None, as_json: bool, preview: bool
) -> None:
    """Print the assembled model context of CONVERSATION."""
    with open_store(db, read_only=True) as store:
        require_conversation(store, conversation_id)
        if policy_version is None:
            policy_version = summary_policy(store, conversation_id)
        context = store.context(conversation_id, policy_version)
        conversation = store.load(conversation_id)
    if as_json:
        summary = context.summary
        echo_json(
            {
                "conversation": conversation_id,
                "policy_version": policy_version,
                "summary": summary.id if summary is not None else None,
                "fallback": context.fallback,
                "history_boundary": boundary_json(context.history_boundary),
                "messages": to_chat_messages(context),
            }
        )
        return
    console = stdout_console()
    if not context.items:  # every turn purged, no summary: not a table of no rows
        _print_empty_context(console, conversation_id, context)
        return
    print_table(
        console,
        context_table(
            context, conversation, title=f"context of {conversation_id}", preview=preview
        ),
    )
    _print_context_status(console, context, db, conversation_id)


def _print_empty_context(console: Console, conversation_id: str, context: AssembledContext) -> None:
    """No item at all: say why in one line (the turns purged, and no summary to use)."""
    boundary = context.history_boundary
    turns = (
        f"every turn through sequence {boundary.through_sequence} was purged"
        f" ({esc(boundary.reason)})"
        if boundary is not None
        else "no live turn"
    )
    fallback = context.fallback
    summary = (
        "no summary covers them"
        if fallback in (None, "no-summary")
        else f"the summary is not used ({esc(fallback)})"
    )
    console.print(f"context of {esc(conversation_id)}: empty: {turns} and {summary}")


def _print_context_status(
    console: Console, context: AssembledContext, db: str, conversation_id: str
) -> None:
    if context.fallback is None:
        summary = context.summary
        console.print(f"summary in use: [magenta]{esc(summary.id if summary else '-')}[/]")
    elif context.fallback == "no-summary":  # never compacted: nothing is wrong
        command = (
            f"ledgerfold compact {shlex.quote(db)} --conversation {shlex.quote(conversation_id)}"
        )
        console.print(
            f"fallback: no-summary (every turn raw: none written yet; `{esc(command)}` writes one)"
        )
    else:
        console.print(f"fallback: [bold red]{esc(context.fallback)}[/] (every turn raw)")
    if context.history_boundary is not None:
        boundary = context.history_boundary
        console.print(
            f"history boundary: turns through sequence {boundary.through_sequence} were purged"
            f" ({esc(boundary.reason)}); the agent continues from retained history only"
        )


# --------------------------------------------------------------------------- inspect


@cli.command("inspect", short_help="Show a conversation's summary versions and sources.")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option(
    "--html",
    "html_out",
    metavar="OUT.html",
    help="Write an HTML inspector page (- for stdout).",
)
def inspect_command(db: str, conversation_id: str, as_json: bool, html_out: str | None) -> None:
    """Show summary versions, the current summary's sources and the history boundary."""
    with open_store(db, read_only=True) as store:
        require_conversation(store, conversation_id)
        if html_out is not None:
            write_inspect_html(store, db, conversation_id, html_out, announce=not as_json)
            if not as_json:
                return
        # Rows changed outside ledgerfold are named, not a failed command (`html_reads`).
        conversation, damaged = load_marking_damage(store, Path(db), conversation_id)
        current, history, summary_damage = summaries_marking_damage(store, conversation_id)
        # A plan whose roles are unreadable makes its summary a damaged record (the context
        # falls back), as the page shows it: named, no summary in use.
        current, _, summary_damage = unreadable_plan(Path(db), current, summary_damage)
        readable = {turn.id: turn for turn in conversation.turns}
        if current is None:
            sources = []
        elif damaged:  # the readable cited turns; `sources_of` reads the damaged one too
            sources = [readable[i] for i in current.source_ids if i in readable]
        else:
            sources = store.sources_of(current.id)
        boundary = store.history_boundary(conversation_id)
        pruned = store.pruned_count(conversation_id)
        stored = stored_versions(Path(db), conversation_id) if history is None else []
    # Sources purged since (SPEC §15.5): the summary keeps them sealed, by their digests.
    unreadable = {turn.turn_id for turn in damaged}
    sealed = 0
    if current is not None:
        sealed = len(current.source_ids) - len(sources) - len(unreadable & set(current.source_ids))
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
        for record in history or ()
    ] + [  # a record the store cannot read: the records as stored
        {
            "id": row[0],
            "plan_id": row[1],
            "status": row[2],
            "reason": row[3],
            "created_at": row[4],
            "policy_version": row[8],
            "sources": row[5],
            "fingerprint": row[6],
        }
        for row in stored
    ]
    report = {
        "conversation": conversation_id,
        "revision": conversation.revision,
        "turns": len(conversation),
        "current_summary": current.id if current is not None else None,
        "versions": versions,
        "sources": [{"id": turn.id, "sequence": turn.sequence} for turn in sources],
        "sealed_sources": sealed,
        "pruned_versions": pruned,
        "history_boundary": boundary_json(boundary),
        "damaged_turns": [
            {"turn": turn.turn_id, "sequence": turn.sequence, "column": turn.column}
            for turn in damaged
        ],
        "summary_damage": summary_damage,
    }
    if html_out is not None:
        report["html"] = html_out
    if as_json:
        echo_json(report)
        return
    console = stdout_console()
    live = len(conversation)
    # Every turn purged (SPEC §15.5): say so plainly, and what is left of them.
    gone = live == 0 and boundary is not None
    console.print(
        f"conversation [bold]{esc(conversation_id)}[/]: revision {conversation.revision},"
        + (
            f" no live turn: every turn through sequence {boundary.through_sequence} was purged"
            if gone and boundary is not None
            else f" {live} {plural(live, 'turn')}"
        )
    )
    for turn in damaged:
        console.print(
            f"[red]damaged[/]: turn {esc(repr(turn.turn_id))} (sequence {turn.sequence}): its"
            f" {esc(turn.column)} cannot be read back (changed outside ledgerfold)"
        )
    if summary_damage is not None:
        console.print(f"[red]damaged summary record[/]: {esc(summary_damage)}")
    if versions:
        print_table(console, versions_table(versions))
    else:
        console.print("summary versions: none")
    if current is not None:
        covered = len(current.source_ids)
        ranges = sequence_ranges([turn.sequence for turn in sources])
        console.print(
            f"current summary [magenta]{esc(current.id)}[/] covers {covered}"
            f" {plural(covered, 'turn')}"
            + (
                f" ({plural(len(sources), 'sequence')} {ranges}"
                + (f" live; {sealed} purged, sealed)" if sealed else ")")
                if sources
                else (", all purged: sealed by their stored digests" if sealed else "")
            )
        )
    else:
        console.print("no current summary")
    if pruned:
        console.print(
            f"{pruned} older summary {plural(pruned, 'version')} pruned or erased (text deleted)"
        )
    if boundary is not None:
        console.print(
            f"history boundary: through sequence {boundary.through_sequence}"
            f" ({esc(boundary.reason)}, {boundary.purged_at})"
        )
    else:
        console.print("history boundary: none (no turns purged)")
    if gone:
        console.print(
            f"what remains: summary [magenta]{esc(current.id)}[/] (sealed), the whole context"
            if current is not None
            else "what remains: nothing (no summary covers the purged turns); the context is empty"
        )


# --------------------------------------------------------------------------- export


@cli.command("export", short_help="Export DB as Parquet (for ledgerfold.dask).")
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
    type=Count(1),
    default=DEFAULT_TURNS_PER_FILE,
    show_default=True,
    help="About this many turns a part; a conversation never spans two parts.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def export_command(db: str, out_dir: str, turns_per_file: int, as_json: bool) -> None:
    """Export DB as Parquet, partitioned by conversation (for `ledgerfold.dask`)."""
    if not out_dir:  # an unset shell variable: `Path('')` would be the current directory
        raise UserError("--parquet: the directory path is empty")
    if out_dir == STDIO:  # Parquet parts go to a directory, never one named `-`
        raise UserError(f"--parquet -: {NOT_STDIO.format(what='Parquet goes to a directory')}")
    with open_store(
        db, read_only=True
    ):  # one clear line for a missing file, a directory, a foreign DB
        pass
    # The export reads the current schema; migrating an older file would be a write, and
    # the commands that only read change no file (as `search` refuses, so does this).
    version, _ = schema_state(db)
    if version < SCHEMA_VERSION:
        raise UserError(
            f"{db}: schema version {version} is older than an export reads;"
            f" run `ledgerfold upgrade {db}` first"
        )
    try:
        report = export_parquet(db, out_dir, turns_per_file=turns_per_file)
    except ImportError as error:
        raise UserError(str(error)) from None
    except InvalidInput as error:
        if error.field != "out_dir":
            raise
        raise UserError("--parquet: " + str(error).removeprefix("out_dir: ")) from None
    if as_json:
        echo_json(report.as_json())
        return
    stdout_console().print(
        f"exported [bold]{report.conversations:,}[/]"
        f" {plural(report.conversations, 'conversation')},"
        f" [bold]{report.turns:,}[/] {plural(report.turns, 'turn')},"
        f" {report.summaries:,} {plural(report.summaries, 'summary', 'summaries')} and"
        f" {report.summary_sources:,} source {plural(report.summary_sources, 'row')} in"
        f" {report.parts:,} {plural(report.parts, 'part')} to {esc(report.out_dir)}"
        f" in {report.seconds:.2f} s"
    )
