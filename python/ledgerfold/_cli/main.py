"""The `ledgerfold` group: the entry point, the error handling every subcommand shares and
the one check of a database path.

A user error (missing file, unknown conversation, bad argument, a database that is not a
ledgerfold store, a directory) prints one line, ``ledgerfold: error: ...``, to stderr and
exits 2. Error lines name paths, IDs and fields, never turn bodies or summary text. A
stdout its reader closed (`ledgerfold list DB | head -1`) stops the command quietly, exit 141.
"""

from __future__ import annotations

import difflib
import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

import click

from ledgerfold._cli.render import safe_text
from ledgerfold._errors import LedgerfoldError, StoreError
from ledgerfold.store import _ledger as ledger
from ledgerfold.store._batch_reads import NotUtf8, lenient_rows
from ledgerfold.store._paths import connect_reading
from ledgerfold.store._schema import READABLE_VERSION
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.store._sqlite_errors import quotes_stored_data, store_error

__all__ = [
    "CLOSED_STDOUT_EXIT",
    "DEFAULT_POLICY",
    "KEY_BLOB",
    "KEY_NOT_TEXT",
    "KEY_NUMBER",
    "NOT_STDIO",
    "STDIO",
    "USAGE_EXIT",
    "Count",
    "Label",
    "UserError",
    "check_before_writing",
    "check_db_path",
    "cli",
    "conversation_keys",
    "damaged_row",
    "damaged_turns",
    "key_damage",
    "key_sql",
    "key_text",
    "main",
    "open_store",
    "require_conversation",
    "summary_policy",
]

#: Exit status of every user error.
USAGE_EXIT = 2
#: What a path of `-` means by convention: stdin or stdout.
STDIO = "-"
#: Why `-` is refused where a file or directory is written (`-` is stdout by convention).
NOT_STDIO = "{what}, not stdout: give its path (./- for one named -)"
DEFAULT_POLICY = "v1"
#: Exit status when the reader of stdout went away (`| head -1`): 128 + SIGPIPE, what a shell
#: reports for a program that signal ended, as Ctrl-C's 130 is 128 + SIGINT.
CLOSED_STDOUT_EXIT = 141


#: What click >= 8.2 raises for a group called with no arguments: its help is the message.
_NO_ARGS_HELP: type[click.ClickException] | None = getattr(
    click.exceptions, "NoArgsIsHelpError", None
)


class UserError(click.ClickException):
    """A mistake of the caller: one line on stderr, exit status 2."""

    exit_code = USAGE_EXIT


class Count(click.IntRange):
    """An integer option from `min` up to `max` (default: SQLite's largest integer): past
    it, the error names the option the user typed, not the library's parameter (`sequence`,
    `keep_tail`). A value that is no integer at all is "not a valid integer" (click's own
    range type said "not a valid integer range", as if a range were expected)."""

    name = "integer"

    def __init__(self, min: int, max: int = 2**63 - 1) -> None:
        super().__init__(min=min, max=max)

    def _describe_range(self) -> str:
        top = "<2**63" if self.max == 2**63 - 1 else f"<={self.max}"
        return f"{self.min}<=x{top}"


class Label(click.types.StringParamType):
    """A text option the ledger records (`--reason`, `--policy-version`): refused naming
    the option when blank or not UTF-8 (argv bytes the locale cannot decode arrive as lone
    surrogates), which the library would refuse naming its own parameter."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        option = param.opts[0] if param is not None and param.opts else "value"
        text: str = super().convert(value, param, ctx)
        if not text.strip():
            raise UserError(f"{option}: must not be blank")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"{option}: not valid UTF-8") from None
        return text


def _report_error(message: str) -> None:
    # One line, the message's own characters kept: a newline or tab inside a path is
    # spelled out (`a\\nb.db`), as in an ID's repr, never turned into a space.
    # Nobody reads stderr (`2>&1 | head -0`): the exit status still tells what happened.
    with suppress(BrokenPipeError):
        click.echo(f"ledgerfold: error: {safe_text(message.strip())}", err=True)


def _usage_hint(error: click.ClickException) -> str:
    """For click's own usage errors (a missing argument, an unknown option): the command's
    usage line and where its help is, on the same line ("Missing argument 'QUERY'." said
    nothing of what QUERY is, nor where it goes)."""
    ctx = error.ctx if isinstance(error, click.UsageError) else None
    if ctx is None or (
        isinstance(error, click.BadParameter) and not isinstance(error, click.MissingParameter)
    ):  # a bad value names its option and what it takes already
        return ""
    usage = " ".join([ctx.command_path, *ctx.command.collect_usage_pieces(ctx)])
    # click ends most messages with a stop, not "Got unexpected extra argument (x)": the
    # usage would run on as if it were part of the argument list.
    stop = "" if error.format_message().rstrip().endswith((".", "?", "!")) else "."
    return f"{stop} Usage: {usage} (`{ctx.command_path} --help` says more)"


class _StdoutClosed(Exception):
    """The reader of stdout went away: the command stops, nothing more is printed."""


@contextmanager
def _stdout_closed_is_quiet() -> Iterator[None]:
    # Ahead of click, whose own handler would exit 1; help and --version print in
    # `make_context`, the commands in `invoke`. Ctrl-C too: click's handler would write a
    # blank line to stderr first, so the error would not be its first line.
    try:
        yield
    except BrokenPipeError:
        raise _StdoutClosed from None
    except KeyboardInterrupt:
        raise click.exceptions.Abort("interrupted") from None
    except EOFError:  # what click, too, takes for an abort (end of input at a prompt)
        raise click.exceptions.Abort("aborted: end of input") from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is still
    buffered fails no more ("Exception ignored ... BrokenPipeError")."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # CliRunner's stdout has no descriptor
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Group(click.Group):
    """A group whose errors are one stderr line and exit 2, also under `CliRunner`."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _stdout_closed_is_quiet():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _stdout_closed_is_quiet():
            return super().invoke(ctx)

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
        except _StdoutClosed:
            _silence_stdout()
            code = CLOSED_STDOUT_EXIT
        except click.exceptions.Abort as error:
            _report_error(str(error) or "aborted")
            code = 130
        except click.ClickException as error:
            if _NO_ARGS_HELP is not None and isinstance(error, _NO_ARGS_HELP):
                with suppress(BrokenPipeError):  # `ledgerfold` alone: the help, as written
                    error.show()
            else:
                _report_error(error.format_message() + _usage_hint(error))
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
    """Versioned, verifiable compaction of agent conversations.

    New here? `ledgerfold demo` tells the story; `ledgerfold import DB FILE.jsonl`, then
    `ledgerfold list DB` and `ledgerfold report DB`, look at your own transcripts.
    `ledgerfold COMMAND --help` says what each command does."""
    # Library records stay quiet unless asked for: `import ledgerfold` adds a NullHandler,
    # so there are no "last resort" stderr lines.
    if not verbose:
        return
    # This call's stderr (a second in-process call has its own), for this call only: the
    # logger is left as it was found when the command ends.
    root = logging.getLogger("ledgerfold")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def restore() -> None:
        root.removeHandler(handler)
        root.setLevel(level)

    click.get_current_context().call_on_close(restore)


def check_db_path(db: str, *, create: bool = False) -> Path:
    """`db` as a path a database can be opened at (or, when `create`, created at)."""
    if not db:  # an unset shell variable: `Path('')` would be the current directory
        raise UserError("the database path is empty")
    if create and db == STDIO:
        raise UserError(f"{db}: {NOT_STDIO.format(what='the database is a file')}")
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


def check_before_writing(db: str, check: Callable[[SQLiteStore], object]) -> None:
    """Run a writing command's refusals (`check`: an unknown conversation, a bad sequence)
    on a read-only open first, so that a refused command writes nothing: no migration, no
    WAL, no write lock, no file created, and on a file the user may not write it names the
    real mistake. A file too old to be read without migrating is checked under the write
    open, as before (the command would migrate it anyway once accepted)."""
    path = check_db_path(db)
    if _too_old_to_read(path) is not None:
        return
    with open_store(db, read_only=True) as store:
        check(store)


def _too_old_to_read(path: Path) -> int | None:
    """The schema version of `path` when it is a ledgerfold schema too old to be read
    without migrating it (which `ledgerfold upgrade` does), else None."""
    try:
        with closing(connect_reading(str(path), factory=sqlite3.Connection)) as conn:
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
    try:
        known = store.conversation_ids()
    except StoreError as error:
        # Another conversation's key is not UTF-8 text (another tool's write): the keys
        # cannot be listed, but the one named can still be looked up.
        if damaged_row(error) is None:
            raise
        if store.stats(conversation_id).conversations:
            return
        raise UserError(
            f"unknown conversation {conversation_id!r}; `ledgerfold report DB` lists the"
            " conversations"
        ) from None
    if conversation_id not in known:
        # A key another tool stored as a number or a blob is no name to suggest (`list`
        # flags it as damaged, with the SQL that selects it: `key_sql`).
        named = [key for key in known if isinstance(key, str)]
        raise UserError(f"unknown conversation {conversation_id!r}{_hint(conversation_id, named)}")


def _hint(conversation_id: str, known: list[str]) -> str:
    """What to try instead: the ID the user most likely meant (a long imported ID typed by
    its tail, a typo), else where the IDs are listed."""
    if not known:
        return "; the database holds no conversation"
    tails = [cid for cid in known if conversation_id and cid.endswith(conversation_id)]
    close = tails if len(tails) == 1 else difflib.get_close_matches(conversation_id, known, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return "; `ledgerfold list DB` lists the conversations"


def damaged_row(error: StoreError) -> str | None:
    """The message of a store error that names a row changed outside ledgerfold ("damaged
    row in table turns, column meta: turn 't1' ..."; or a column whose text is not UTF-8;
    never its content), else None: a command over every conversation reports that one and
    goes on with the others."""
    message = str(error)
    damaged = message.startswith("damaged row in table ") or message.endswith(_NOT_UTF8)
    return message if damaged else None


#: Why a conversation whose key another tool stored as text that is not UTF-8 is damaged.
KEY_NOT_TEXT = (
    "its conversation key is not UTF-8 text (shown with its bad bytes replaced), so no"
    " command can name it; the database was changed outside ledgerfold"
)
#: ... stored as a blob, or as a number: SQLite keeps them apart from text of the same
#: characters (a column without text affinity: the table was made again by another tool).
KEY_BLOB = (
    "its conversation key is stored as a blob, not text (shown as its bytes decoded, bad"
    " ones replaced), so no command can name it; the database was changed outside ledgerfold"
)
KEY_NUMBER = (
    "its conversation key is stored as an SQLite {kind}, not text (shown as its digits), so"
    " no command can name it; the database was changed outside ledgerfold"
)


def key_damage(key: object) -> str | None:
    """Why a stored conversation key is no name a command takes (`KEY_NOT_TEXT`, `KEY_BLOB`,
    `KEY_NUMBER`), or None for text. The row `list` and `report` show for it says so, with
    `key_sql` to select it."""
    if isinstance(key, str):
        return None
    if isinstance(key, bytes):
        return KEY_BLOB
    if isinstance(key, int | float):
        return KEY_NUMBER.format(kind="integer" if isinstance(key, int) else "real")
    return KEY_NOT_TEXT


def key_sql(key: object) -> str | None:
    """The SQL literal that selects a stored conversation key that is not text exactly (an
    operator's way to address the row another tool left: `WHERE id = X'6332'`), or None for
    text, which commands name. Its storage class is kept: `42` is not `'42'`, `X'6332'` not
    `'c2'`, and text that is not UTF-8 is `CAST(X'..' AS TEXT)`."""
    if isinstance(key, str):
        return None
    if isinstance(key, NotUtf8):
        return f"CAST(X'{key.raw.hex().upper()}' AS TEXT)"
    if isinstance(key, bytes):
        return f"X'{key.hex().upper()}'"
    return repr(key)


def key_text(key: object) -> str:
    """A stored conversation key as text: one that is not UTF-8 text (a damaged database)
    decoded, its bad bytes replaced, as `ledgerfold revalidate` names it."""
    if isinstance(key, NotUtf8):
        key = key.raw
    if isinstance(key, bytes):
        return key.decode("utf-8", errors="replace")
    return str(key)


def conversation_keys(db: str | Path) -> list[object]:
    """Every conversation key of the database at `db`, in key order, read leniently: one
    another tool stored as text that is not UTF-8 comes as `NotUtf8`, where
    `SQLiteStore.conversation_ids()` fails. (`db` is known to be a database.)"""
    with closing(connect_reading(str(Path(db).resolve()), factory=sqlite3.Connection)) as conn:
        rows = lenient_rows(conn, "SELECT id FROM conversations ORDER BY id")
    return [key for (key,) in rows]


# The end of the store's error for a text column that is not UTF-8 (read only).
_NOT_UTF8 = "its text is not valid UTF-8 (a damaged database?)"


def damaged_turns(conn: sqlite3.Connection, conversation_id: object) -> str | None:
    """Why the conversation's live turns cannot be read back (`damaged_row`: a row changed
    outside ledgerfold), else None; the rule `list` and `compact` apply (the store's
    `load()`), for `report`, read through `conn` in the caller's read transaction: the
    snapshot its totals and rows are read in, not one of the store's own connection. A
    key that is not text (read leniently: text that is not UTF-8) is itself the damage."""
    if not isinstance(conversation_id, str):
        damage = key_damage(conversation_id) or KEY_NOT_TEXT
        return f"{damage} (in SQL: id = {key_sql(conversation_id)})"
    try:
        ledger.load(conn, conversation_id)
    except StoreError as error:
        if (message := damaged_row(error)) is None:
            raise
        return message
    except sqlite3.Error as error:
        failure = store_error(conn, error, operation="load", write=False)
        if (message := damaged_row(failure)) is not None:
            return message
        if quotes_stored_data(error):
            raise failure from None  # SQLite's message quotes the stored bytes
        raise failure from error
    return None
