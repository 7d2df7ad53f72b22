"""The `ledgerfold` console script's entry point: the command line needs the `cli` extra
(click and rich), which the library does not. Nothing here imports them before it has
checked they are there, so that without them the script says how to get them in one line
(exit 2) instead of a traceback.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["CLI_MODULES", "main", "missing_cli_modules"]

#: What the command line needs beyond the library: the `cli` extra.
CLI_MODULES = ("click", "rich")

#: The exit status of a user error (as the command line's own).
_USAGE_EXIT = 2


def missing_cli_modules() -> list[str]:
    """The modules of the `cli` extra that cannot be imported."""
    return [name for name in CLI_MODULES if importlib.util.find_spec(name) is None]


def main(args: Sequence[str] | None = None, prog_name: str = "ledgerfold") -> NoReturn:
    """Run the command line, or say in one line how to install what it needs."""
    missing = missing_cli_modules()
    if missing:
        sys.stderr.write(
            f"{prog_name}: the command line needs {' and '.join(missing)}: "
            "pip install 'ledgerfold[cli]'\n"
        )
        raise SystemExit(_USAGE_EXIT)
    from ledgerfold._cli import main as cli_main

    cli_main(args, prog_name=prog_name)
