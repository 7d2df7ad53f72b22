"""An unknown conversation is refused with a hint: the imported ID the user typed the tail
of, a near miss, else where the IDs are listed (the error was a bare "unknown
conversation 'task9/trial3'")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import SQLiteStore


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        for cid in ("tau-bench/airline/task9/trial3", "tau-bench/airline/task10/trial1"):
            store.append(cid, "user", "Book me a flight.")
    return path


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        ("task9/trial3", "did you mean 'tau-bench/airline/task9/trial3'?"),
        ("tau-bench/airline/task9/trail3", "did you mean 'tau-bench/airline/task9/trial3'?"),
        ("nope", "`ledgerfold list DB` lists the conversations"),
    ],
)
@pytest.mark.parametrize("command", ["context", "inspect", "search"])
def test_an_unknown_conversation_comes_with_a_hint(
    db: Path, command: str, typed: str, hint: str
) -> None:
    result = run(command, str(db), typed, *(["flight"] if command == "search" else []))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line == f"ledgerfold: error: unknown conversation {typed!r}; {hint}"


def test_an_empty_database_says_it_holds_no_conversation(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SQLiteStore(path).close()
    result = run("compact", str(path), "--conversation", "c")
    assert result.exit_code == 2
    assert "unknown conversation 'c'; the database holds no conversation" in result.stderr
