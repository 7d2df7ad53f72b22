"""HTML output: `inspect --html` (one conversation) and `report --html` (a whole database,
with an inspector page per listed conversation in a folder beside it); `report` alone prints
the same totals and conversations in the terminal."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import quote

import click
from rich.table import Table
from rich.text import Text

from ledgerfold._cli._page_names import PAGE_NAME, page_names
from ledgerfold._cli.html import render_conversation
from ledgerfold._cli.html_data import (
    REPORT_ROWS,
    ConversationRow,
    DatabaseView,
    gather_conversation,
    gather_database,
)
from ledgerfold._cli.html_report import NO_SUMMARY, orphaned_note, render_database
from ledgerfold._cli.main import (
    UserError,
    check_db_path,
    cli,
    conversation_keys,
    damaged_turns,
    open_store,
)
from ledgerfold._cli.render import (
    counted,
    echo_json,
    esc,
    plural,
    print_table,
    safe_text,
    stderr_console,
    stdout_console,
)
from ledgerfold._errors import StoreError
from ledgerfold.store._sqlite import SQLiteStore

__all__ = ["pages_dir", "report_command", "write_inspect_html"]


#: The files SQLite keeps beside a database: writing a page over one corrupts the ledger.
_COMPANIONS = ("", "-wal", "-shm", "-journal")
#: `--html -`: the page goes to stdout (a file named `-` is `./-`).
STDOUT = "-"


def _check_stdout(as_json: bool) -> None:
    """`--html -` with `--json`: both would be stdout, neither readable."""
    if as_json:
        raise UserError(
            "--html -: stdout already carries the --json output; give --html a file name"
        )


def _write_stdout(page: str) -> None:
    """The page on stdout, as the UTF-8 its `<meta charset>` declares, whatever the
    locale's encoding."""
    sys.stdout.flush()
    sys.stdout.buffer.write(page.encode("utf-8"))
    sys.stdout.buffer.flush()


def _write_page(path: Path, page: str) -> None:
    """Write `page` to `path`; a failure that comes from the write itself (a full disk:
    `ENOSPC`, which names no file) names `path` in its error line, not "file"."""
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as error:
        if error.filename is not None:
            raise
        raise OSError(error.errno, error.strerror, str(path)) from None


def _check_out(out: str, db: str) -> Path:
    """`out` as a page's path: in a directory that exists, and never the database `db` the
    page is read from, nor a file SQLite keeps beside it (a typo such as `report agent.db
    --html agent.db` would overwrite the ledger), however either is spelled or linked."""
    if not out:  # an unset shell variable: `Path('')` is the current directory
        raise UserError("--html: give a file name to write the page to, such as OUT.html")
    path = Path(out)
    if path.is_dir():
        raise UserError(f"{out}: is a directory")
    if not path.parent.is_dir():
        raise UserError(f"{out}: the directory {str(path.parent)!r} does not exist")
    target = os.path.realpath(path)
    database = os.path.realpath(db)
    for suffix in _COMPANIONS:
        companion = database + suffix
        if target == companion or (
            path.exists() and os.path.exists(companion) and os.path.samefile(path, companion)
        ):
            what = f"the database {db}" if not suffix else f"the {suffix} file of the database {db}"
            raise UserError(f"{out}: is {what}, not a page to write")
    return path


def write_inspect_html(
    store: SQLiteStore, db: str, conversation_id: str, out: str, *, announce: bool = True
) -> None:
    """Write the inspector page of `conversation_id` to `out` (stdout when `out` is `-`);
    `announce` says so on stdout (not under `--json`, whose output is JSON alone)."""
    if out == STDOUT:
        _check_stdout(not announce)
        _write_stdout(render_conversation(gather_conversation(store, Path(db), conversation_id)))
        return
    _check_out(out, db)  # before the work: a wrong path is one error line at once
    view = gather_conversation(store, Path(db), conversation_id)
    page = render_conversation(view)
    _write_page(_check_out(out, db), page)
    if announce:
        stdout_console().print(f"wrote {esc(out)} ({len(page.encode('utf-8')):,} bytes)")


def pages_dir(out: Path) -> Path:
    """The folder of the report's inspector pages: `report.html` → `report.pages`."""
    folder = out.with_suffix(".pages")
    return folder if folder != out else out.with_name(out.name + ".pages")


def _remove_old_pages(folder: Path, written: set[str]) -> None:
    """Remove the inspector pages of an earlier run that this one did not write (a
    conversation deleted or no longer listed since): a page holds bodies and summary text,
    which must not outlive their erasure. Only names `page_names` gives are touched."""
    for page in folder.iterdir():
        if page.name not in written and PAGE_NAME.fullmatch(page.name) and page.is_file():
            page.unlink()


@cli.command("report", short_help="Report DB's totals and what needs attention.")
@click.argument("db")
@click.option(
    "--html",
    "html_out",
    metavar="OUT.html",
    help="Write the report page here (- for stdout: the page alone, without inspector pages).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the totals and the conversations that need attention as JSON.",
)
def report_command(db: str, html_out: str | None, as_json: bool) -> None:
    """Report on DB: the store's totals, then the conversations that need attention (stale,
    failed, purged without a summary, a row changed outside ledgerfold), each with why.
    Alone it prints them; --html writes the page, each conversation linked to its inspector
    page; --json prints the totals and those conversations (alone, it writes no file)."""
    out = folder = None
    if html_out == STDOUT:
        _check_stdout(as_json)
        with open_store(db, read_only=True):  # one clear line for a missing DB
            view = gather_database(check_db_path(db), damaged_turns)
        _write_stdout(render_database(view, {}))
        return
    if html_out is not None:
        out = _check_out(html_out, db)
        folder = pages_dir(out)
        if folder.exists() and not folder.is_dir():
            raise UserError(
                f"{folder}: exists and is not a directory (the inspector pages go there)"
            )
    links: dict[str, str] = {}
    with open_store(db, read_only=True) as store:
        view = gather_database(check_db_path(db), damaged_turns)
        if out is not None and folder is not None:
            links = _write_pages(store, db, view.conversations, out, folder)
    size = 0
    if out is not None:
        report = render_database(view, links)
        _write_page(out, report)
        size = len(report.encode("utf-8"))
    if as_json:
        echo_json(
            {
                "database": db,
                "stats": view.stats.as_dict() if view.stats is not None else None,
                "attention_total": view.attention_total,
                "attention": [
                    {"conversation": row.conversation_id, "why": list(row.why)}
                    for row in view.conversations
                    if row.why
                ],
                "html": html_out,
                "pages": len(links),
                "pages_dir": None if folder is None else str(folder),
            }
        )
    elif folder is None:
        _print_report(db, view)
    else:
        stdout_console().print(
            f"wrote {esc(html_out or '')} ({size:,} bytes) and {len(links):,} inspector"
            f" {plural(len(links), 'page')} in {esc(str(folder))}"
        )


def _print_report(db: str, view: DatabaseView) -> None:
    """The report in the terminal: the totals, then the conversations that need attention,
    each with why (IDs, counts and reasons only)."""
    console = stdout_console()
    total = view.total_conversations
    lines = [
        f"ledgerfold report of {safe_text(db)}: {counted(total, 'conversation')}"
        + orphaned_note(view.orphaned)
    ]
    stats = view.stats
    if stats is not None:
        summaries = ", ".join(f"{n:,} {status}" for status, n in stats.summaries.items())
        fallbacks = sum(stats.fallbacks.values())
        reasons = ", ".join(
            f"{safe_text(r)} {n:,}" + (": not compacted yet" if r == NO_SUMMARY else "")
            for r, n in sorted(stats.fallbacks.items())
        )
        lines += [
            f"  {counted(stats.turns, 'live turn')}, {stats.turns_retracted:,} retracted,"
            f" {stats.turns_purged:,} purged",
            f"  summaries: {summaries or 'none'}",
            f"  contexts falling back to raw turns: {fallbacks:,}"
            + (f" ({reasons})" if reasons else ""),
            f"  conversations whose purged turns are summarised nowhere:"
            f" {stats.purged_without_summary:,} with no current summary, {stats.sealed_lost:,}"
            " with one that does not cover them",
        ]
    for line in lines:
        console.print(Text(line))
    flagged = [row for row in view.conversations if row.why]
    if not view.attention_total:
        console.print("no conversation needs attention")
        return
    attention = view.attention_total
    console.print(
        Text(
            f"{attention:,} of {counted(total, 'conversation')}"
            f" {plural(attention, 'needs', 'need')} attention"
        )
    )
    table = Table(title_justify="left")
    for column in ("conversation", "why"):
        table.add_column(column, overflow="fold")
    for row in flagged:
        table.add_row(Text(safe_text(row.conversation_id)), Text(safe_text("; ".join(row.why))))
    print_table(console, table)
    if attention > len(flagged):
        console.print(
            f"{attention - len(flagged):,} more not listed (at most {REPORT_ROWS:,} are);"
            " --json counts them all"
        )


def _write_pages(
    store: SQLiteStore,
    db: str,
    rows: tuple[ConversationRow, ...],
    out: Path,
    folder: Path,
) -> dict[str, str]:
    """Write the inspector page of each listed conversation into `folder` (not of one
    deleted since, nor of one whose key is not text; a damaged turn or summary record is
    marked on its page); returns each one's (URL-quoted, relative) address."""
    names = page_names(row.conversation_id for row in rows)
    folder.mkdir(exist_ok=True)
    back = f"../{quote(out.name)}"
    known = {key for key in conversation_keys(db) if isinstance(key, str)}
    links = {}
    for row in rows:
        if not row.named or row.conversation_id not in known:  # deleted since: no page
            continue
        try:
            view = gather_conversation(store, Path(db), row.conversation_id)
        except StoreError as error:
            # A failure the page cannot show past (its damaged turns and summary records it
            # marks): no page, no link; the warning names it.
            stderr_console().print(
                Text(
                    f"warning: no inspector page for {safe_text(row.conversation_id)}:"
                    f" {safe_text(error)}"
                )
            )
            continue
        page = render_conversation(view, back)
        name = names[row.conversation_id]
        _write_page(folder / name, page)
        links[row.conversation_id] = f"{quote(folder.name)}/{quote(name)}"
    _remove_old_pages(folder, {names[c] for c in links})
    return links
