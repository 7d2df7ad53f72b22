"""`ledgerfold list`, `compact --dry-run`, `--json` on the reporting subcommands, plain rows
when piped and the revalidation progress bar (SPEC §15.7), on real
transcripts of shared/data."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import copy_db, run, run_json
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, SummaryRequest
from ledgerfold._cli.render import echo_json
from ledgerfold._errors import InvalidInput
from ledgerfold.revalidate import revalidate_database
from ledgerfold.tokens import approx_tokens

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
SMALL_FILES = [
    SHARED / "transcripts" / "docent_inspect.jsonl",
    SHARED / "transcripts" / "openhands.jsonl",
]
BOX_DRAWING = set("─━│┃┌┐└┘├┤┬┴┼╭╮╯╰═║╔╗╚╝╇╈┡┩")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small shared transcripts imported, nothing compacted yet."""
    assert all(path.is_file() for path in SMALL_FILES), SMALL_FILES
    db = tmp_path_factory.mktemp("list") / "imported.db"
    assert run("import", str(db), *map(str, SMALL_FILES)).exit_code == 0
    return db


@pytest.fixture(scope="module")
def compacted(imported: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = copy_db(imported, tmp_path_factory.mktemp("list") / "compacted.db")
    assert run("compact", str(db), "--keep-tail", "4").exit_code == 0
    return db


def transcript_lines() -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in SMALL_FILES
        for line in path.open(encoding="utf-8")
        if line.strip()
    ]


# --------------------------------------------------------------------------- list


def test_list_json_counts_turns_and_reports_no_summary(imported: Path) -> None:
    rows = run_json("list", str(imported), "--json")
    expected = {line["conversation_id"]: len(line["turns"]) for line in transcript_lines()}
    assert {row["conversation"]: row["turns"] for row in rows} == expected
    for row in rows:
        assert row["status"] == "none" and row["summary"] is None and row["summaries"] == 0
        assert row["history_boundary"] is None


def test_list_reports_current_stale_and_the_boundary(compacted: Path, tmp_path: Path) -> None:
    db = copy_db(compacted, tmp_path / "changed.db")
    rows = run_json("list", str(db), "--json")
    assert rows and all(row["status"] == "current" and row["summary"] for row in rows)
    edited, purged = rows[0]["conversation"], rows[1]["conversation"]
    with SQLiteStore(db) as store:
        source = store.sources_of(rows[0]["summary"])[0]
        store.edit(edited, source.id, body="changed")
        store.purge_through(purged, 2, "retention")
    after = {row["conversation"]: row for row in run_json("list", str(db), "--json")}
    assert after[edited]["status"] == "stale"
    assert after[edited]["reason"] == "source-modified"
    assert after[edited]["summary"] == rows[0]["summary"]
    assert after[purged]["history_boundary"]["through_sequence"] == 2
    assert after[purged]["history_boundary"]["reason"] == "retention"
    text = run("list", str(db))
    assert text.exit_code == 0
    line = next(line for line in text.stdout.splitlines() if line.startswith(edited + "\t"))
    assert "stale (source-modified)" in line.split("\t")


def test_list_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    result = run("list", str(missing))
    assert result.exit_code == 2 and "no such database" in result.stderr
    assert not missing.exists() and list(tmp_path.iterdir()) == []


def test_list_of_a_database_with_no_conversation_says_so(tmp_path: Path) -> None:
    """No conversation: one line saying so (not a header-only table); `--json` is []."""
    db = tmp_path / "empty.db"
    SQLiteStore(db).close()
    result = run("list", str(db))
    assert (result.exit_code, result.stdout) == (0, f"no conversation in {db}\n")
    assert run_json("list", str(db), "--json") == []
    # Its last conversation deleted, a database says the same.
    assert run("import", str(db), str(SMALL_FILES[0])).exit_code == 0
    for row in run_json("list", str(db), "--json"):
        assert run("delete", str(db), row["conversation"], "--yes").exit_code == 0
    assert run("list", str(db)).stdout == f"no conversation in {db}\n"


# --------------------------------------------------------------------------- dry run


def test_dry_run_writes_nothing(compacted: Path, tmp_path: Path) -> None:
    db = copy_db(compacted, tmp_path / "dry.db")
    with SQLiteStore(db) as store:  # new turns, so the dry run has work to show
        cid = store.conversation_ids()[0]
        for n in range(6):
            store.append(cid, "user", f"new turn {n}")
        history = {c: store.summary_history(c) for c in store.conversation_ids()}
    before = db.read_bytes()
    plans = run_json("compact", str(db), "--dry-run", "--json", "--keep-tail", "4")
    assert any(plan["requests"] for plan in plans)
    assert db.read_bytes() == before
    with SQLiteStore(db) as store:
        assert {c: store.summary_history(c) for c in store.conversation_ids()} == history
        assert store.consecutive_failures(cid) == 0
    table = run("compact", str(db), "--dry-run", "--keep-tail", "4")
    assert table.exit_code == 0 and "nothing written" in table.stdout
    assert db.read_bytes() == before


class Recorder:
    def __init__(self) -> None:
        self.requests: list[SummaryRequest] = []

    def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        return f"summary of {len(request.turns)} turns"


def _real_request(db: Path, cid: str, keep_tail: int) -> SummaryRequest:
    recorder = Recorder()
    with SQLiteStore(db) as store:
        outcome = Compactor(store, CompactionPolicy("v1", keep_tail=keep_tail), recorder).compact(
            cid, force=True
        )
    assert outcome.status == "accepted", outcome
    return recorder.requests[0]


@pytest.mark.parametrize("keep_tail", [4, 6])
def test_dry_run_shows_what_the_summarizer_gets(
    imported: Path, tmp_path: Path, keep_tail: int
) -> None:
    """A first summary (none yet: not a rebase), then a rolling extension
    after new turns: the dry run's first request is the request the Compactor then makes."""
    db = copy_db(imported, tmp_path / "plan.db")
    cid = run_json("list", str(db), "--json")[0]["conversation"]
    args = ("compact", str(db), "--conversation", cid, "--dry-run", "--json")
    (plan,) = run_json(*args, "--keep-tail", str(keep_tail))
    assert plan["status"] == "first" and plan["current_summary"] is None
    first = plan["requests"][0]
    request = _real_request(db, cid, keep_tail)
    assert first["turns"] == [item.id for item in request.turns]
    assert first["tokens"] == sum(approx_tokens(item.text) for item in request.turns)
    assert first["covered_count"] == request.covered_count == 0
    assert plan["tokens"] == sum(r["tokens"] for r in plan["requests"])

    while run_json(*args, "--keep-tail", str(keep_tail))[0]["requests"]:
        _real_request(db, cid, keep_tail)  # fold the backlog chunk by chunk
    with SQLiteStore(db) as store:
        current = store.current_summary(cid)
        assert current is not None
        for n in range(keep_tail + 3):
            store.append(cid, "user" if n % 2 else "assistant", f"later turn {n}")
    (rolling,) = run_json(*args, "--keep-tail", str(keep_tail))
    assert rolling["status"] == "rolling" and rolling["current_summary"] == current.id
    assert rolling["new_turns"] == keep_tail + 3  # the old tail and the first 3 new turns
    request = _real_request(db, cid, keep_tail)
    assert rolling["requests"][0]["turns"] == [item.id for item in request.turns]
    assert rolling["requests"][0]["covered_count"] == request.covered_count
    assert request.covered_count == len(current.source_ids)
    assert rolling["requests"][0]["previous_summary"] == current.id


def test_dry_run_after_a_larger_keep_tail_is_a_rebase(compacted: Path) -> None:
    plans = run_json("compact", str(compacted), "--dry-run", "--json", "--keep-tail", "30")
    assert {plan["status"] for plan in plans} <= {"rebase", "nothing-to-compact"}
    assert any(plan["status"] == "rebase" for plan in plans)
    for plan in plans:
        if plan["requests"]:
            assert plan["requests"][0]["covered_count"] == 0


# --------------------------------------------------------------------------- --json


def test_demo_json_is_one_strict_object(tmp_path: Path) -> None:
    report = run_json("demo", "--json", "--db", str(tmp_path / "demo.db"))
    assert report["conversation"] == "demo" and report["db"] == str(tmp_path / "demo.db")
    assert [step["status"] for step in report["compactions"]] == ["accepted"] * 3
    assert all(value for key, value in report["checks"].items())
    assert report["checks"]["stale_after_edit_fallback"] == "stale-summary:source-modified"
    assert report["versions"][-1]["status"] == "current"


def test_compact_and_import_json(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    counts = run_json("import", str(db), str(SMALL_FILES[1]), "--json")
    assert counts == {"conversations": 5, "turns": counts["turns"], "skipped": 0}
    rows = run_json("compact", str(db), "--json")
    assert len(rows) == 5 and "accepted" in {row["status"] for row in rows}
    assert {row["status"] for row in rows} <= {"accepted", "skipped"}


def test_json_output_refuses_nan() -> None:
    with pytest.raises(InvalidInput) as caught:
        echo_json({"x": float("nan")})
    assert caught.value.field == "output"


# --------------------------------------------------------------------------- piped tables


def test_piped_tables_are_plain_rows(compacted: Path) -> None:
    cid = run_json("list", str(compacted), "--json")[0]["conversation"]
    for args in (
        ["list", str(compacted)],
        ["inspect", str(compacted), cid],
        ["context", str(compacted), cid, "--preview"],
        ["compact", str(compacted), "--dry-run"],
    ):
        completed = subprocess.run(
            [sys.executable, "-m", "ledgerfold", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert completed.returncode == 0, completed.stderr
        out = completed.stdout
        assert not BOX_DRAWING & set(out), args
        assert "\t" in out
    # One line per context item (plus the title and header), however long a cell is.
    context = run_json("context", str(compacted), cid, "--json")
    lines = completed_lines(["context", str(compacted), cid, "--preview"])
    rows = [line for line in lines if line.count("\t") == 4]
    assert len(rows) == len(context["messages"]) + 1  # the header row too
    assert max(len(line) for line in lines) > 80


def completed_lines(args: list[str]) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "ledgerfold", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return completed.stdout.splitlines()


# --------------------------------------------------------------------------- progress


def test_revalidate_reports_its_total(compacted: Path) -> None:
    totals: list[int] = []
    done: list[int] = []
    revalidate_database(compacted, workers=1, on_total=totals.append, progress=done.append)
    with SQLiteStore(compacted) as store:
        summarised = sum(1 for c in store.conversation_ids() if store.current_summary(c))
    assert totals == [summarised] and sum(done) == summarised


def test_revalidate_progress_bar_on_a_terminal_only(compacted: Path) -> None:
    """On a terminal stderr the bar shows done/total; piped, stderr stays empty."""
    with SQLiteStore(compacted) as store:
        total = sum(1 for c in store.conversation_ids() if store.current_summary(c))
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "ledgerfold", "revalidate", str(compacted), "--workers", "1"],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(secondary)
    seen = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the process closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert process.wait(timeout=60) == 0
    os.close(primary)
    assert f"{total}/{total}".encode() in seen
    assert process.stdout is not None and b"current" in process.stdout.read()
    piped = subprocess.run(
        [sys.executable, "-m", "ledgerfold", "revalidate", str(compacted)],
        capture_output=True,
        timeout=60,
    )
    assert (piped.returncode, piped.stderr) == (0, b"")


def test_nothing_to_compact_still_counts_what_the_summary_covers(tmp_path: Path) -> None:
    """Folded already, a conversation's dry run said "covered 0" beside its summary of
    every compactable turn; the table and `--json` (`covered`) count them."""
    db = tmp_path / "folded.db"
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
    assert run("compact", str(db), "--keep-tail", "4").exit_code == 0
    args = ("compact", str(db), "--keep-tail", "4", "--dry-run")
    (plan,) = run_json(*args, "--json")
    assert (plan["status"], plan["covered"], plan["new_turns"]) == ("nothing-to-compact", 8, 0)
    rows = [line.split("\t") for line in run(*args).stdout.splitlines()]
    (row,) = [row for row in rows if row[0] == "c"]
    assert row[1:5] == ["nothing-to-compact", "", "8", "0"]
    with SQLiteStore(db) as store:
        store.append_many("c", [{"role": "user", "body": f"more {n}"} for n in range(3)])
    (rolling,) = run_json(*args, "--json")
    assert rolling["covered"] == rolling["requests"][0]["covered_count"] == 8
