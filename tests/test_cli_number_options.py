"""Number options (`compact --keep-tail`, `purge --through`, `search --limit`,
`revalidate --workers`, `export --turns-per-file`) refuse a value that is no integer as
"not a valid integer", naming the option: one line, exit 2. click's range type said
"not a valid integer range", as if the user had been asked for a range."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore

_COMMANDS = {
    "--keep-tail": ["compact", "{db}", "--keep-tail", "{value}"],
    "--through": ["purge", "{db}", "c", "--through", "{value}", "--reason", "r"],
    "--limit": ["search", "{db}", "c", "turn", "--limit", "{value}"],
    "--workers": ["revalidate", "{db}", "--workers", "{value}"],
    "--turns-per-file": ["export", "{db}", "--parquet", "{out}", "--turns-per-file", "{value}"],
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    return path


@pytest.mark.parametrize("option", sorted(_COMMANDS))
@pytest.mark.parametrize("value", ["abc", "1.5"])
def test_a_value_that_is_no_integer_is_named_so(db: Path, option: str, value: str) -> None:
    args = [arg.format(db=db, value=value, out=db.parent / "parquet") for arg in _COMMANDS[option]]
    result = run(*args)
    assert result.exit_code == 2
    assert result.stderr == (
        f"ledgerfold: error: Invalid value for '{option}': {value!r} is not a valid integer.\n"
    )


@pytest.mark.parametrize(
    ("option", "value", "bounds"),
    [("--limit", "101", "1<=x<=100"), ("--keep-tail", "0", "1<=x<2**63")],
)
def test_a_value_out_of_range_names_the_range(
    db: Path, option: str, value: str, bounds: str
) -> None:
    args = [arg.format(db=db, value=value, out=db.parent / "parquet") for arg in _COMMANDS[option]]
    result = run(*args)
    assert result.exit_code == 2
    assert f"{value} is not in the range {bounds}." in result.stderr


def test_help_calls_them_integers() -> None:
    text = run("search", "--help").stdout
    assert "--limit INTEGER " in text and "RANGE" not in text
