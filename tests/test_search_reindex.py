"""Checking and rebuilding the search index from the ledger (`SQLiteStore.check_search_index`,
`SQLiteStore.rebuild_search_index`, `ledgerfold reindex DB [--check]`): an index damaged in
the file — garbage in FTS5's `_data` pages, its structure record, its config, a shadow table
gone, more levels than FTS5 reads (an SQLite from before 2023) — is found and made again from
the live turns, and nothing in the ledger changes. Real database files throughout."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import run, run_json
from ledgerfold.tools import run_recall

C = "c"


def _write(path: Path) -> dict[str, str]:
    """A conversation with a compacted part, an edit, a retraction and a recall result;
    returns some turn IDs by name."""
    with lf.SQLiteStore(path) as store:
        ids = {}
        for n in range(120):
            role = "user" if n % 2 == 0 else "assistant"
            body = f"Message {n} about order PO-{9000 + n} shipped to Lisbon. " * (1 + n % 4)
            ids[f"t{n}"] = store.append(C, role, body).id
        ids["secret"] = store.append(C, "user", "My locker code is QZ-704.").id
        store.edit(C, ids["t5"], body="Order PO-9005 was cancelled: mango allergy noted.")
        store.retract(C, ids["t7"])
        call = {"id": "r1", "type": "function", "function": {"name": "recall_history"}}
        store.append(C, "assistant", "", meta={"tool_calls": json.dumps([call])})
        store.append(C, "tool", "Lisbon Lisbon Lisbon recalled", meta={"tool_call_id": "r1"})
        policy = lf.CompactionPolicy("v1", keep_tail=6, min_new_turns=1)
        lf.Compactor(store, policy, lf.ExtractiveSummarizer()).compact(C)
    return ids


def _ledger_digest(path: Path) -> str:
    """A digest of every row of every table that is not the search index's."""
    digest = hashlib.blake2b()
    with sqlite3.connect(path) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'search%'"
                " ORDER BY name"
            )
        ]
        for table in tables:
            digest.update(table.encode())
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1"):
                digest.update(repr(row).encode())
    return digest.hexdigest()


def _damage(path: Path, how: str) -> None:
    with sqlite3.connect(path) as conn:
        if how == "data-pages":
            rows = conn.execute("SELECT id, block FROM search_fts_data WHERE id > 10").fetchall()
            for rowid, block in rows:
                conn.execute(
                    "UPDATE search_fts_data SET block = ? WHERE id = ?",
                    ((b"\xa5\x5a" * len(block))[: len(block)], rowid),
                )
        elif how == "structure":
            garbage = b"garbage!" * 8  # reads as 97 levels, and as no valid record
            conn.execute("UPDATE search_fts_data SET block = ? WHERE id IN (1, 10)", (garbage,))
        elif how == "config":
            conn.execute("UPDATE search_fts_config SET v = 999 WHERE k = 'version'")
        elif how == "shadow-gone":
            conn.execute("DROP TABLE search_fts_idx")
        elif how == "too-deep":
            # A structure record naming 2,100 levels, as an SQLite before 2023's FTS5 fix
            # leaves after many erasing calls: FTS5 reads it as corrupt.
            (block,) = conn.execute("SELECT block FROM search_fts_data WHERE id = 10").fetchone()
            record = bytes(block)
            deep = record[:4] + b"\xff\x00\x00\x01" + bytes([0x90, 0x34]) + record[5:]
            conn.execute("UPDATE search_fts_data SET block = ? WHERE id = 10", (deep,))
        else:
            raise AssertionError(how)
    conn.close()


def _hits(store: lf.SQLiteStore, query: str) -> list[tuple[int, str]]:
    return [(hit.sequence, hit.text) for hit in store.search(C, query, scope="all", limit=100)]


DAMAGE = ["data-pages", "structure", "config", "shadow-gone", "too-deep"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_index_is_found_and_rebuilt_from_the_ledger(tmp_path: Path, how: str) -> None:
    path = tmp_path / "ledger.db"
    ids = _write(path)
    with lf.SQLiteStore(path) as store:
        assert store.check_search_index() == []
        expected = {q: _hits(store, q) for q in ("QZ-704", "mango", "Lisbon", "PO-9100")}
        recalled = run_recall(store, C, {"query": "locker code", "limit": 20})
    assert all(expected.values())
    _damage(path, how)
    ledger = _ledger_digest(path)
    with lf.SQLiteStore(path) as store:
        problems = store.check_search_index()
        assert "corrupt" in problems
        assert ("too-deep" in problems) == (how == "too-deep")
        with pytest.raises(lf.StoreError):  # an erasure cannot keep the index clean now
            store.retract(C, ids["t9"], erase=True)
        # 120 messages and the secret, less the retracted one (the recall result stays out)
        assert store.rebuild_search_index() == 120
        assert store.check_search_index() == []
        assert {q: _hits(store, q) for q in expected} == expected
        assert run_recall(store, C, {"query": "locker code", "limit": 20}) == recalled
        # The recall result stays out of the index (SPEC §17.7), the retracted turn too.
        assert all("recalled" not in text for _, text in _hits(store, "Lisbon recalled"))
        assert 8 not in [sequence for sequence, _ in _hits(store, "PO-9007")]
    assert _ledger_digest(path) == ledger  # nothing in the ledger changed
    with lf.SQLiteStore(path) as store:  # and the store writes and erases again
        store.retract(C, ids["secret"], erase=True)
        assert _hits(store, "QZ-704") == []
        assert store.check_search_index() == []


def test_an_index_holding_removed_or_missing_turns_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ids = _write(path)
    with lf.SQLiteStore(path) as store:
        retracted = store.get_turns(C, [ids["t7"]])
        assert retracted == []  # not live
        pk = store._connection().execute("SELECT pk FROM turns WHERE id = ?", (ids["t7"],))
        (turn_pk,) = pk.fetchone()
        with store._connection() as conn:  # a stray row of a retracted turn
            conn.execute(
                "INSERT INTO search_fts (rowid, tokens) VALUES (?, 'stray')", (turn_pk << 10,)
            )
        assert store.check_search_index() == ["removed-turns-indexed"]
        store.rebuild_search_index()
        assert store.check_search_index() == []
        with store._connection() as conn:  # every row gone, the index still readable
            conn.execute("INSERT INTO search_fts(search_fts) VALUES ('delete-all')")
        assert store.check_search_index() == ["live-turns-missing"]
        store.rebuild_search_index()
        assert store.check_search_index() == []


def test_the_reindex_command_checks_then_rebuilds(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _write(path)
    assert run_json("reindex", str(path), "--check", "--json")["sound"] is True
    _damage(path, "structure")
    ledger = _ledger_digest(path)
    checked = run("reindex", str(path), "--check", "--json")
    assert checked.exit_code == 1, checked.output
    report = json.loads(checked.stdout)
    assert report["problems_before"] == ["corrupt"] and report["rebuilt"] is False
    assert report["sound"] is False and report["turns_indexed"] is None
    plain = run("reindex", str(path), "--check")
    assert plain.exit_code == 1 and "search index has problems: corrupt" in plain.stdout
    rebuilt = run_json("reindex", str(path), "--json")
    assert {k: rebuilt[k] for k in ("problems_before", "rebuilt", "problems_after", "sound")} == {
        "problems_before": ["corrupt"],
        "rebuilt": True,
        "problems_after": [],
        "sound": True,
    }
    assert rebuilt["turns_indexed"] == 120 and rebuilt["database"] == str(path)
    assert _ledger_digest(path) == ledger
    again = run("reindex", str(path))
    assert again.exit_code == 0 and "was sound; rebuilt from the ledger (120 turns); sound" in (
        again.stdout
    )
    hits = run_json("search", str(path), C, "QZ-704", "--all", "--json")["hits"]
    assert [hit["text"] for hit in hits] == ["My locker code is QZ-704."]
    missing = run("reindex", str(tmp_path / "none.db"))
    assert missing.exit_code == 2 and "no such database" in missing.output


def test_a_body_changed_to_bytes_that_are_not_utf8_is_left_out_of_the_rebuild(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A row changed outside ledgerfold to text that is not UTF-8: the rebuild leaves that
    turn out (logged by pk) instead of failing with SQLite's message quoting the bytes, and
    the file still opens (its first writing open finishes an interrupted build)."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        store.append(C, "user", "the mango order", id="fine")
        store.append(C, "user", "hello", id="damaged")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE turns SET body = CAST(x'ff736563726574626f6479' AS TEXT) WHERE id = 'damaged'"
        )
    conn.close()
    caplog.set_level("DEBUG", logger="ledgerfold")
    with lf.SQLiteStore(path) as store:
        assert store.rebuild_search_index() == 1
        assert store.check_search_index() == []
        assert [hit.turn_id for hit in store.search(C, "mango", scope="all")] == ["fine"]
    with lf.SQLiteStore(path) as store:
        assert [hit.turn_id for hit in store.search(C, "mango", scope="all")] == ["fine"]
    assert "secretbody" not in caplog.text
    assert "not UTF-8" in caplog.text


# ---------------------------------------------------------------- an interrupted rebuild


def _many_turns(path: Path) -> None:
    """More turns than one build batch (1,000) holds, so a rebuild commits several."""
    with lf.SQLiteStore(path) as store:
        store.append_many(
            C,
            [{"role": "user", "body": f"parcel PK-{n} left Porto on day {n}"} for n in range(2500)],
        )
        store.append(C, "user", "My locker code is QZ-704.")


def _rebuild_child(path: Path, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, __file__, "rebuild", str(path), how],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("how", ["killed", "disk-full"])
def test_an_interrupted_rebuild_changes_no_ledger_row_and_says_so(tmp_path: Path, how: str) -> None:
    """A rebuild killed (SIGKILL) or out of space (`RLIMIT_FSIZE`) after its first batch
    committed: the ledger is unchanged, search says the rebuild is unfinished and how to
    finish it (not that the index is of another ledgerfold), and `reindex` finishes it."""
    path = tmp_path / "ledger.db"
    _many_turns(path)
    ledger = _ledger_digest(path)
    child = _rebuild_child(path, how)
    if how == "killed":
        assert child.returncode == -signal.SIGKILL
    else:
        assert child.returncode == 0, child.stderr
        report = json.loads(child.stdout)
        assert "rebuild of the search index was interrupted" in report["rebuild"]
        assert "nothing was written" not in report["rebuild"]
        assert "ledgerfold reindex DB" in report["search"]
    assert _ledger_digest(path) == ledger
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("SELECT complete FROM search_state").fetchone() == (0,)
    raw.close()
    with lf.SQLiteStore(path, read_only=True) as store:
        with pytest.raises(lf.StoreError, match="being built or rebuilt, or its build was") as err:
            store.search(C, "QZ-704")
        assert "ledgerfold reindex DB" in str(err.value)
        assert "not built for this ledgerfold" not in str(err.value)
        failed = run_recall(store, C, {"query": "locker"})
        assert json.loads(failed) == {"error": "recall unavailable (database error)"}
    rebuilt = run_json("reindex", str(path), "--json")
    # Its writing open finished the build, and the rebuild made it again.
    assert rebuilt["problems_before"] == [] and rebuilt["sound"] is True
    assert rebuilt["turns_indexed"] == 2501
    assert _ledger_digest(path) == ledger
    with lf.SQLiteStore(path) as store:
        assert [hit.text for hit in store.search(C, "locker")] == ["My locker code is QZ-704."]
        assert store.check_search_index() == []


def _interrupted_rebuild(path: str, how: str) -> None:
    """Child: rebuild the index; when its first batch has committed, SIGKILL itself or run
    out of space (every later write past 4 KiB of a file fails with EFBIG)."""
    import resource

    class AfterFirstBatch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("search index progress"):
                if how == "killed":
                    os.kill(os.getpid(), signal.SIGKILL)
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))

    store = lf.SQLiteStore(path)
    logger = logging.getLogger("ledgerfold.store")
    logger.setLevel(logging.INFO)
    logger.addHandler(AfterFirstBatch())
    report = {}
    try:
        store.rebuild_search_index()
    except lf.StoreError as err:
        report["rebuild"] = str(err)
    try:
        store.search(C, "QZ-704")
    except lf.StoreError as err:
        report["search"] = str(err)
    print(json.dumps(report), flush=True)
    os._exit(0)  # no close: its checkpoint could not write either


if __name__ == "__main__":
    _interrupted_rebuild(*sys.argv[2:])
