"""`ledgerfold context DB CONVERSATION`: without `--policy-version` it assembles the context
under the policy of the conversation's own summary, as `list` and the inspector page do,
so the three never disagree about whether the summary is in use."""

from __future__ import annotations

from pathlib import Path

from cli_support import run, run_json
from ledgerfold import SQLiteStore


def test_context_defaults_to_the_summarys_own_policy(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    assert run("demo", "--db", str(db)).exit_code == 0  # compacts under its own policy
    (listed,) = run_json("list", str(db), "--json")
    assert listed["status"] == "current"
    context = run_json("context", str(db), "demo", "--json")
    assert context["fallback"] is None
    assert context["summary"] == listed["summary"]
    assert context["policy_version"] == "demo-v1"
    text = run("context", str(db), "demo").stdout
    assert f"summary in use: {listed['summary']}" in text
    # Asked for another policy, the context is assembled under it.
    other = run_json("context", str(db), "demo", "--json", "--policy-version", "v1")
    assert other["fallback"] == "stale-summary:policy-mismatch"


def test_context_of_a_conversation_never_summarised(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(3)])
    context = run_json("context", str(db), "c", "--json")
    assert context["policy_version"] == "v1" and context["fallback"] == "no-summary"


def test_compact_keeps_each_conversations_own_policy(tmp_path: Path) -> None:
    """`compact` without `--policy-version` writes under the policy the conversation's
    summary already has: the application that reads the context under that policy keeps
    its summary (a `v1` one would make it fall back to every turn raw)."""
    db = tmp_path / "demo.db"
    assert run("demo", "--db", str(db)).exit_code == 0  # policy demo-v1
    with SQLiteStore(db) as store:
        store.append("demo", "user", "One more thing: rename notes.txt to todo.txt.")
    planned = run_json("compact", str(db), "--dry-run", "--keep-tail", "2", "--json")
    assert [plan["status"] for plan in planned] == ["rolling"]
    (outcome,) = run_json("compact", str(db), "--keep-tail", "2", "--json")
    assert outcome["status"] == "accepted"
    context = run_json("context", str(db), "demo", "--json", "--policy-version", "demo-v1")
    assert context["fallback"] is None and context["summary"] == outcome["summary"]
    # Named, the policy is used as given.
    (named,) = run_json("compact", str(db), "--policy-version", "v1", "--json")
    assert named["status"] == "accepted"
    assert run_json("context", str(db), "demo", "--json")["policy_version"] == "v1"


def test_a_blank_policy_version_names_the_option(tmp_path: Path) -> None:
    """As `compact` says it: the option the user typed, not the library's parameter."""
    db = tmp_path / "plain.db"
    with SQLiteStore(db) as store:
        store.append("c", "user", "hello")
    for blank in ("", "  "):
        result = run("context", str(db), "c", "--policy-version", blank)
        assert result.exit_code == 2
        assert result.stdout == ""
        assert result.stderr == "ledgerfold: error: --policy-version: must not be blank\n"


def test_context_rows_after_the_summary_say_why_they_are_raw(tmp_path: Path) -> None:
    """The raw turns after the summary had an empty "raw because" cell."""
    db = tmp_path / "agent.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    assert run("compact", str(db), "--keep-tail", "3").exit_code == 0
    rows = [line.split("\t") for line in run("context", str(db), "c").stdout.splitlines()]
    raw = [row for row in rows if row[0] in ("10", "11", "12")]
    assert [row[3] for row in raw] == ["after the summary"] * 3


def test_a_conversation_never_compacted_says_how_to_compact_it(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    with SQLiteStore(db) as store:
        store.append("task 9#1", "user", "hello")
    last = run("context", str(db), "task 9#1").stdout.splitlines()[-1]
    assert last == (
        "fallback: no-summary (every turn raw: none written yet;"
        f" `ledgerfold compact {db} --conversation 'task 9#1'` writes one)"
    )
