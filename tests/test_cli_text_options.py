"""Text options the ledger records (`purge --reason`, `compact --policy-version`,
`context --policy-version`) are refused naming the option when they are blank or are not
UTF-8 (argv bytes the locale cannot decode, which Python hands over as lone surrogates):
one line, exit 2, nothing written. The library refused them too, but naming its own
parameter (`reason:`, `policy_version:`, `version:`)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore

NOT_UTF8 = "v\udcff"  # what Python makes of the argv bytes b"v\xff"

_COMMANDS = {
    "purge": (["purge", "{db}", "c", "--through", "3", "--reason", "{value}"], "--reason"),
    "compact": (["compact", "{db}", "--conversation", "c", "--policy-version", "{value}"], None),
    "context": (["context", "{db}", "c", "--policy-version", "{value}"], None),
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@pytest.mark.parametrize(
    ("value", "problem"), [(NOT_UTF8, "not valid UTF-8"), ("  ", "must not be blank")]
)
def test_a_bad_text_option_is_refused_naming_it(
    db: Path, command: str, value: str, problem: str
) -> None:
    args, option = _COMMANDS[command]
    before = _digest(db)
    result = run(*(arg.format(db=db, value=value) for arg in args))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr == f"ledgerfold: error: {option or '--policy-version'}: {problem}\n"
    assert _digest(db) == before
    with SQLiteStore(db, read_only=True) as store:
        assert store.history_boundary("c") is None
        assert store.summary_history("c") == []


def test_argv_bytes_that_are_not_utf8_name_the_option(db: Path) -> None:
    """The real command, its argv carrying the byte 0xff (as a shell passes `$'r\\xff'`)."""
    args = [sys.executable, "-m", "ledgerfold", "purge", str(db), "c", "--through", "3"]
    result = subprocess.run(
        [*map(os.fsencode, args), b"--reason", b"r\xff"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == "ledgerfold: error: --reason: not valid UTF-8\n"
