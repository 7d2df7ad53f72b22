"""`ledgerfold import`: sequences kept, whole files validated before anything is written
(SPEC §15.6), and OpenAI fine-tuning files; plus the
store's explicit sequences in `append_many` (SPEC §15.8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import InvalidInput, SQLiteStore

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"


def line(conversation_id: str, sequences: list[int], **extra: Any) -> str:
    turns = [
        {"id": f"{conversation_id}-t{s}", "sequence": s, "role": "user", "body": f"b{s}"}
        for s in sequences
    ]
    return json.dumps({"conversation_id": conversation_id, "source": "s", "turns": turns, **extra})


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(text + "\n" for text in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- store


def test_append_many_keeps_explicit_sequences_with_gaps() -> None:
    with SQLiteStore() as store:
        turns = store.append_many(
            "c",
            [
                {"role": "user", "body": "a", "sequence": 3},
                {"role": "user", "body": "b"},
                {"role": "user", "body": "c", "sequence": 10},
            ],
        )
        assert [t.sequence for t in turns] == [3, 4, 10]
        assert store.append("c", "user", "d").sequence == 11
        assert [t.sequence for t in store.load("c").turns] == [3, 4, 10, 11]


def test_explicit_sequence_must_exceed_every_sequence_ever_written() -> None:
    with SQLiteStore() as store:
        store.append_many("c", [{"id": "a", "role": "user", "body": "a", "sequence": 5}])
        store.retract("c", "a")
        with pytest.raises(InvalidInput) as caught:
            store.append_many("c", [{"role": "user", "body": "b", "sequence": 5}])
        assert caught.value.field == "turns[0].sequence"
        with pytest.raises(InvalidInput) as caught:
            store.append_many(
                "c",
                [
                    {"role": "user", "body": "b", "sequence": 8},
                    {"role": "user", "body": "c", "sequence": 8},
                ],
            )
        assert caught.value.field == "turns[1].sequence"
        assert store.load("c").revision == 2  # nothing written by the refused batches
        assert store.append_many("c", [{"role": "user", "body": "b", "sequence": 6}])


# --------------------------------------------------------------------------- import


def test_import_keeps_sequences_sorted_with_gaps(tmp_path: Path) -> None:
    source = write(tmp_path / "seq.jsonl", line("a", [3, 1, 2]), line("b", [2, 9, 5]))
    db = tmp_path / "seq.db"
    assert run("import", str(db), str(source)).exit_code == 0
    with SQLiteStore(db) as store:
        a, b = store.load("a"), store.load("b")
    assert [(t.id, t.sequence) for t in a.turns] == [("a-t1", 1), ("a-t2", 2), ("a-t3", 3)]
    assert [t.sequence for t in b.turns] == [2, 5, 9]


@pytest.mark.parametrize(
    ("bad_line", "needle"),
    [
        (line("c", [1, 2, 2]), "turns[2].sequence: 2 appears twice"),
        (line("\ud800", [1]), "conversation_id"),
        (line("   ", [1]), "conversation_id: must not be blank"),
        (line("", [1]), "conversation_id"),
        (line("a", [4]), "conversation_id 'a' also appears at"),
        (line("c", [0]), "turns[0].sequence"),
    ],
)
def test_a_bad_later_line_imports_nothing_and_names_file_and_line(
    tmp_path: Path, bad_line: str, needle: str
) -> None:
    source = write(tmp_path / "mixed.jsonl", line("a", [1, 2]), line("b", [1]), bad_line)
    db = tmp_path / "mixed.db"
    result = run("import", str(db), str(source))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"ledgerfold: error: {source}:3: ")
    assert needle in result.stderr and len(result.stderr.splitlines()) == 1
    assert not db.exists()  # validated before the database was even opened


def test_shared_transcripts_keep_their_sequences(tmp_path: Path) -> None:
    source = SHARED / "transcripts" / "openhands.jsonl"
    db = tmp_path / "oh.db"
    assert run("import", str(db), str(source)).exit_code == 0
    with SQLiteStore(db) as store:
        for text in source.open(encoding="utf-8"):
            record = json.loads(text)
            stored = store.load(record["conversation_id"])
            assert [(t.id, t.sequence) for t in stored.turns] == [
                (t["id"], t["sequence"]) for t in record["turns"]
            ]


# --------------------------------------------------------------------------- fine-tuning


def test_openai_fine_tuning_file_imports_directly(tmp_path: Path) -> None:
    calls = [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
        }
    ]
    conversations = [
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Look it up."},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_1", "content": "found"},
            {"role": "assistant", "content": "Found it."},
        ],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
    ]
    source = write(tmp_path / "train.jsonl", *(json.dumps({"messages": m}) for m in conversations))
    db = tmp_path / "ft.db"
    result = run("import", str(db), str(source), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"conversations": 2, "turns": 7, "skipped": 0}
    with SQLiteStore(db) as store:
        assert store.conversation_ids() == ["train:1", "train:2"]
        first = store.load("train:1")
    assert [t.role for t in first.turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert first.turns[2].group == first.turns[3].group is not None
    context = json.loads(run("context", str(db), "train:1", "--json").stdout)
    assert context["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert context["messages"][3] == {"role": "tool", "content": "found", "tool_call_id": "call_1"}


def test_a_bad_fine_tuning_line_names_file_and_line(tmp_path: Path) -> None:
    source = write(
        tmp_path / "ft.jsonl",
        json.dumps({"messages": [{"role": "user", "content": "ok"}]}),
        json.dumps({"messages": [{"role": "wizard", "content": "no"}]}),
    )
    db = tmp_path / "ft.db"
    result = run("import", str(db), str(source))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"ledgerfold: error: {source}:2: messages[0]")
    assert not db.exists()


def test_import_help_gives_the_line_format() -> None:
    """A newcomer's own logs: `--help` says what a line holds, whole, without pointing into
    files an installed package does not have (the repository's tests, a private folder)."""
    shown = " ".join(run("import", "--help").stdout.split())
    for key in ("conversation_id", "turns", "sequence", "role", "body", "tool_call_ids"):
        assert key in shown
    assert "the calls an assistant turn makes, or the one a tool turn answers" in shown
    assert "tests/" not in shown and "shared/data" not in shown


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="no /dev/stdin")
def test_a_transcript_can_come_from_a_pipe(tmp_path: Path) -> None:
    """`zcat t.jsonl.gz | ledgerfold import DB /dev/stdin`: a pipe exists and is read once,
    like a file; it is not "no such file". A device is refused as what it is."""
    db = tmp_path / "agent.db"
    completed = subprocess.run(
        [sys.executable, "-m", "ledgerfold", "import", str(db), "/dev/stdin", "--json"],
        input=line("piped", [1, 2]) + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["conversations"] == 1
    with SQLiteStore(db, read_only=True) as store:
        assert [turn.sequence for turn in store.load("piped")] == [1, 2]
    result = run("import", str(db), "/dev/null")
    assert result.exit_code == 2
    assert result.stderr == "ledgerfold: error: /dev/null: not a regular file or a pipe\n"


@pytest.mark.parametrize(
    "lines",
    [(), ("", "   "), (json.dumps({"conversation_id": "c", "source": "s", "turns": []}),)],
    ids=["no-lines", "blank-lines", "no-turns"],
)
def test_an_import_that_imports_nothing_creates_no_database(
    tmp_path: Path, lines: tuple[str, ...]
) -> None:
    """As an import with nothing new into an existing database writes nothing, an import
    of a transcript holding nothing creates no (empty, 150 KB) database: one line, exit 0."""
    source = write(tmp_path / "empty.jsonl", *lines)
    db = tmp_path / "new.db"
    result = run("import", str(db), str(source))
    assert result.exit_code == 0, result.output
    said = f"imported 0 conversations, 0 turns (nothing to import, {db} not created)\n"
    assert result.stdout == said
    assert list(tmp_path.iterdir()) == [source]
    assert json.loads(run("import", str(db), str(source), "--json").stdout) == {
        "conversations": 0,
        "turns": 0,
        "skipped": 0,
    }
    assert list(tmp_path.iterdir()) == [source]
    # An empty file named as the database is left as it is (not made a database).
    db.touch()
    result = run("import", str(db), str(source))
    assert result.stdout == "imported 0 conversations, 0 turns (nothing to import)\n"
    assert db.stat().st_size == 0
    db.unlink()
    # Into a database that exists, the same import writes nothing and says so too; its JSON
    # is a new database's.
    assert run("import", str(db), str(write(tmp_path / "a.jsonl", line("a", [1])))).exit_code == 0
    before = db.read_bytes()
    result = run("import", str(db), str(source))
    said = "imported 0 conversations, 0 turns (nothing to import)\n"
    assert (result.exit_code, result.stdout) == (0, said)
    assert json.loads(run("import", str(db), str(source), "--json").stdout) == {
        "conversations": 0,
        "turns": 0,
        "skipped": 0,
    }
    assert db.read_bytes() == before


def test_help_names_every_required_field() -> None:
    """`import --help` names `source`, which a transcript line must have (else refused)."""
    result = run("import", "--help")
    assert result.exit_code == 0
    assert '"conversation_id", "source", "turns"' in " ".join(result.stdout.split())
