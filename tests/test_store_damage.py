"""Damage in storage is a verdict or a `StoreError` naming
table, column and row, never stored text in a message (SPEC §15.5, §15.8 "Errors"); reading
works where the process cannot write, and commands that only read create or change nothing
(SPEC §15.7)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.revalidate import revalidate_database

PV = "v1"
CID = "c"
CARD = "4111111111111111"  # a card number: must never reach a message or the terminal


def _build(path: Path) -> None:
    with lf.SQLiteStore(path) as store:
        store.append_many(
            CID,
            [
                {
                    "id": f"t{i}",
                    "role": "user" if i % 2 else "assistant",
                    "body": f"card {CARD} X{i}",
                }
                for i in range(1, 9)
            ],
        )
        plan = store.start_plan(CID, 2, PV)
        made = lf.create_summary_envelope(plan, store.load(CID), "s1", PV, f"sum {CARD} Xs")
        assert made is not None and store.commit_summary(made).accepted


def _flip_after(path: Path, marker: str) -> None:
    """Flip the byte after every copy of `marker` in the file to 0xFF: the text stays where
    it is, but is no longer valid UTF-8 (the file is still a valid SQLite database)."""
    data = bytearray(path.read_bytes())
    needle = marker.encode()
    at = data.find(needle)
    assert at >= 0
    while at >= 0:
        data[at + len(needle)] = 0xFF
        at = data.find(needle, at + 1)
    path.write_bytes(bytes(data))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledgerfold", *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
    )


READS: dict[str, Callable[[lf.SQLiteStore], object]] = {
    "load": lambda store: store.load(CID),
    "context": lambda store: store.context(CID, PV),
    "context-other-policy": lambda store: store.context(CID, "v2"),
    "summary_history": lambda store: store.summary_history(CID),
    "current_summary": lambda store: store.current_summary(CID),
    "sources_of": lambda store: store.sources_of("s1"),
}


@pytest.mark.parametrize("damaged", ["body", "text"])
def test_undecodable_stored_text_never_reaches_a_message(tmp_path: Path, damaged: str) -> None:
    """A byte flipped in a turn body or a summary text (SQLite then quotes the bytes in its
    error): every read path of that row raises `StoreError` naming the table, column and
    operation, not chained to SQLite's message, never saying "nothing was written"; the CLI
    prints one line; the damaged text appears nowhere. (The current summary's record read
    by `context` and `current_summary` is a damaged record instead: the next test.)"""
    path = tmp_path / "ledger.db"
    _build(path)
    _flip_after(path, f"card {CARD} " if damaged == "body" else f"sum {CARD} ")
    table = "turns" if damaged == "body" else "summaries"
    for operation, read in READS.items():
        if operation in (
            ("summary_history", "current_summary")
            if damaged == "body"
            # The current summary's record: a damaged record, so a verdict (see below).
            else ("load", "context", "context-other-policy", "current_summary")
        ):
            continue  # reads no such column
        with lf.SQLiteStore(path) as store, pytest.raises(lf.StoreError) as caught:
            read(store)
        message = str(caught.value)
        assert CARD not in message and CARD not in repr(caught.value), operation
        # A read of live turns (`load`, the context) names the row, as any damaged one.
        if operation in ("load", "context", "context-other-policy") and damaged == "body":
            assert message.startswith("damaged row in table turns, column body: turn 't"), message
            continue
        assert f"column {damaged!r}" in message and table in message, message
        assert message.startswith(operation.split("-")[0] + ":"), message
        assert "nothing was written" not in message
        assert caught.value.__cause__ is None and caught.value.__suppress_context__
    report = revalidate_database(path, workers=2, mark_stale=False)  # packed reads: no decode
    assert CARD not in repr(report)
    outputs = [
        _cli("context", str(path), CID),
        _cli("context", str(path), CID, "--json"),
        _cli("inspect", str(path), CID),
        _cli("inspect", str(path), CID, "--json"),
        _cli("revalidate", str(path)),
        _cli("export", str(path), "--parquet", str(tmp_path / "out")),
    ]
    # The damaged text never shows; with a damaged summary the context is the raw turns,
    # whose (sound) bodies the `context` command prints as asked.
    secret = CARD if damaged == "body" else f"sum {CARD}"
    for done in outputs:
        assert secret not in done.stdout + done.stderr, done.args
        assert CARD not in done.stderr, done.args
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 2), (done.args, done.stderr)
    if damaged == "body":
        assert outputs[0].returncode == 2 and outputs[0].stderr.count("\n") == 1
    else:
        assert outputs[0].returncode == 0 and "damaged-record" in outputs[0].stdout


def _damage(path: Path, statement: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(statement)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("meta", ["{not json", "[1, 2]", '{"k": 5}'])
def test_a_damaged_meta_is_a_store_error_naming_table_column_and_row(
    tmp_path: Path, meta: str
) -> None:
    path = tmp_path / "ledger.db"
    _build(path)
    _damage(path, f"UPDATE turns SET meta = '{meta}' WHERE id = 't8'")
    with lf.SQLiteStore(path) as store:
        for read in (READS["load"], READS["context"], lambda s: s.get_turns(CID, ["t8"])):
            with pytest.raises(lf.StoreError) as caught:
                read(store)
            message = str(caught.value)
            assert "table turns" in message and "column meta" in message, message
            assert "'t8'" in message and "sequence 8" in message, message
            assert CARD not in message
    done = _cli("context", str(path), CID)
    assert done.returncode == 2 and "column meta" in done.stderr and "Traceback" not in done.stderr


def test_a_summary_with_a_null_fingerprint_is_stale_and_revalidation_goes_on(
    tmp_path: Path,
) -> None:
    """Damage in storage is a verdict, not a crash: the context falls back raw with a
    reason, revalidation reports the record and checks the others."""
    path = tmp_path / "ledger.db"
    _build(path)
    with lf.SQLiteStore(path) as store:  # a second, healthy conversation
        store.append_many("d", [{"role": "user", "body": f"b{i}"} for i in range(6)])
        lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1)).compact(
            "d", force=True
        )
    _damage(path, "UPDATE summaries SET source_fingerprint = NULL WHERE id = 's1'")
    with lf.SQLiteStore(path) as store:
        context = store.context(CID, PV)
        assert context.fallback == "stale-summary:damaged-record"
        assert context.fallback_id == "s1"
        assert [item.id for item in context.items] == [f"t{i}" for i in range(1, 9)]
        assert store.current_summary(CID) is None
        with pytest.raises(lf.StoreError, match="table summaries, column source_fingerprint"):
            store.summary_history(CID)
    report = revalidate_database(path, workers=1, mark_stale=False)
    assert report.summaries_checked == 2 and report.current == 1
    assert [(s.conversation_id, s.summary_id, s.reason) for s in report.stale_summaries] == [
        (CID, "s1", "damaged-record")
    ]
    done = _cli("revalidate", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stale"] == 1
    conn = sqlite3.connect(path)
    marked = conn.execute("SELECT status, reason FROM summaries WHERE id = 's1'").fetchone()
    conn.close()
    assert marked == ("stale", "damaged-record")
    with lf.SQLiteStore(path) as store:  # a compaction replaces it (a rebase)
        outcome = lf.Compactor(
            store, lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1)
        ).compact(CID, force=True)
        assert outcome.status == "accepted"
        assert store.context(CID, PV).fallback is None


def _as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None
    command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run(
        [*command, sys.executable, *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to another user")
def test_reading_works_in_a_directory_the_process_cannot_write(
    request: pytest.FixtureRequest,
) -> None:
    """A valid database in a directory only root may write, read by `nobody`: `context`,
    `inspect` and `revalidate` work, and nothing appears in the directory."""
    # Outside pytest's own temporary root, which only root may enter.
    directory = Path(tempfile.mkdtemp(prefix="ledgerfold-ro-"))
    request.addfinalizer(lambda: shutil.rmtree(directory))
    directory.chmod(0o755)
    path = directory / "ledger.db"
    _build(path)
    path.chmod(0o644)
    before = sorted(os.listdir(directory))
    assert before == ["ledger.db"]  # closed cleanly: no -wal, no -shm
    code = (
        "import sys, ledgerfold as lf\n"
        "from ledgerfold.revalidate import revalidate_database\n"
        "s = lf.SQLiteStore(sys.argv[1], read_only=True)\n"
        "assert s.context('c', 'v1').fallback is None\n"
        "print(revalidate_database(sys.argv[1], workers=2).summaries_checked)\n"
    )
    done = _as_nobody("-c", code, str(path))
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
    for command in (["context"], ["inspect"], ["revalidate"]):
        ran = _as_nobody(
            "-m", "ledgerfold", *command, str(path), *([CID] if command != ["revalidate"] else [])
        )
        assert ran.returncode == 0, (command, ran.stderr)
        assert "readonly" not in ran.stderr
    assert sorted(os.listdir(directory)) == before


def test_read_only_store_refuses_writes_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _build(path)
    content = path.read_bytes()
    with lf.SQLiteStore(path, read_only=True) as store:
        assert store.context(CID, PV).fallback is None
        assert "read_only=True" in repr(store)
        with pytest.raises(lf.StoreError, match="read-only"):
            store.append(CID, "user", "more")
    for command in (["context", str(path), CID], ["inspect", str(path), CID]):
        assert _cli(*command).returncode == 0
    assert os.listdir(tmp_path) == ["ledger.db"]  # no -wal or -shm left behind
    assert path.read_bytes() == content
    missing = tmp_path / "missing.db"
    with pytest.raises(lf.StoreError, match=r"missing\.db"):
        lf.SQLiteStore(missing, read_only=True)
    assert not missing.exists()
    with pytest.raises(lf.InvalidInput):
        lf.SQLiteStore(path, read_only=1)  # type: ignore[arg-type]


def test_revalidating_a_missing_database_names_it_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(lf.StoreError, match=r"missing\.db"):
        revalidate_database(missing)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", ["inspect", "context", "compact", "revalidate", "export"])
def test_commands_never_turn_an_empty_file_into_a_database(tmp_path: Path, command: str) -> None:
    """`compact` is a write command, but a zero-byte file holds no conversation: it is
    refused like the read-only ones, with one clear line."""
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    args = {
        "inspect": [CID],
        "context": [CID],
        "export": ["--parquet", str(tmp_path / "out")],
    }.get(command, [])
    done = _cli(command, str(path), *args)
    assert done.returncode == 2, done.stderr
    assert "empty" in done.stderr and "Traceback" not in done.stderr
    assert path.read_bytes() == b""
    assert sorted(os.listdir(tmp_path)) == ["empty.db"]
    with pytest.raises(lf.StoreError, match="not a ledgerfold database"):
        lf.SQLiteStore(path, read_only=True)
    with pytest.raises(lf.StoreError, match="not a ledgerfold database"):
        revalidate_database(path)
    assert path.read_bytes() == b""


@pytest.mark.parametrize("command", ["inspect", "context", "compact", "revalidate", "import"])
def test_commands_never_create_a_journal_beside_dev_null(tmp_path: Path, command: str) -> None:
    journals = [Path("/dev/null-journal"), Path("/dev/null-wal"), Path("/dev/null-shm")]

    def state() -> list[tuple[int, int] | None]:  # another program may have left one
        return [
            (journal.stat().st_mtime_ns, journal.stat().st_size) if journal.exists() else None
            for journal in journals
        ]

    before = state()
    args = {"inspect": [CID], "context": [CID]}.get(command, [])
    if command == "import":
        transcript = tmp_path / "t.jsonl"
        transcript.write_text(
            json.dumps(
                {"conversation_id": "x", "source": "s", "turns": [{"role": "user", "body": "b"}]}
            )
            + "\n",
            encoding="utf-8",
        )
        args = [str(transcript)]
    done = _cli(command, "/dev/null", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert state() == before


@pytest.mark.parametrize("damaged", ["text", "through_sequence"])
def test_a_current_record_with_text_that_is_not_utf8_is_a_fallback_then_replaced(
    tmp_path: Path, damaged: str
) -> None:
    """Text that is not UTF-8 in the current summary's record is a damaged record, as a
    missing fingerprint is: the context falls back raw with that reason (it raised
    `StoreError` at every call), and a compaction replaces the record (a rebase; it failed
    for good), so the conversation is not stuck behind a record nobody can read. The text
    appears in no message."""
    path = tmp_path / "ledger.db"
    _build(path)
    if damaged == "text":
        _flip_after(path, f"sum {CARD} ")
    else:
        _damage(path, "UPDATE summaries SET through_sequence = CAST(x'ff41' AS TEXT)")
    policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1)
    with lf.SQLiteStore(path) as store:
        for read in (lambda: store.context(CID, PV), lambda: store.context(CID, "v2")):
            context = read()
            assert context.fallback == "stale-summary:damaged-record"
            assert context.fallback_id == "s1"
            assert [item.id for item in context.items] == [f"t{i}" for i in range(1, 9)]
        assert store.current_summary(CID) is None
        with pytest.raises(lf.StoreError, match=f"column {damaged!r}") as caught:
            store.summary_history(CID)
        assert CARD not in str(caught.value)
        assert lf.Compactor(store, policy).compact(CID, force=True).status == "accepted"
        context = store.context(CID, PV)
        assert context.fallback is None and context.summary is not None
        assert CARD in context.summary.text  # the sources' text, summarised again
