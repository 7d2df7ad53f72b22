"""`ledgerfold upgrade DB` (SPEC §17.9): bring a database to the current schema and build its
recall index, with a progress bar. The same runs by itself the first time a file is opened
for writing; this command does it at a time of the operator's choosing. Resumable: the index
is built in batches that each commit, so an interrupted upgrade goes on where it stopped."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from ledgerfold._cli.main import UserError, check_db_path, cli
from ledgerfold._cli.render import echo_json, esc, stdout_console
from ledgerfold.store._paths import connect_reading
from ledgerfold.store._schema import SCHEMA_VERSION
from ledgerfold.store._sqlite import SQLiteStore

__all__ = ["index_progress", "schema_state", "upgrade_command"]

_PROGRESS = "search index progress: path=%s turns=%d of %d"


class _ProgressHandler(logging.Handler):
    """Moves the bar on the index build's progress records (the build logs each batch)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__(logging.INFO)
        self.progress = progress
        self.task: TaskID | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg != _PROGRESS or not isinstance(record.args, tuple):
            return
        _, done, total = record.args
        if not isinstance(done, int) or not isinstance(total, int):
            return
        if self.task is None:
            self.task = self.progress.add_task("search index", total=total)
        self.progress.update(self.task, completed=done)


@contextmanager
def index_progress(console: Console, *, disable: bool) -> Iterator[None]:
    """A progress bar (on a terminal, unless `disable`) moved by the index build's records."""
    logger = logging.getLogger("ledgerfold.store")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=disable or not console.is_terminal,
    ) as progress:
        handler = _ProgressHandler(progress)
        level = logger.level
        logger.addHandler(handler)
        if not logger.isEnabledFor(logging.INFO):
            logger.setLevel(logging.INFO)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)


def schema_state(path: str) -> tuple[int, bool | None]:
    """(schema version, index complete or None when there is no index yet), read without
    changing the file. A file SQLite cannot read is one error line (UserError)."""
    with closing(connect_reading(path, factory=sqlite3.Connection)) as conn:
        try:
            conn.execute("PRAGMA busy_timeout = 30000")  # as the store waits for a writer
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.OperationalError as err:  # locked, unreadable
            raise UserError(f"{path}: cannot read the database ({err})") from None
        except sqlite3.DatabaseError as err:  # not SQLite at all
            raise UserError(f"{path}: not an SQLite database ({err})") from None
        try:
            row = conn.execute("SELECT complete FROM search_state").fetchone()
        except sqlite3.OperationalError:
            return version, None
        return version, None if row is None else bool(row[0])


@cli.command("upgrade", short_help="Migrate DB to the current schema; build the search index.")
@click.argument("db")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def upgrade_command(db: str, as_json: bool) -> None:
    """Migrate DB to the current schema and build its search index (resumable)."""
    path = check_db_path(db)
    before, _ = schema_state(str(path))
    console = stdout_console()
    try:
        with index_progress(console, disable=as_json):
            SQLiteStore(path).close()  # migrations, then the index build, as at any open
    except KeyboardInterrupt:
        # Each migration and each batch of the index commits whole: nothing is half done.
        raise click.exceptions.Abort(
            f"upgrade interrupted: what it finished is kept; run `ledgerfold upgrade {db}`"
            " again to go on from there"
        ) from None
    after, complete = schema_state(str(path))
    result = {
        "database": str(path),
        "schema_before": before,
        "schema_after": after,
        "schema_current": after == SCHEMA_VERSION,
        "search_index_complete": bool(complete),
    }
    if as_json:
        echo_json(result)
        return
    change = f"v{before} -> v{after}" if before != after else f"v{after}, already current"
    index = "complete" if complete else "not available (this SQLite has no FTS5)"
    console.print(f"{esc(db)}: schema {change}; search index {index}")
