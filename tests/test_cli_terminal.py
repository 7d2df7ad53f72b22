"""Terminal control characters from a transcript never reach the terminal raw (SPEC
§15.7): bodies, turn IDs and conversation IDs are escaped in everything the
command line prints, errors included."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result

from cli_support import copy_db, run
from ledgerfold._cli.render import safe_text

# Everything a terminal could act on, except the newline and tab the output itself uses.
RAW_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
C1 = "\x9b31m\x9d0;c1\x9c"
EVIL_CONVERSATION = f"conv{TITLE}{C1}"
EVIL_TURN = f"turn{CLEAR}"


def assert_clean(result: Result | subprocess.CompletedProcess[str], what: object) -> None:
    for stream in (result.stdout, result.stderr):
        found = RAW_CONTROL.search(stream)
        assert found is None, (what, repr(found.group()) if found else None)


@pytest.fixture(scope="module")
def evil_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("evil")
    turns = [
        {"id": EVIL_TURN, "sequence": 1, "role": "system", "body": f"system {CLEAR}"},
        {"id": f"t2{LINK}", "sequence": 2, "role": "user", "body": f"hello {TITLE} {LINK}"},
        {"id": "t3", "sequence": 3, "role": "assistant", "body": f"bell\x07 {C1} \u202eevil"},
    ]
    turns += [
        {"id": f"t{n}\x1b[1m", "sequence": n, "role": "user", "body": f"line {n}\r{CLEAR}x\x7f"}
        for n in range(4, 16)
    ]
    line = {"conversation_id": EVIL_CONVERSATION, "source": f"src{CLEAR}", "turns": turns}
    transcript = base / "evil.jsonl"
    transcript.write_text(json.dumps(line) + "\n", encoding="utf-8")
    db = base / "evil.db"
    result = run("import", str(db), str(transcript))
    assert result.exit_code == 0, result.output
    assert_clean(result, "import")
    return db


def test_safe_text_spells_out_controls() -> None:
    assert safe_text("a\x1b[2Jb\x07\x9b\n\t\u202e") == "a\\x1b[2Jb\\x07\\x9b\\n\\t\\u202e"
    assert safe_text(safe_text(CLEAR)) == safe_text(CLEAR)
    assert safe_text("plain ünïcode ✓") == "plain ünïcode ✓"


def test_every_command_escapes_ledger_text(evil_db: Path, tmp_path: Path) -> None:
    db = str(evil_db)
    commands = [
        ["list", db],
        ["list", db, "--json"],
        ["context", db, EVIL_CONVERSATION],
        ["context", db, EVIL_CONVERSATION, "--preview"],
        ["context", db, EVIL_CONVERSATION, "--json"],
        ["inspect", db, EVIL_CONVERSATION],
        ["inspect", db, EVIL_CONVERSATION, "--json"],
        ["compact", db, "--dry-run"],
        ["compact", db, "--dry-run", "--json"],
        ["compact", db, "--keep-tail", "3"],
        ["compact", db, "--json"],
        ["context", db, EVIL_CONVERSATION, "--preview"],  # the summary's text now
        ["context", db, EVIL_CONVERSATION, "--json"],
        ["inspect", db, EVIL_CONVERSATION],
        ["revalidate", db],
    ]
    for args in commands:
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
        assert_clean(result, args)
    # The escaped text is shown, so the user still sees what is there.
    shown = run("context", db, EVIL_CONVERSATION, "--preview").stdout
    assert "\\x1b[2J" in shown
    # JSON stays exact: decoding gives back the stored characters.
    payload = json.loads(run("context", db, EVIL_CONVERSATION, "--json").stdout)
    assert payload["conversation"] == EVIL_CONVERSATION
    assert any(C1 in message["content"] for message in payload["messages"])


def test_errors_escape_ids_and_paths(evil_db: Path, tmp_path: Path) -> None:
    db = str(evil_db)
    bad = tmp_path / "dup.jsonl"
    line = {"conversation_id": f"x{CLEAR}", "source": "s", "turns": []}
    bad.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    cases = [
        ["context", db, f"nope{CLEAR}"],
        ["inspect", db, f"nope{TITLE}"],
        ["compact", db, "--conversation", f"nope{C1}"],
        ["context", str(tmp_path / f"missing{CLEAR}.db"), "c"],
        ["import", str(tmp_path / "new.db"), str(tmp_path / f"missing{LINK}.jsonl")],
        ["import", str(tmp_path / "new.db"), str(bad)],
    ]
    for args in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.startswith("ledgerfold: error: ")
        assert len(result.stderr.splitlines()) == 1
        assert_clean(result, args)


def _run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`python -m ledgerfold ARGS` in a real process, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "ledgerfold", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_real_process_prints_no_raw_control(evil_db: Path) -> None:
    for args in (["context", str(evil_db), EVIL_CONVERSATION, "--preview"], ["list", str(evil_db)]):
        completed = _run_cli(args)
        assert completed.returncode == 0, completed.stderr
        assert_clean(completed, args)


def test_verbose_log_records_escape_ids(evil_db: Path, tmp_path: Path) -> None:
    """`-v` prints the library's records (IDs, counts) to the terminal: a hostile ID in one
    is spelled out like everywhere else, and each record stays one line."""
    db = copy_db(evil_db, tmp_path / "copy.db")
    for args in (
        ["-v", "compact", str(db), "--keep-tail", "2"],
        ["-v", "purge", str(db), EVIL_CONVERSATION, "--through", "3", "--reason", f"r{TITLE}"],
    ):
        completed = _run_cli(args)
        assert completed.returncode == 0, completed.stderr
        assert_clean(completed, args)
        lines = [line for line in completed.stderr.splitlines() if not line.startswith("warning")]
        assert lines and all(line.startswith("INFO ledgerfold") for line in lines), lines


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["list", "{base}/a\nb\tc.db"], "a\\nb\\tc.db"),  # the database's own check
        (["import", "{base}/new.db", "{base}/t\nx.jsonl"], "t\\nx.jsonl"),  # a transcript
        (["report", "{db}", "--html", "{base}/no\ndir/r.html"], "no\\ndir/r.html"),  # output
    ],
)
def test_a_path_with_a_newline_is_spelled_out_in_its_error_line(
    tmp_path: Path, args: list[str], shown: str
) -> None:
    """A newline or tab in a path is shown escaped (`a\\nb`), as IDs are, not turned into a
    space: `a b c.db` would name a different file."""
    db = tmp_path / "d.db"
    assert run("demo", "--db", str(db)).exit_code == 0
    result = run(*(arg.format(base=tmp_path, db=db) for arg in args))
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert f"/{shown}: " in result.stderr, result.stderr


def test_a_warning_on_a_piped_stderr_is_one_line(tmp_path: Path) -> None:
    """`purge` of turns no summary holds warns on stderr; written to a file or a pipe it is
    one line, not wrapped at an assumed 80 columns."""
    db = tmp_path / "w.db"
    assert run("import", str(db), str(_one_conversation(tmp_path))).exit_code == 0
    result = run("purge", str(db), "c", "--through", "3", "--reason", "r")
    assert result.exit_code == 0, result.output
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("warning: "), warnings
    assert warnings[0].endswith("(compact first to keep it)")


def _one_conversation(tmp_path: Path) -> Path:
    turns = [
        {"id": f"t{n}", "sequence": n, "role": "user", "body": f"turn {n}"} for n in range(1, 7)
    ]
    path = tmp_path / "one.jsonl"
    line = {"conversation_id": "c", "source": "s", "turns": turns}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path
