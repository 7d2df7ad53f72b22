"""click's usage errors are one line: its message, then the command's usage. A message click
ends without a stop ("Got unexpected extra argument (extra)") ran on into the usage,
"(extra) Usage: ...", as if the usage were part of the arguments; it now ends with one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore

# In-process (`CliRunner`) the program is named after the group's function.
_USAGE = "Usage: cli list [OPTIONS] DB (`cli list --help` says more)"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    SQLiteStore(path).close()
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["extra"], "Got unexpected extra argument (extra)."),
        (["a", "b"], "Got unexpected extra arguments (a b)."),
    ],
)
def test_extra_arguments_end_before_the_usage(db: Path, extra: list[str], message: str) -> None:
    result = run("list", str(db), *extra)
    assert result.exit_code == 2
    assert result.stderr == f"ledgerfold: error: {message} {_USAGE}\n"


def test_a_message_with_its_own_stop_gets_no_second_one() -> None:
    result = run("list")
    assert result.exit_code == 2
    assert result.stderr == f"ledgerfold: error: Missing argument 'DB'. {_USAGE}\n"
