"""The `ledgerfold` group: the entry point, the error handling every subcommand shares and
the one check of a database path.

A user error (missing file, unknown conversation, bad argument, a database that is not a
ledgerfold store, a directory) prints one line, ``ledgerfold: error: ...``, to stderr and
exits 2. Error lines name paths, IDs and fields, never turn bodies or summary text.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from ledgerfold._cli.render import one_line, safe_text
from ledgerfold._errors import LedgerfoldError, StoreError
from ledgerfold.store._paths import reading_uri
from ledgerfold.store._schema import READABLE_VERSION
from ledgerfold.store._sqlite import SQLiteStore

__all__ = [
    "DEFAULT_POLICY",
    "USAGE_EXIT",
    "UserError",
    "check_db_path",
    "cli",
    "main",
    "open_store",
    "require_conversation",
    "summary_policy",
]

#: Exit status of every user error.
USAGE_EXIT = 2
DEFAULT_POLICY = "v1"


#: What click >= 8.2 raises for a group called with no arguments: its help is the message.
_NO_ARGS_HELP: type[click.ClickException] | None = getattr(
    click.exceptions, "NoArgsIsHelpError", None
)


class UserError(click.ClickException):
    """A mistake of the caller: one line on stderr, exit status 2."""

    exit_code = USAGE_EXIT


def _report_error(message: str) -> None:
    click.echo(f"ledgerfold: error: {one_line(message)}", err=True)


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
        except click.exceptions.Abort as error:
            _report_error(str(error) or "aborted")
            code = 130
        except click.ClickException as error:
            if _NO_ARGS_HELP is not None and isinstance(error, _NO_ARGS_HELP):
                error.show()  # `ledgerfold` alone (click >= 8.2): the help, as written
            else:
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


class _TerminalFormatter(logging.Formatter):
    """Records as one terminal line each: the IDs they carry come from the ledger, so
    control characters are spelled out (`safe_text`), as in everything else printed."""

    def format(self, record: logging.LogRecord) -> str:
        return safe_text(super().format(record))


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
        handler.setFormatter(_TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
        root.setLevel(logging.INFO)
    else:
        # Library records stay quiet unless asked for (no "last resort" stderr lines).
        handler = logging.NullHandler()
    if not any(type(existing) is type(handler) for existing in root.handlers):
        root.addHandler(handler)


def check_db_path(db: str, *, create: bool = False) -> Path:
    """`db` as a path a database can be opened at (or, when `create`, created at)."""
    path = Path(db)
    if path.is_dir():
        raise UserError(f"{db}: is a directory, not a database file")
    if not path.exists():
        if not create:
            raise UserError(f"{db}: no such database")
        if not path.parent.is_dir():
            raise UserError(f"{db}: the directory {str(path.parent)!r} does not exist")
    elif not path.is_file():  # /dev/null, a FIFO: SQLite would create a journal beside it
        raise UserError(f"{db}: not a regular file")
    elif not create and path.stat().st_size == 0:  # never turned into a database (§15.7)
        raise UserError(f"{db}: an empty file, not a ledgerfold database")
    return path


@contextmanager
def open_store(db: str, *, create: bool = False, read_only: bool = False) -> Iterator[SQLiteStore]:
    """Open an existing ledgerfold database (or create one when `create`); commands that
    only read open it `read_only`, which creates or changes nothing and works where the
    process cannot write."""
    path = check_db_path(db, create=create)
    # StoreError (not ours, not SQLite) becomes one error line.
    try:
        store = SQLiteStore(path, read_only=read_only)
    except StoreError:
        old = _too_old_to_read(path) if read_only else None
        if old is None:
            raise
        raise UserError(
            f"{db}: schema version {old} is older than a read-only open can read;"
            f" run `ledgerfold upgrade {db}` first"
        ) from None
    try:
        yield store
    finally:
        store.close()


def _too_old_to_read(path: Path) -> int | None:
    """The schema version of `path` when it is a ledgerfold schema too old to be read
    without migrating it (which `ledgerfold upgrade` does), else None."""
    try:
        with closing(sqlite3.connect(reading_uri(str(path)), uri=True)) as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:
        return None
    return version if 0 < version < READABLE_VERSION else None


# Statuses of an accepted version, as `list` counts them.
_ACCEPTED = ("current", "superseded", "stale")


def summary_policy(store: SQLiteStore, conversation_id: str) -> str:
    """The policy version of the conversation's newest accepted summary (the one `list`
    and the inspector page judge), or the default when it has none, or when a damaged
    record cannot be read (the context then says why it falls back)."""
    try:
        history = store.summary_history(conversation_id)
    except StoreError:
        return DEFAULT_POLICY
    for record in reversed(history):
        if record.envelope is not None and record.status in _ACCEPTED:
            return record.envelope.policy_version
    return DEFAULT_POLICY


def require_conversation(store: SQLiteStore, conversation_id: str) -> None:
    if conversation_id not in store.conversation_ids():
        raise UserError(f"unknown conversation {conversation_id!r}")
