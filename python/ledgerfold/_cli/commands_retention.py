"""The subcommands that erase (SPEC §15.5, §15.7): `purge` (retention through a sequence,
with `--dry-run` and `--json`), `delete` (a whole conversation) and `vacuum` (a rewrite of
the file, so that nothing deleted is left anywhere in it)."""

from __future__ import annotations

from typing import Any

import click

from ledgerfold._cli.main import (
    Count,
    Label,
    UserError,
    check_before_writing,
    check_db_path,
    cli,
    open_store,
    require_conversation,
)
from ledgerfold._cli.render import (
    counted,
    echo_json,
    esc,
    plural,
    stderr_console,
    stdout_console,
)
from ledgerfold._context import HistoryBoundary
from ledgerfold.store._sqlite import SQLiteStore

__all__ = ["delete_command", "purge_command", "vacuum_command"]


@cli.command("purge", short_help="Retention: erase the raw turns through a sequence.")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option(
    "--through",
    "through",
    type=Count(0),
    required=True,
    help="The last sequence to purge (see `ledgerfold context` for sequences).",
)
@click.option("--reason", type=Label(), required=True, help="Why (recorded with the boundary).")
@click.option(
    "--force",
    is_flag=True,
    help="Also purge protected turns and system prompts, and allow --through beyond the last"
    " sequence.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would go, and which summary would be sealed; change nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def purge_command(
    db: str,
    conversation_id: str,
    through: int,
    reason: str,
    force: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Retention: delete the bodies of raw turns through sequence --through. The current
    summary is sealed: it stays in the context, so what it summarised is not lost. Without
    --force, protected turns and system prompts stay, and the purge stops before a tool call
    still waiting for its result or whose results it would leave behind. When no turn would
    go (--through 0, turns purged already, only protected turns), it says so and writes
    nothing: no boundary is recorded."""

    def preview_or_refuse(store: SQLiteStore) -> dict[str, Any]:
        require_conversation(store, conversation_id)
        preview = store.preview_purge(conversation_id, through, force=force)
        if through > preview["last_sequence"] and not force:
            raise UserError(
                f"--through {through} is beyond the last sequence"
                f" ({preview['last_sequence']}) of {conversation_id!r}; use --force to purge"
                " everything up to it"
            )
        return preview

    decided: dict[str, Any] = {}  # the read-only open's preview
    if not dry_run:
        check_before_writing(db, lambda store: decided.update(preview_or_refuse(store)))
    # Nothing would go: no boundary, no new revision; not even a writing open.
    write = not dry_run and decided.get("turns") != 0
    boundary = earlier = None
    with open_store(db, read_only=not write) as store:
        preview = preview_or_refuse(store)
        if write and preview["turns"]:
            boundary = store.purge_through(conversation_id, through, reason, force=force)
        elif not preview["turns"]:
            earlier = store.history_boundary(conversation_id)  # turns purged already
    if not preview["turns"]:
        # No turn goes, so no purge runs: nothing is (or would be) sealed.
        preview = {**preview, "sealed_summary": None}
    # `conversation` as in every other command's JSON; `conversation_id` kept (documented).
    report = {
        "conversation": conversation_id,
        **preview,
        "reason": reason,
        "force": force,
        "dry_run": dry_run,
    }
    recorded = preview["through_sequence"]  # what the boundary records
    if not dry_run:
        report["purged_at"] = boundary.purged_at if boundary is not None else None
        report["boundary"] = boundary.through_sequence if boundary is not None else None
        recorded = boundary.through_sequence if boundary is not None else recorded
    if as_json:
        echo_json(report)
        return
    if not preview["turns"]:
        _print_nothing_to_purge(conversation_id, through, preview, force, dry_run, earlier)
        return
    sealed = preview["sealed_summary"]
    turns, protected, roles, erased, unsummarised = (
        preview[key]
        for key in ("turns", "protected_kept", "roles_kept", "versions_erased", "unsummarised")
    )
    verb = "would purge" if dry_run else "purged"
    stdout_console().print(
        f"{verb} {esc(conversation_id)}: {turns} raw {plural(turns, 'turn')} through sequence"
        f" {recorded} ({esc(reason)})"
        + ("" if force else f"; {protected} protected {plural(protected, 'turn')} kept")
        + ("" if force else f"; {roles} system {plural(roles, 'turn')} kept")
        + (f"; summary {esc(sealed)} sealed" if sealed else "; no current summary to seal")
        + (f"; {erased} older summary {plural(erased, 'version')} erased")
    )
    if unsummarised:
        stderr_console().print(
            f"warning: {unsummarised} of these turns {plural(unsummarised, 'is', 'are')} in"
            " no current summary:"
            " what they said leaves the agent's context for good"
            + (" (compact first to keep it)" if not sealed else "")
        )


def _print_nothing_to_purge(
    conversation_id: str,
    through: int,
    preview: dict[str, Any],
    force: bool,
    dry_run: bool,
    earlier: HistoryBoundary | None,
) -> None:
    """No turn goes: say why (turns purged already, turns kept), and that nothing is (or
    would be) written."""
    reach = min(through, preview["last_sequence"])
    stop = preview["through_sequence"]
    why = []
    if earlier is not None and reach > 0:
        why.append(f"turns through sequence {earlier.through_sequence} purged already")
    why += [
        f"{counted(preview[key], word)} kept without --force"
        for key, word in (("protected_kept", "protected turn"), ("roles_kept", "system turn"))
        if preview[key] and not force
    ]
    if stop < reach and not force:
        why.append(f"without --force the purge stops before sequence {stop + 1}")
    stdout_console().print(
        f"nothing to purge in {esc(conversation_id)} through sequence {reach}: "
        + ("; ".join(why) if why else "no raw turn there")
        + f"; nothing {'would be' if dry_run else 'was'} written"
    )


@cli.command("delete", short_help="Erase a conversation for good (needs --yes).")
@click.argument("db")
@click.argument("conversation_id", metavar="CONVERSATION")
@click.option("--yes", is_flag=True, help="Confirm: the conversation cannot be recovered.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def delete_command(db: str, conversation_id: str, yes: bool, as_json: bool) -> None:
    """Erase a conversation: its turns, history, summaries, plans and boundaries."""
    if yes:
        check_before_writing(db, lambda store: require_conversation(store, conversation_id))
    with open_store(db, read_only=not yes) as store:  # refused, it only reads
        require_conversation(store, conversation_id)
        if not yes:
            raise UserError(
                f"delete erases conversation {conversation_id!r} for good;"
                " run it again with --yes to confirm"
            )
        store.delete_conversation(conversation_id)
    if as_json:
        echo_json(
            {"conversation": conversation_id, "conversation_id": conversation_id, "deleted": True}
        )
    else:
        stdout_console().print(
            f"deleted {esc(conversation_id)} (`ledgerfold vacuum {esc(db)}` then leaves no"
            " copy of its text anywhere in the file)"
        )


@cli.command("vacuum", short_help="Rewrite DB so nothing deleted is left in it.")
@click.argument("db")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def vacuum_command(db: str, as_json: bool) -> None:
    """Rewrite DB (SQLite's VACUUM, then a checkpoint) so that no byte of erased, purged or
    deleted text is left anywhere in the file. The erasing commands overwrite what they
    delete, but an older copy of a row can remain in the unused space of a page in use.
    Needs about DB's size in free disk space; a failure leaves DB as it was."""
    path = check_db_path(db)
    before = path.stat().st_size
    with open_store(db) as store:
        store.vacuum()
    after = path.stat().st_size
    if as_json:
        echo_json({"database": str(path), "bytes_before": before, "bytes_after": after})
    else:
        stdout_console().print(f"vacuumed {esc(db)}: {before:,} bytes before, {after:,} after")
