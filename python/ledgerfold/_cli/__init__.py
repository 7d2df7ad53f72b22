"""The `ledgerfold` command line (SPEC §14), built with click and rich (the `cli` extra).

Subcommands: `demo`, `import`, `compact`, `context`, `inspect`, `list`, `purge`, `delete`,
`revalidate`, `export`, `report`, `search`, `upgrade`, `reindex`. `main.py` holds the group and its
error handling; the `commands_*.py` modules the subcommands (`dry_run.py` plans
`compact --dry-run`); `demo.py` the demo; `render.py` the shared output.
"""

from __future__ import annotations

# Importing the command modules registers their subcommands on the group.
from ledgerfold._cli import (  # noqa: F401
    commands_list,
    commands_read,
    commands_reindex,
    commands_retention,
    commands_search,
    commands_upgrade,
    commands_write,
    demo,
)
from ledgerfold._cli.main import cli, main

__all__ = ["cli", "main"]
