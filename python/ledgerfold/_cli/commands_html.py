"""HTML output: `inspect --html` (one conversation) and `report --html` (a whole database)."""

from __future__ import annotations

from pathlib import Path

import click

from ledgerfold._cli.html import render_conversation, render_database
from ledgerfold._cli.html_data import gather_conversation, gather_database
from ledgerfold._cli.main import UserError, check_db_path, cli, open_store
from ledgerfold._cli.render import esc, stdout_console
from ledgerfold.store import SQLiteStore

__all__ = ["report_command", "write_inspect_html"]


def _write(out: str, page: str) -> None:
    path = Path(out)
    if path.is_dir():
        raise UserError(f"{out}: is a directory")
    if not path.parent.is_dir():
        raise UserError(f"{out}: the directory {str(path.parent)!r} does not exist")
    path.write_text(page, encoding="utf-8")
    stdout_console().print(f"wrote {esc(out)} ({len(page.encode('utf-8')):,} bytes)")


def write_inspect_html(store: SQLiteStore, db: str, conversation_id: str, out: str) -> None:
    """Write the inspector page of `conversation_id` to `out`."""
    view = gather_conversation(store, Path(db), conversation_id)
    _write(out, render_conversation(view))


@cli.command("report")
@click.argument("db")
@click.option(
    "--html", "html_out", required=True, metavar="OUT.html", help="Write the report here."
)
def report_command(db: str, html_out: str) -> None:
    """Write an HTML report of DB: conversations with counts, stale and failed summaries."""
    with open_store(db, read_only=True):  # one clear line: a missing file, a directory, …
        pass
    view = gather_database(check_db_path(db))
    _write(html_out, render_database(view))
