"""`ledgerfold reindex DB [--check]`: check the recall index (SPEC §16.1) and rebuild it from
the ledger. The index is derived data: whatever damaged it (an index grown past FTS5's level
limit on an SQLite from before 2023, a damaged page), it is dropped and made again from the
live turns; nothing in the ledger is written."""

from __future__ import annotations

import time

import click

from ledgerfold._cli.commands_upgrade import index_progress
from ledgerfold._cli.main import UserError, check_db_path, cli
from ledgerfold._cli.render import counted, echo_json, esc, stdout_console
from ledgerfold.store._search_repair import PROBLEMS
from ledgerfold.store._sqlite import SQLiteStore

__all__ = ["PROBLEM_EXIT", "reindex_command"]

#: Exit status when the index has problems (`--check`), or still has some after a rebuild.
PROBLEM_EXIT = 1


def _said(problems: list[str]) -> str:
    return "; ".join(f"{code} ({PROBLEMS[code]})" for code in problems)


@cli.command("reindex", short_help="Check DB's search index and rebuild it.")
@click.argument("db")
@click.option(
    "--check", "check_only", is_flag=True, help="Only check the index (exit 1 when damaged)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def reindex_command(ctx: click.Context, db: str, check_only: bool, as_json: bool) -> None:
    """Check DB's search index (FTS5's integrity-check, and that it holds exactly the live
    turns with a searchable word) and rebuild it from the ledger, however damaged; the
    ledger is not written. Opens DB for writing (an older schema is migrated first, as
    `upgrade` does)."""
    path = check_db_path(db)
    console = stdout_console()
    started = time.perf_counter()
    indexed: int | None = None
    with SQLiteStore(path) as store:
        before = store.check_search_index()
        if "no-fts5" in before:
            raise UserError(f"{db}: this SQLite has no FTS5, so there is no search index")
        after = before
        if not check_only:
            try:
                with index_progress(console, disable=as_json):
                    indexed = store.rebuild_search_index()
            except KeyboardInterrupt:
                raise click.exceptions.Abort(
                    f"reindex interrupted: the rebuild goes on at the next open for writing;"
                    f" run `ledgerfold reindex {db}` again to finish it now"
                ) from None
            after = store.check_search_index()
    result = {
        "database": str(path),
        "problems_before": before,
        "rebuilt": not check_only,
        "turns_indexed": indexed,
        "problems_after": after,
        "sound": not after,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if as_json:
        echo_json(result)
    elif check_only:
        state = f"has problems: {_said(before)}" if before else "sound"
        console.print(f"{esc(db)}: search index {state}")
    else:
        was = f"had problems: {_said(before)}" if before else "was sound"
        now = f"problems remain: {_said(after)}" if after else "sound"
        console.print(
            f"{esc(db)}: search index {was}; rebuilt from the ledger"
            f" ({counted(indexed or 0, 'turn')}); {now}"
        )
    if after:
        ctx.exit(PROBLEM_EXIT)
