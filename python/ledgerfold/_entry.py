"""The `ledgerfold` console script's entry point: the command line needs the `cli` extra
(click and rich), which the library does not. Nothing here imports them before it has
checked they are there, so that without them the script says how to get them in one line
(exit 2) instead of a traceback; and so that Ctrl-C while the command line is still being
imported is one line too (exit 130, as Ctrl-C in a command).

Python imports the `ledgerfold` package before any line of this module, so that import
must stay light: `import ledgerfold` leaves the library (the Rust extension, the store) to
the first use of a public name, which `main` makes inside its handling. Only Ctrl-C in
Python's own start, or in those few light lines, still ends in Python's traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from contextlib import suppress
from typing import NoReturn

__all__ = ["CLI_MODULES", "main", "missing_cli_modules"]

#: What the command line needs beyond the library: the `cli` extra.
CLI_MODULES = ("click", "rich")

#: The exit status of a user error (as the command line's own).
_USAGE_EXIT = 2
#: The exit status of Ctrl-C (128 + SIGINT), as the command line's own.
_INTERRUPTED_EXIT = 130
#: The compiled core, which a source checkout has only once built.
_NATIVE = "ledgerfold._native"


def missing_cli_modules() -> list[str]:
    """The modules of the `cli` extra that cannot be imported."""
    return [name for name in CLI_MODULES if importlib.util.find_spec(name) is None]


def main(args: Sequence[str] | None = None, prog_name: str = "ledgerfold") -> NoReturn:
    """Run the command line, or say in one line how to install what it needs."""
    try:
        missing = missing_cli_modules()
        if missing:
            sys.stderr.write(
                f"{prog_name}: the command line needs {' and '.join(missing)}: "
                "pip install 'ledgerfold[cli]'\n"
            )
            raise SystemExit(_USAGE_EXIT)
        # click, rich, the commands and the library: most of the start, where Ctrl-C lands.
        try:
            from ledgerfold._cli import main as cli_main
        except ImportError as error:
            if error.name != _NATIVE:  # what else is missing: the traceback tells
                raise
            # An installation without its compiled core (a source checkout not built, a
            # wheel of another platform): one line that says so, not a traceback.
            sys.stderr.write(
                f"{prog_name}: error: the compiled core ({_NATIVE}) is missing from this "
                "installation: install a ledgerfold wheel for this platform, or build it "
                "from the source (make dev)\n"
            )
            raise SystemExit(_USAGE_EXIT) from None
        cli_main(args, prog_name=prog_name)
    except KeyboardInterrupt:
        # Ctrl-C before the command runs (or where the command line's own handling does
        # not reach, as between click's steps): one line, as in a command.
        with suppress(OSError):  # nobody reads stderr: the status still says it
            sys.stderr.write(f"{prog_name}: error: interrupted\n")
        raise SystemExit(_INTERRUPTED_EXIT) from None
