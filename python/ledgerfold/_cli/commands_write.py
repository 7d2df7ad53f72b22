"""The subcommands that write to a database: `import`, `compact` and `revalidate` (which
marks summaries whose sources changed as stale); `purge` and `delete` are in
`commands_retention`."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.progress import MofNCompleteColumn, Progress
from rich.table import Table
from rich.text import Text

from ledgerfold._cli.dry_run import dry_run as _dry_run
from ledgerfold._cli.main import (
    DEFAULT_POLICY,
    STDIO,
    Count,
    Label,
    UserError,
    check_before_writing,
    cli,
    damaged_row,
    open_store,
    require_conversation,
    summary_policy,
)
from ledgerfold._cli.render import (
    echo_json,
    outcome_json,
    plural,
    print_table,
    safe_text,
    stderr_console,
    stdout_console,
)
from ledgerfold._compactor import CompactionOutcome, Compactor
from ledgerfold._errors import StoreError
from ledgerfold._model import Turn
from ledgerfold._policy import CompactionPolicy
from ledgerfold._transcripts import Transcript, iter_transcripts
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.summarizers._extractive import ExtractiveSummarizer

__all__ = [
    "compact_command",
    "import_command",
    "revalidate_command",
    "turn_spec",
]

#: What `import DB -` reads.
_STDIN = "/dev/stdin"

# The records keep the name they had when the command line was one module.
_log = logging.getLogger("ledgerfold.cli")


# --------------------------------------------------------------------------- import


def turn_spec(turn: Turn) -> dict[str, Any]:
    """The `append_many` spec of a transcript turn, its sequence kept (SPEC §15.6)."""
    return {
        "id": turn.id,
        "sequence": turn.sequence,
        "role": turn.role,
        "body": turn.body,
        "protected": turn.protected,
        "protection_reason": turn.protection_reason,
        "group": turn.group,
        "meta": turn.meta,
    }


@cli.command("import", short_help="Import JSONL transcripts into DB (created if needed).")
@click.argument("db")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--name",
    metavar="NAME",
    help="Name the conversations of FILE's fine-tuning lines NAME:<line number> (default: the"
    " file's stem; stdin for -, pipe for another pipe such as <(zcat t.jsonl.gz)).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def import_command(db: str, files: tuple[str, ...], name: str | None, as_json: bool) -> None:
    """Import JSONL transcripts into DB, creating it if needed: one conversation a line,
    {"conversation_id", "source", "turns": [{"id", "sequence", "role", "body", "tool_call_ids"}]}
    (sequences from 1; tool_call_ids: the IDs of the calls an assistant turn makes, or the
    one a tool turn answers, else []).

    A conversation already in DB is skipped (one line counts them), so importing twice is
    harmless. FILE - reads stdin. Also reads OpenAI fine-tuning files ({"messages": [...]}
    per line; the conversation ID is <file stem>:<line number>, or --name's).
    """
    if STDIO in files:
        if files.count(STDIO) > 1:
            raise UserError("-: stdin given more than once (it can be read once)")
        if sys.stdin is None or sys.stdin.isatty():
            raise UserError("-: stdin is a terminal; pipe a transcript in, or name a file")
        # `-` is stdin by convention: read once, as `/dev/stdin` is (the name in errors).
        files = tuple(_STDIN if name == STDIO else name for name in files)
    if name is not None and (not name.strip() or len(files) > 1):
        raise UserError(
            "--name: give one FILE (each file's lines would get the same IDs)"
            if name.strip()
            else "--name: empty; give the name of the conversations, such as --name train"
        )
    pipes = 0
    names: dict[str, str | None] = {}
    for file in files:
        if not file:  # an unset shell variable: `Path('')` would be the current directory
            raise UserError("the transcript path is empty")
        path = Path(file)
        if path.is_dir():
            raise UserError(f"{file}: is a directory, not a transcript file")
        if not path.exists():
            raise UserError(f"{file}: no such file")
        # A pipe is read once, as a file is (`/dev/stdin`, `<(zcat t.jsonl.gz)`).
        if not path.is_file() and not path.is_fifo():
            raise UserError(f"{file}: not a regular file or a pipe")
        # A pipe's stem (`63` of `/dev/fd/63`) names nothing: `pipe` (`pipe-2`, ...).
        if name is None and path.is_fifo() and file != _STDIN:
            pipes += 1
            names[file] = "pipe" if pipes == 1 else f"pipe-{pipes}"
        else:
            names[file] = name
    # Parse everything first: a malformed line imports nothing.
    transcripts: list[Transcript] = []
    seen: dict[str, str] = {}
    for file in files:
        for transcript in iter_transcripts(file, name=names[file]):
            where = f"{file}:{transcript.line}"
            first = seen.setdefault(transcript.conversation_id, where)
            if first != where:
                raise UserError(
                    f"{where}: conversation_id {transcript.conversation_id!r}"
                    f" also appears at {first}"
                )
            transcripts.append(transcript)
    # A conversation without turns is nothing to import (the ledger has no empty ones).
    transcripts = [transcript for transcript in transcripts if transcript.turns]
    if not transcripts and not _has_content(db):
        # Nothing to import (no lines, blank lines, conversations without turns) and no
        # database yet: as an import with nothing new, it writes nothing, not even the file.
        unmade = "" if os.path.lexists(db) else f", {db} not created"  # an empty file stays
        _print_imported(0, 0, 0, as_json, note=f"nothing to import{unmade}")
        return
    # Decided on a read-only open first: an import with nothing new writes nothing, so it
    # works on a database the user may only read, and says what it found.
    present: set[str] = set()
    if _has_content(db):
        check_before_writing(db, lambda store: present.update(store.conversation_ids()))
        if all(transcript.conversation_id in present for transcript in transcripts):
            # No turns at all says so, as into a new database (the database is untouched).
            note = None if transcripts else "nothing to import"
            _print_imported(0, 0, len(transcripts), as_json, note=note)
            return
    # The files this command creates (a new database, its journals) do not outlive an
    # import that wrote nothing; a file that was there before is never removed.
    created = [path for path in _database_files(db) if not os.path.lexists(path)]
    try:
        imported, skipped, turns = _import_all(db, transcripts)
    except KeyboardInterrupt:
        _remove(db, created)
        raise click.exceptions.Abort("import interrupted: nothing was imported") from None
    except BaseException:
        _remove(db, created)
        raise
    _print_imported(imported, turns, skipped, as_json)


def _has_content(db: str) -> bool:
    return bool(db) and Path(db).is_file() and Path(db).stat().st_size > 0


def _print_imported(
    imported: int, turns: int, skipped: int, as_json: bool, note: str | None = None
) -> None:
    _log.info("import: conversations=%d turns=%d skipped=%d", imported, turns, skipped)
    if as_json:
        echo_json({"conversations": imported, "turns": turns, "skipped": skipped})
        return
    line = Text.from_markup(
        f"imported [bold]{imported:,}[/] {plural(imported, 'conversation')},"
        f" [bold]{turns:,}[/] {plural(turns, 'turn')}"
        + (
            f"; {skipped:,} {plural(skipped, 'conversation')} already present, skipped"
            if skipped
            else ""
        )
    )
    if note is not None:
        line.append(f" ({safe_text(note)})")
    stdout_console().print(line)


#: Turns whose search-index rows a one-transaction import holds in memory at most: past
#: it they are written (in the same transaction), so memory does not grow with the import.
PENDING_INDEX_ROWS = 20_000


def _import_all(db: str, transcripts: list[Transcript]) -> tuple[int, int, int]:
    """Write the transcripts not yet in `db`: (conversations, skipped, turns)."""
    imported = skipped = turns = 0
    with open_store(db, create=True) as store:
        existing = set(store.conversation_ids())
        # One transaction for the whole import: interrupted (Ctrl-C) or failing, it
        # leaves the database as it was, never some of the conversations.
        with store._worker_batch():
            for transcript in transcripts:
                if transcript.conversation_id in existing:
                    skipped += 1
                    continue
                written = store.append_many(
                    transcript.conversation_id, [turn_spec(turn) for turn in transcript.turns]
                )
                existing.add(transcript.conversation_id)
                imported += 1
                turns += len(written)
                _bound_pending_index(store)
    return imported, skipped, turns


def _database_files(db: str) -> list[str]:
    return [db, *(f"{db}{suffix}" for suffix in ("-wal", "-shm", "-journal"))]


def _remove(db: str, created: list[str]) -> None:
    """Remove the files this import created, when it created the database itself (a
    journal beside a database that was there before may hold another writer's work), and
    unless another writer has meanwhile put a conversation in it."""
    if db not in created or _holds_conversations(db):
        return
    for path in created:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _holds_conversations(db: str) -> bool:
    try:
        with SQLiteStore(db, read_only=True) as store:
            return bool(store.conversation_ids())
    except Exception:  # unreadable: never initialised, nothing anyone imported
        return False


def _bound_pending_index(store: SQLiteStore) -> None:
    """Write the batch's pending index rows once there are many (between two appends, as
    the store itself does before a job that reads the index)."""
    db = store._db
    with db.lock:
        conn = db.connection()
        if conn.pending is not None and len(conn.pending) >= PENDING_INDEX_ROWS:
            db._flush_index(conn, "import")


# --------------------------------------------------------------------------- compact


def _compact_backlog(compactor: Compactor, conversation_id: str) -> CompactionOutcome:
    """Compact until the backlog is folded: each call commits one bounded chunk (SPEC
    §15.8); the outcome shown is the last accepted one, or the first that was not."""
    outcome = compactor.compact(conversation_id, force=True)
    for _ in range(100_000):  # a bound, far above any backlog's chunk count
        if outcome.status != "accepted":
            break
        following = compactor.compact(conversation_id, force=True)
        if following.status != "accepted":
            break
        outcome = following
    return outcome


@cli.command("compact", short_help="Compact conversations now (built-in extractive summarizer).")
@click.argument("db")
@click.option(
    "--conversation",
    "conversation_id",
    metavar="ID",
    help="Only this conversation (default: every one).",
)
@click.option(
    "--keep-tail",
    type=Count(1),
    default=8,
    show_default=True,
    help="The newest turns kept raw, never summarised.",
)
@click.option(
    "--policy-version",
    type=Label(),
    help="The policy label new summaries are written under.  [default: the one the"
    f" conversation's newest summary has, else {DEFAULT_POLICY}]",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcomes as JSON.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show the plan and what the summarizer would get (turns, tokens); write nothing.",
)
def compact_command(
    db: str,
    conversation_id: str | None,
    keep_tail: int,
    policy_version: str | None,
    as_json: bool,
    dry_run: bool,
) -> None:
    """Compact every conversation of DB (or only --conversation ID) now, due or not, with
    the built-in ExtractiveSummarizer (no model is called): every turn but the newest
    --keep-tail, the protected ones and system prompts is folded into summaries, as many as
    the backlog needs. Turns stay in the ledger; `ledgerfold context` shows the result."""
    if conversation_id is not None and not dry_run:
        check_before_writing(db, lambda store: require_conversation(store, conversation_id))
    with open_store(db, read_only=dry_run) as store:
        if conversation_id is not None:
            require_conversation(store, conversation_id)
            ids = [conversation_id]
        else:
            ids = store.conversation_ids()
        # Unless named, each conversation keeps the policy its summary has: a summary under
        # another label would leave the application reading its context with none.
        policies: dict[str, CompactionPolicy] = {}
        compactors: dict[str, Compactor] = {}

        def policy_of(cid: str) -> CompactionPolicy:
            version = policy_version or summary_policy(store, cid)
            if version not in policies:
                policies[version] = CompactionPolicy(version, keep_tail=keep_tail)
            return policies[version]

        def compactor_of(cid: str) -> Compactor:
            policy = policy_of(cid)
            if policy.version not in compactors:
                compactors[policy.version] = Compactor(store, policy, ExtractiveSummarizer())
            return compactors[policy.version]

        def one(cid: str) -> dict[str, Any]:
            # A conversation with a row changed outside ledgerfold is an outcome of its own
            # (named on stderr); the others are compacted (planned) all the same.
            try:
                if dry_run:
                    return _dry_run(store.load(cid), store.current_summary(cid), policy_of(cid))
                return outcome_json("conversation", cid, _compact_backlog(compactor_of(cid), cid))
            except StoreError as error:
                if (message := damaged_row(error)) is None:
                    raise
                stderr_console().print(
                    Text(f"warning: {safe_text(cid)} not compacted: {safe_text(message)}")
                )
                return _damaged(cid, dry_run)

        if dry_run:
            plans = [one(cid) for cid in ids]
        else:
            rows = [one(cid) for cid in ids]
    if not ids and not as_json:  # as `list` says it: one line, not a table of no rows
        stdout_console().print(Text(f"no conversation in {safe_text(db)}: nothing to compact"))
        return
    label = (
        safe_text(policy_version)
        if policy_version is not None
        else f"each conversation's own, else {DEFAULT_POLICY}"
    )
    if dry_run:
        _print_dry_run(plans, label, CompactionPolicy(DEFAULT_POLICY, keep_tail=keep_tail), as_json)
        return
    if as_json:
        echo_json(rows)
        return
    table = Table(title=Text(f"compaction (policy {label}, keep tail {keep_tail})"))
    for column in ("conversation", "status", "reason", "summary", "sources"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(safe_text(row[key]) if row[key] is not None else "") for key in row))
    console = stdout_console()
    print_table(console, table)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    console.print(
        Text(", ".join(f"{status}: {n}" for status, n in sorted(counts.items())) or "none")
    )


def _damaged(conversation_id: str, dry_run: bool) -> dict[str, Any]:
    """The outcome (or dry-run plan) of a conversation a damaged row keeps from compacting."""
    if not dry_run:
        return {
            "conversation": conversation_id,
            "status": "failed",
            "reason": "damaged-row",
            "summary": None,
            "sources": 0,
        }
    counts = ("compacted", "covered", "preserved", "through_sequence", "new_turns", "tokens")
    return {
        "conversation": conversation_id,
        "status": "damaged",
        "current_summary": None,
        **dict.fromkeys(counts, 0),
        "requests": [],
    }


def _print_dry_run(
    plans: list[dict[str, Any]], label: str, policy: CompactionPolicy, as_json: bool
) -> None:
    if as_json:
        echo_json(plans)
        return
    table = Table(
        title=Text(
            f"dry run (policy {label}, keep tail {policy.keep_tail},"
            f" at most {policy.max_input_tokens} tokens a request): nothing written"
        )
    )
    for column in ("conversation", "mode", "extends", "covered", "turns", "sequences", "tokens"):
        table.add_column(column, overflow="fold")
    table.add_column("requests", justify="right")
    for plan in plans:
        requests = plan["requests"]
        table.add_row(
            Text(safe_text(plan["conversation"])),
            Text(plan["status"]),
            Text(safe_text(plan["current_summary"] or "") if plan["status"] == "rolling" else ""),
            str(plan["covered"]),
            str(plan["new_turns"]),
            ", ".join(request["sequences"] for request in requests) or "none",
            str(plan["tokens"]),
            str(len(requests)),
        )
    print_table(stdout_console(), table)


# --------------------------------------------------------------------------- revalidate


@cli.command("revalidate", short_help="Re-hash every summary's sources; mark stale ones.")
@click.argument("db")
@click.option(
    "--workers",
    type=Count(1),
    default=None,
    help="Conversations checked at once, one core each (each reads DB through its own"
    " read-only connection).  [default: every available core]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def revalidate_command(db: str, workers: int | None, as_json: bool) -> None:
    """Deep-check every current summary against its re-hashed source turns; mark the ones
    that no longer match as stale, and repair the stored digest of every turn changed
    outside ledgerfold."""
    with open_store(db, read_only=True):  # one clear line for a missing file, a directory
        pass
    show_progress = sys.stderr.isatty() and not as_json
    if show_progress:
        columns = (*Progress.get_default_columns(), MofNCompleteColumn())
        with Progress(*columns, console=stderr_console(), transient=True) as progress:
            task = progress.add_task("revalidating", total=None)
            report = revalidate_database(
                db,
                workers=workers,
                progress=lambda done: progress.advance(task, done),
                on_total=lambda total: progress.update(task, total=total),
            )
    else:
        report = revalidate_database(db, workers=workers)
    if as_json:
        echo_json(report.as_json())
        return
    console = stdout_console()
    console.print(
        f"checked {report.summaries_checked:,} current"
        f" {plural(report.summaries_checked, 'summary', 'summaries')} in"
        f" {report.conversations:,} {plural(report.conversations, 'conversation')}:"
        f" [green]{report.current:,} current[/], [red]{report.stale:,} stale[/]; re-hashed"
        f" {report.turns_hashed:,} {plural(report.turns_hashed, 'turn')}"
        f" ({report.bytes_hashed:,} {plural(report.bytes_hashed, 'byte')})"
        f" in {report.seconds:.2f} s with {report.workers} {plural(report.workers, 'worker')}"
    )
    # The other live turns are checked too: without this line a ledger never compacted
    # read as "re-hashed 0 turns", as if nothing had been checked.
    console.print(
        f"checked the stored digest of {report.digests_checked:,} live"
        f" {plural(report.digests_checked, 'turn')} no current summary cites:"
        f" {report.digests_wrong:,} wrong"
    )
    if report.stale_summaries:
        table = Table(title="stale summaries (now marked stale)", title_justify="left")
        for column in ("conversation", "summary", "reason", "turn"):
            table.add_column(column, overflow="fold")
        for item in report.stale_summaries:
            table.add_row(
                Text(safe_text(item.conversation_id)),
                Text(safe_text(item.summary_id)),
                Text(safe_text(item.reason)),
                Text(safe_text(item.turn_id or "")),
            )
        print_table(console, table)
    if report.digests_wrong or report.turns_damaged:
        console.print(
            f"[red]{report.digests_wrong} {plural(report.digests_wrong, 'turn')} changed"
            " outside ledgerfold[/] (stored digest did not match the body):"
            f" {report.digests_repaired} repaired, the summaries citing them marked stale;"
            f" {report.turns_damaged} damaged {plural(report.turns_damaged, 'row')} could not"
            " be hashed"
        )
        damaged = [(c, f"{t} (damaged row)") for c, t in report.damaged_turns]
        for conversation_id, turn_id in [*report.wrong_digests, *damaged]:
            console.print(
                Text(f"  conversation {safe_text(conversation_id)} turn {safe_text(turn_id)}")
            )
