"""The `ledgerfold` command line (SPEC §14) on the real transcripts of shared/data."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from cli_support import copy_db, run, run_json
from ledgerfold import revalidate
from ledgerfold._cli import cli

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA_FILES = sorted((SHARED / "transcripts").glob("*.jsonl"))
CHAT_ROLES = {"system", "user", "assistant", "tool"}


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every shared transcript imported into one database, then every conversation compacted."""
    assert DATA_FILES, f"no transcripts under {SHARED / 'transcripts'}"
    db = tmp_path_factory.mktemp("cli") / "all.db"
    imported = run_json("import", str(db), *map(str, DATA_FILES), "--json")
    outcomes = run_json("compact", str(db), "--json")
    return {"db": db, "imported": imported, "outcomes": outcomes}


def test_import_counts_every_conversation_and_turn(compacted: dict[str, Any]) -> None:
    expected_conversations = expected_turns = 0
    for path in DATA_FILES:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    expected_conversations += 1
                    expected_turns += len(json.loads(line)["turns"])
    assert compacted["imported"] == {
        "conversations": expected_conversations,
        "turns": expected_turns,
        "skipped": 0,
    }


def test_reimport_skips_existing_conversations(compacted: dict[str, Any], tmp_path: Path) -> None:
    db = copy_db(compacted["db"], tmp_path / "again.db")
    result = run("import", str(db), str(DATA_FILES[0]))
    assert result.exit_code == 0
    # One summary line, however many conversations were skipped.
    skipped = sum(1 for line in DATA_FILES[0].open(encoding="utf-8") if line.strip())
    assert skipped > 1
    assert result.stdout.splitlines() == [
        f"imported 0 conversations, 0 turns; {skipped} conversations already present, skipped"
    ]
    assert result.stderr == ""
    again = run_json("import", str(db), str(DATA_FILES[0]), "--json")
    assert again["conversations"] == 0 and again["skipped"] > 0
    total = sum(1 for path in DATA_FILES for line in path.open(encoding="utf-8") if line.strip())
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] == total


def test_compact_outcomes(compacted: dict[str, Any]) -> None:
    statuses = {row["status"] for row in compacted["outcomes"]}
    assert statuses <= {"accepted", "skipped"}
    for row in compacted["outcomes"]:
        if row["status"] == "skipped":
            assert row["reason"] == "nothing-to-compact"
        else:
            assert row["summary"] and row["sources"] > 0


def test_revalidate_reports_every_summary_current(compacted: dict[str, Any]) -> None:
    accepted = [row for row in compacted["outcomes"] if row["status"] == "accepted"]
    report = run_json("revalidate", str(compacted["db"]), "--json")
    assert report["conversations"] == len(compacted["outcomes"])
    assert report["summaries_checked"] == len(accepted)
    assert report["current"] == len(accepted)
    assert report["stale"] == 0 and report["stale_summaries"] == []
    assert report["turns_hashed"] > 0 and report["bytes_hashed"] > report["turns_hashed"]
    assert report["seconds"] >= 0
    # Without --workers, one worker per core this process may run on.
    assert report["workers"] == revalidate.available_cores()


@pytest.mark.parametrize("workers", ["1", "3"])
def test_revalidate_finds_a_body_tampered_in_the_file(
    compacted: dict[str, Any], tmp_path: Path, workers: str
) -> None:
    db = copy_db(compacted["db"], tmp_path / "tampered.db")
    victim = next(row for row in compacted["outcomes"] if row["status"] == "accepted")
    conversation, summary = victim["conversation"], victim["summary"]
    with sqlite3.connect(db) as conn:
        (turn_id,) = conn.execute(
            "SELECT turn_id FROM summary_sources s JOIN summaries v ON v.pk = s.summary_pk"
            " WHERE v.id = ? ORDER BY position LIMIT 1",
            (summary,),
        ).fetchone()
        changed = conn.execute(
            "UPDATE turns SET body = body || ' (tampered)' WHERE conversation_id = ? AND id = ?",
            (conversation, turn_id),
        ).rowcount
        assert changed == 1
    # The store's fast path trusts the stored status: tampering behind its back goes unseen...
    before = run_json("context", str(db), conversation, "--json")
    assert before["summary"] == summary and before["fallback"] is None

    report = run_json("revalidate", str(db), "--workers", workers, "--json")
    assert report["stale"] == 1
    assert report["current"] == report["summaries_checked"] - 1
    assert report["stale_summaries"] == [
        {
            "conversation": conversation,
            "summary": summary,
            "reason": "source-modified",
            "turn": None,
        }
    ]
    # The turn's stored digest is repaired, and the report says so.
    assert report["digests_repaired"] == 1
    assert report["wrong_digests"] == [{"conversation": conversation, "turn": turn_id}]
    # ...until revalidation marks it stale: then the context falls back to raw turns.
    after = run_json("context", str(db), conversation, "--json")
    assert after["summary"] is None
    assert after["fallback"] == "stale-summary:source-modified"
    inspected = run_json("inspect", str(db), conversation, "--json")
    assert inspected["current_summary"] is None
    assert {"id": summary, "status": "stale", "reason": "source-modified"}.items() <= next(
        v for v in inspected["versions"] if v["id"] == summary
    ).items()
    # A second pass finds nothing more to do.
    again = run_json("revalidate", str(db), "--json")
    assert again["stale"] == 0 and again["summaries_checked"] == report["summaries_checked"] - 1
    assert again["digests_wrong"] == 0


def test_context_json_gives_valid_chat_messages(compacted: dict[str, Any]) -> None:
    for row in compacted["outcomes"][:40]:
        payload = run_json("context", str(compacted["db"]), row["conversation"], "--json")
        messages = payload["messages"]
        assert payload["history_boundary"] is None
        assert all(m["role"] in CHAT_ROLES and isinstance(m["content"], str) for m in messages)
        summaries = [m for m in messages if "<ledgerfold-summary>" in m["content"]]
        if row["status"] == "accepted":
            assert payload["fallback"] is None and payload["summary"] == row["summary"]
            assert len(summaries) == 1 and summaries[0]["role"] == "system"
        else:
            assert payload["fallback"] == "no-summary" and summaries == []
        for message in messages:
            if "tool_call_id" in message:
                assert message["role"] == "tool"
            for call in message.get("tool_calls", []):
                assert call["type"] == "function" and "name" in call["function"]


def test_context_table_and_inspect_print(compacted: dict[str, Any]) -> None:
    row = next(r for r in compacted["outcomes"] if r["status"] == "accepted")
    result = run("context", str(compacted["db"]), row["conversation"])
    assert result.exit_code == 0 and "SUMMARY" in result.stdout
    result = run("inspect", str(compacted["db"]), row["conversation"])
    assert result.exit_code == 0 and "current" in result.stdout


def test_purge_records_a_history_boundary(compacted: dict[str, Any], tmp_path: Path) -> None:
    db = copy_db(compacted["db"], tmp_path / "purged.db")
    conversation = compacted["outcomes"][0]["conversation"]
    # Sequence 3 calls a tool whose result (4) would stay raw: the purge stops before it.
    result = run("purge", str(db), conversation, "--through", "3", "--reason", "retention")
    assert result.exit_code == 0, result.output
    assert "through sequence 2" in result.output
    payload = run_json("context", str(db), conversation, "--json")
    assert payload["history_boundary"]["through_sequence"] == 2
    assert payload["history_boundary"]["reason"] == "retention"
    # The system prompt stays raw (SPEC §15.2's preserve_roles), then the
    # call, then its result.
    assert [m["role"] for m in payload["messages"][:3]] == ["system", "assistant", "tool"]
    inspected = run_json("inspect", str(db), conversation, "--json")
    assert inspected["history_boundary"]["through_sequence"] == 2


def test_demo_runs_to_completion(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = run("demo", "--db", str(db))
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (
        "active-constraint",
        "pending-confirmation",
        "SUMMARY",
        "stale-summary:source-modified",
        "still current and reused",
        "superseded",
        "current",
        "recall_history",
        "Revenue grew 12%",  # the original tool output, recalled word for word
    ):
        assert expected in out
    assert "✗" not in out
    # A second run in the same database (asked for) uses a fresh conversation.
    assert run("demo", "--db", str(db), "--append").exit_code == 0
    with sqlite3.connect(db) as conn:
        ids = {r[0] for r in conn.execute("SELECT id FROM conversations")}
    assert ids == {"demo", "demo-2"}


def test_demo_without_db_says_the_database_it_names_is_gone() -> None:
    """Step 1 names the temporary database; the run removes it, and says so (and how to
    keep it), so that a newcomer does not look for a file that is no longer there."""
    result = run("demo")
    assert result.exit_code == 0, result.output
    named = re.search(r"in (\S+demo\.db):", result.stdout)
    assert named is not None and not Path(named.group(1)).exists()
    last = result.stdout.strip().splitlines()[-1]
    assert f"{named.group(1)} removed" in last and "--db PATH" in last


def test_demo_as_a_real_process_leaves_no_temp_file() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "ledgerfold", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "Version history" in completed.stdout
    assert completed.stderr == ""


@pytest.fixture(scope="module")
def error_fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("errors")
    text = base / "notes.txt"
    text.write_text("not a database\n", encoding="utf-8")
    foreign = base / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE things (a)")
    bad_jsonl = base / "bad.jsonl"
    bad_jsonl.write_text('{"conversation_id": "x", "source": "s", "turns": 5}\n', encoding="utf-8")
    return {"base": base, "text": text, "foreign": foreign, "bad_jsonl": bad_jsonl}


ERROR_CASES = [
    ("missing database", ["context", "{base}/nope.db", "c"]),
    ("unknown conversation", ["context", "{db}", "no-such-conversation"]),
    ("inspect unknown conversation", ["inspect", "{db}", "no-such-conversation"]),
    ("a directory as database", ["revalidate", "{base}"]),
    ("not an sqlite file", ["inspect", "{text}", "c"]),
    ("another application's database", ["compact", "{foreign}"]),
    ("missing transcript", ["import", "{base}/new.db", "{base}/missing.jsonl"]),
    ("directory as transcript", ["import", "{base}/new.db", "{base}"]),
    ("malformed transcript", ["import", "{base}/new.db", "{bad_jsonl}"]),
    ("bad keep-tail", ["compact", "{db}", "--keep-tail", "0"]),
    ("bad workers", ["revalidate", "{db}", "--workers", "0"]),
    ("missing option", ["purge", "{db}", "c", "--reason", "r"]),
    ("blank purge reason", ["purge", "{db}", "c", "--through", "1", "--reason", " "]),
    ("unknown command", ["frobnicate"]),
    ("missing argument", ["context"]),
    ("unknown conversation to compact", ["compact", "{db}", "--conversation", "nope"]),
]


@pytest.mark.parametrize(("case", "args"), ERROR_CASES, ids=[c for c, _ in ERROR_CASES])
def test_user_errors_are_one_line_and_exit_2(
    case: str, args: list[str], compacted: dict[str, Any], error_fixtures: dict[str, Path]
) -> None:
    values = {key: str(value) for key, value in error_fixtures.items()}
    values["db"] = str(compacted["db"])
    result = run(*(arg.format(**values) for arg in args))
    assert result.exit_code == 2, (case, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, (case, result.stderr)
    assert lines[0].startswith("ledgerfold: error: ")
    assert "Traceback" not in result.output


def test_import_of_deeply_nested_json_is_one_line_and_exit_2(tmp_path: Path) -> None:
    # Regression: a RecursionError with a 39-line traceback and exit 1.
    deep = tmp_path / "deep.jsonl"
    good = json.dumps({"conversation_id": "ok", "source": "s", "turns": []})
    deep.write_text(
        good + "\n" + '{"conversation_id": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
        encoding="utf-8",
    )
    completed = subprocess.run(
        [sys.executable, "-m", "ledgerfold", "import", str(tmp_path / "new.db"), str(deep)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2, completed.stderr[-500:]
    assert completed.stderr == f"ledgerfold: error: {deep}:2: not valid JSON (nested too deeply)\n"
    assert not (tmp_path / "new.db").exists()  # a malformed file imports nothing


def test_user_error_in_a_real_process(error_fixtures: dict[str, Path]) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "ledgerfold", "inspect", str(error_fixtures["foreign"]), "c"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1
    assert completed.stderr.startswith("ledgerfold: error: ")


@pytest.mark.parametrize(
    ("command", "creates"),
    [
        (["context", "{db}", "c"], False),
        (["import", "{db}", "{data}"], True),
        (["demo", "--db", "{db}"], True),
        (["revalidate", "{db}"], False),
    ],
    ids=["context", "import", "demo", "revalidate"],
)
def test_every_command_words_a_bad_database_path_alike(
    command: list[str], creates: bool, tmp_path: Path
) -> None:
    missing_dir = tmp_path / "none"
    cases = [(tmp_path, f"{tmp_path}: is a directory, not a database file")]
    if creates:
        db = missing_dir / "new.db"
        cases.append((db, f"{db}: the directory {str(missing_dir)!r} does not exist"))
    else:
        db = tmp_path / "missing.db"
        cases.append((db, f"{db}: no such database"))
    for path, message in cases:
        result = run(*(arg.format(db=path, data=DATA_FILES[0]) for arg in command))
        assert result.exit_code == 2, result.output
        assert result.stderr == f"ledgerfold: error: {message}\n"
        assert not path.is_file()  # nothing created on the way to the error


def test_ledgerfold_alone_prints_its_help_readably() -> None:
    """What a newcomer types first: the usage and the commands, one per line, not the help
    folded into one error line."""
    result = run()
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Usage: ")  # the program name is CliRunner's here
    assert "Commands:" in lines and any(line.split()[:1] == ["demo"] for line in lines)
    assert "ledgerfold: error:" not in result.stderr


def test_every_option_says_what_it_does() -> None:
    """`--help` is where a newcomer learns an option: none is listed bare."""
    bare = [
        (name, option.opts[0])
        for name, command in sorted(cli.commands.items())
        for option in command.params
        if isinstance(option, click.Option) and not option.help
    ]
    assert bare == []


def test_context_rows_say_why_a_turn_in_the_summarys_span_is_raw(tmp_path: Path) -> None:
    """The demo's system prompt sits before the summary, raw: the table says it is
    preserved (its role), as it says why the protected turns and the tail are raw."""
    db = tmp_path / "demo.db"
    result = run("demo", "--db", str(db))
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.stdout.splitlines() if "\t" in line]
    system = next(row for row in rows if row[2] == "m1")
    assert system[3] == "preserved (system role)"
    shown = run("context", str(db), "demo", "--preview").stdout
    first = next(line for line in shown.splitlines() if line.startswith("1\t"))
    assert first.split("\t")[3] == "preserved (system role)"


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["context", "", "c"], "database"),
        (["revalidate", ""], "database"),
        (["upgrade", ""], "database"),
        (["demo", "--db", ""], "database"),
        (["import", "", str(DATA_FILES[0])], "database"),
        (["import", "{tmp}/new.db", ""], "transcript"),
    ],
)
def test_an_empty_path_is_called_empty(args: list[str], what: str, tmp_path: Path) -> None:
    """An unset shell variable (`ledgerfold list "$DB"`) is an empty path, not the current
    directory: the error says so, and nothing is created."""
    result = run(*(arg.format(tmp=tmp_path) for arg in args))
    assert result.exit_code == 2, result.output
    assert result.stderr == f"ledgerfold: error: the {what} path is empty\n"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["purge", "{db}", "c", "--through", "{huge}", "--reason", "r"], "--through"),
        (["purge", "{db}", "c", "--through", "{huge}", "--reason", "r", "--dry-run"], "--through"),
        (["compact", "{db}", "--keep-tail", "{huge}"], "--keep-tail"),
        (["compact", "{db}", "--keep-tail", "{huge}", "--dry-run"], "--keep-tail"),
        (["revalidate", "{db}", "--workers", "{huge}"], "--workers"),
        (
            ["export", "{db}", "--parquet", "{out}", "--turns-per-file", "{huge}"],
            "--turns-per-file",
        ),
    ],
)
def test_a_number_too_large_names_its_option(
    args: list[str], option: str, compacted: dict[str, Any], tmp_path: Path
) -> None:
    """Past 2**63-1 (what SQLite stores) a number is refused as the option the user typed,
    not as the library's parameter (`sequence`, `keep_tail`)."""
    values = {"db": compacted["db"], "huge": str(2**63), "out": tmp_path / "out"}
    result = run(*(arg.format(**values) for arg in args))
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and f"'{option}'" in lines[0], lines
