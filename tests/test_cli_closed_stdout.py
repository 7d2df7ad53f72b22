"""A stdout whose reader went away (`ledgerfold report DB | head -1`): every command stops
quietly with the same exit status, 141 (128 + SIGPIPE), and nothing on stderr: no
traceback, no "Exception ignored" at interpreter exit. Real child processes whose stdout is
a pipe already closed at its reading end, so the first write fails, every time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import run

CLOSED_STDOUT_EXIT = 141


def _with_closed_stdout(*args: str, stderr_too: bool = False) -> subprocess.CompletedProcess[str]:
    reading, writing = os.pipe()
    os.close(reading)
    try:
        return subprocess.run(
            [sys.executable, "-m", "ledgerfold", *args],
            stdout=writing,
            stderr=writing if stderr_too else subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(writing)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("closed") / "demo.db"
    assert run("demo", "--db", str(db)).exit_code == 0
    return db


@pytest.mark.parametrize(
    "args",
    [
        ("report", "{db}"),  # rich tables
        ("report", "{db}", "--json"),  # click.echo
        ("list", "{db}"),
        ("list", "{db}", "--json"),
        ("inspect", "{db}", "demo"),
        ("context", "{db}", "demo", "--json"),
        ("revalidate", "{db}"),
        ("--help",),  # printed while the arguments are parsed
        ("--version",),
        ("list", "--help"),
    ],
)
def test_a_closed_stdout_stops_every_command_the_same_quiet_way(
    demo_db: Path, args: tuple[str, ...]
) -> None:
    completed = _with_closed_stdout(*(arg.format(db=demo_db) for arg in args))
    assert completed.returncode == CLOSED_STDOUT_EXIT, (args, completed.stderr)
    assert completed.stderr == "", args


def test_a_closed_stdout_still_lets_a_user_error_be_said(tmp_path: Path) -> None:
    completed = _with_closed_stdout("list", str(tmp_path / "missing.db"))
    assert completed.returncode == 2
    assert completed.stderr.startswith("ledgerfold: error: ")


@pytest.mark.parametrize("args", [("list", "{missing}"), ("frobnicate",), ()])
def test_a_user_error_with_nobody_reading_stderr_still_exits_2(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """`2>&1 | head -0`: the error line cannot be written, the exit status still says it
    was a user error (not 1, the status of an uncaught exception)."""
    missing = str(tmp_path / "missing.db")
    completed = _with_closed_stdout(*(a.format(missing=missing) for a in args), stderr_too=True)
    assert completed.returncode == 2, args
