"""Erasure reaches the search index (SPEC §16.1, §16.5 "Erasure"): after every erasing call
no term of the erased text (nor of its earlier versions) is left in the database file or its
WAL. Checked by grepping the file bytes for a unique word, on a real file database in WAL
mode, as tests/test_retention.py does for the ledger.

FTS5 stores a term after the longest prefix it shares with the term before it in the same
leaf page, so a marker's first characters may be stored only once for several terms: the
grep looks for the marker's distinctive tail, which no other term shares.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sqlite3
import string
import subprocess
import sys
from pathlib import Path

import pytest

import ledgerfold as lf
from cli_support import file_has
from ledgerfold import _segment
from ledgerfold.store import _search_index as search_index


def marker() -> tuple[str, str]:
    """A unique one-word marker (letters only: a digit would start another token) and the
    tail to grep for. Drawn until the segmenter keeps it whole: the English stemmer would
    turn a final `y` into `i` or cut an `-ing`, and a tail that never reached the index
    would make every "gone after erasure" check pass vacuously."""
    while True:
        tail = "".join(random.choices(string.ascii_lowercase, k=14))
        if _segment.query_terms(f"qjx{tail}") == [f"qjx{tail}"]:
            return f"qjx{tail}", tail


def filled(path: Path, word: str, *, others: int = 30) -> lf.SQLiteStore:
    """A store whose index holds `word` in turn `secret` among many other turns (several
    FTS5 segments, as a real ledger has)."""
    store = lf.SQLiteStore(path)
    for i in range(others):
        store.append("c", "user", f"ordinary words number {i} about apples", id=f"t{i}")
    store.append("c", "user", f"the vault word is {word} remember it", id="secret")
    for i in range(others, others + 5):
        store.append("c", "user", f"more ordinary words {i}", id=f"t{i}")
    return store


def in_index(store: lf.SQLiteStore, tail: str) -> bool:
    """Whether the tail's bytes are in the index's own tables (not the ledger's)."""
    conn = store._connection()
    blobs = [row[0] for row in conn.execute("SELECT block FROM search_fts_data")]
    return any(tail.encode() in bytes(blob) for blob in blobs if blob is not None)


def test_the_marker_is_in_the_index_before_erasure(tmp_path: Path) -> None:
    """The grep can fail: before erasure the marker's tail is in the index pages."""
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    assert in_index(store, tail)
    store.close()
    assert file_has(tmp_path / "a.db", tail)


def test_without_the_rewrite_an_fts5_delete_leaves_the_term_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why erasing calls rewrite the index on SQLite < 3.42: a delete alone leaves the term
    in an older segment (this is what `scrub` removes)."""
    monkeypatch.setattr(search_index, "scrub", lambda conn: None)
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    store.retract("c", "secret", erase=True)
    assert in_index(store, tail)
    store.close()
    assert file_has(tmp_path / "a.db", tail)


def test_retract_with_erase_leaves_no_term(tmp_path: Path) -> None:
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    store.retract("c", "secret", erase=True)
    assert store.search("c", word, scope="all") == []
    assert not in_index(store, tail)
    store.close()
    assert not file_has(tmp_path / "a.db", tail)


def test_erasing_a_turn_retracted_earlier_leaves_no_term(tmp_path: Path) -> None:
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    store.retract("c", "secret")
    store.append("c", "user", "an append after the retraction", id="later")
    store.retract("c", "secret", erase=True)
    assert not in_index(store, tail)
    store.close()
    assert not file_has(tmp_path / "a.db", tail)


def test_an_earlier_version_of_an_edited_turn_leaves_no_term(tmp_path: Path) -> None:
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    store.edit("c", "secret", body="nothing secret any more")
    assert store.search("c", word, scope="all") == []
    store.retract("c", "secret", erase=True)
    assert not in_index(store, tail)
    store.close()
    assert not file_has(tmp_path / "a.db", tail)


def test_purge_through_leaves_no_term(tmp_path: Path) -> None:
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    store.purge_through("c", 31, "retention")  # `secret` is sequence 31
    assert store.search("c", word, scope="all") == []
    assert not in_index(store, tail)
    store.close()
    assert not file_has(tmp_path / "a.db", tail)


def test_a_retention_purge_leaves_no_term(tmp_path: Path) -> None:
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    policy = lf.CompactionPolicy("p", keep_tail=2, min_new_turns=1)
    # A summary that does not quote the turns, so the marker can only be in the ledger
    # and the index.
    summarizer = lambda request: "a summary quoting nothing"  # noqa: E731
    assert lf.Compactor(store, policy, summarizer).compact("c").summary is not None
    assert store.apply_retention("c", retain_turns=2) is not None
    assert store.search("c", word, scope="all") == []
    assert not in_index(store, tail)
    store.close()
    assert not file_has(tmp_path / "a.db", tail)


def test_delete_conversation_leaves_no_term(tmp_path: Path) -> None:
    word, tail = marker()
    store = filled(tmp_path / "a.db", word)
    store.append("other", "user", "another conversation stays searchable", id="o")
    store.delete_conversation("c")
    assert store.search("c", word, scope="all") == []
    assert [hit.turn_id for hit in store.search("other", "searchable")] == ["o"]
    assert not in_index(store, tail)
    store.close()
    assert not file_has(tmp_path / "a.db", tail)


def test_the_erasing_call_checkpoints_the_wal(tmp_path: Path) -> None:
    """The WAL is truncated by the erasing call itself (not only at close)."""
    word, tail = marker()
    path = tmp_path / "a.db"
    store = filled(path, word)
    store.retract("c", "secret", erase=True)
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    assert not file_has(path, tail)  # checked while the store is still open
    store.close()


def test_the_index_still_works_after_an_erasure(tmp_path: Path) -> None:
    word, _ = marker()
    store = filled(tmp_path / "a.db", word)
    store.retract("c", "secret", erase=True)
    store.append("c", "user", f"new {word} after", id="again")
    assert [hit.turn_id for hit in store.search("c", word)] == ["again"]
    assert len(store.search("c", "apples", limit=100)) == 30
    store.close()


def test_a_checkpoint_blocked_by_a_reader_is_logged_and_retried_at_the_next_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    word, tail = marker()
    path = tmp_path / "a.db"
    store = filled(path, word)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM turns").fetchone()  # holds a snapshot
    with caplog.at_level(logging.INFO, logger="ledgerfold.store"):
        store.retract("c", "secret", erase=True)
        assert any("checkpoint blocked" in r.getMessage() for r in caplog.records)
        assert file_has(path, tail)  # the old pages are still in the WAL
        reader.execute("COMMIT")
        store.append("c", "user", "a later write", id="later")
        assert any("checkpoint done after a retry" in r.getMessage() for r in caplog.records)
    assert not file_has(path, tail)
    assert all(word not in r.getMessage() for r in caplog.records)
    reader.close()
    store.close()


def test_a_blocked_checkpoint_is_retried_at_close(tmp_path: Path) -> None:
    word, tail = marker()
    path = tmp_path / "a.db"
    store = filled(path, word)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM turns").fetchone()
    store.retract("c", "secret", erase=True)
    reader.execute("COMMIT")
    reader.close()
    store.close()
    assert not file_has(path, tail)


def test_a_thousand_erasures_leave_the_store_writable(tmp_path: Path) -> None:
    """Each erasing call's FTS5 `optimize` put the merged segment on a new level (an SQLite
    from before 2023's fix has no cap): two levels per erasure after a write once the index
    outgrew a page, and past 2,000 levels FTS5 read its structure as corrupt, so every later
    write failed ("database disk image is malformed") and search with it. A retention purge
    on schedule gets there. The index is rebuilt when it grows too deep, and stays exact."""
    word, tail = marker()
    store = lf.SQLiteStore(tmp_path / "a.db", durability="normal")
    words = " ".join(f"filler{i}x" for i in range(400))
    for i in range(40):  # an index larger than one FTS5 page
        store.append("c", "user", f"{words} number {i}", id=f"long{i}")
    for i in range(1050):
        turn = store.append("c", "user", f"short note {i} {word}")
        store.retract("c", turn.id, erase=True)
    store.append("c", "user", f"still writable {word}", id="last")
    assert [hit.turn_id for hit in store.search("c", word)] == ["last"]
    hits = store.search("c", "filler7x", limit=100)
    assert len(hits) == 40 and all(0 < len(hit.text) <= 600 for hit in hits)  # passages
    conn = store._connection()
    conn.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 0)")
    store.retract("c", "last", erase=True)
    assert not in_index(store, tail)
    store.close()


@pytest.mark.parametrize("call", ["retract", "purge_through", "delete_conversation"])
def test_an_erasure_whose_checkpoint_finds_the_disk_full_is_done_and_says_so(
    tmp_path: Path, call: str
) -> None:
    """The erasing transaction commits, then its checkpoint cannot write the database file
    (`RLIMIT_FSIZE` in a child: EFBIG, as on a full disk). The call raised `StoreError`,
    which says nothing changed, though the text was erased (and no event was sent). Now it
    returns, logs the failed checkpoint (no text), and the next write, once there is room,
    checkpoints: the text is then in neither the file nor its WAL."""
    word, tail = marker()
    path = tmp_path / "a.db"
    with lf.SQLiteStore(path) as store:
        filler = " ".join(f"filler{i}x" for i in range(60))  # the ledger's first pages
        store.append_many("other", [{"role": "user", "body": filler} for _ in range(400)])
        filled(path, word).close()
    child = subprocess.run(
        [sys.executable, __file__, str(path), call, word],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["text_left_in_files"] is True  # the checkpoint really failed
    assert report == {
        "error": None,
        "secret_rows": 0,
        "events": 1,
        "warned": True,
        "text_left_in_files": True,
        "text_in_log": False,
        "after_next_write": False,
    }
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    raw.close()
    assert not file_has(path, tail)


def _erase(store: lf.SQLiteStore, call: str) -> None:
    if call == "retract":
        store.retract("c", "secret", erase=True)
    elif call == "purge_through":
        store.purge_through("c", 40, "gdpr", force=True)
    else:
        store.delete_conversation("c")


def _erase_on_a_full_disk(path: str, call: str, word: str) -> None:
    """Child: the erasing call with every write past half the file's size failing."""
    import resource

    events: list[lf.Event] = []
    store = lf.SQLiteStore(path, on_event=events.append)
    store._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("ledgerfold.store").addHandler(handler)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = os.path.getsize(path) // 2  # the erasure's WAL fits; the file's last pages not
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    report: dict[str, object] = {"error": None}
    try:
        _erase(store, call)
    except lf.LedgerfoldError as err:
        report["error"] = str(err)
    with sqlite3.connect(path) as raw:
        report["secret_rows"] = raw.execute(
            "SELECT COUNT(*) FROM turns WHERE body LIKE ?", (f"%{word}%",)
        ).fetchone()[0]
    raw.close()
    kinds = {"retract": "retention.erased", "purge_through": "retention.purged"}
    report["events"] = sum(e.name == kinds.get(call, "conversation.deleted") for e in events)
    report["warned"] = any(r.startswith("checkpoint failed") for r in records)
    report["text_left_in_files"] = file_has(Path(path), word[3:])
    report["text_in_log"] = any(word in r for r in records)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    store.append("other", "user", "a later write")
    report["after_next_write"] = file_has(Path(path), word[3:])
    print(json.dumps(report), flush=True)
    os._exit(0)  # no close: the later write's checkpoint is what is tested


def _erase_then_die(path: str, call: str) -> None:
    """Child: the erasing call, SIGKILLed once its transaction has committed, as its
    checkpoint starts."""
    store = lf.SQLiteStore(path)
    store._db.checkpoint = lambda **_: os.kill(os.getpid(), signal.SIGKILL)  # type: ignore[method-assign]
    _erase(store, call)


@pytest.mark.parametrize("call", ["retract", "purge_through", "delete_conversation"])
def test_an_erasure_killed_before_its_checkpoint_leaves_no_text_once_reopened(
    tmp_path: Path, call: str
) -> None:
    """Killed between its commit and its checkpoint, an erasure left its zeroed pages in the
    WAL and the old ones, holding the text, in the database file: the next store replayed
    the WAL but copied nothing back, so the text stayed in the file while it was open. The
    writing open now checkpoints a WAL left with frames."""
    word, tail = marker()
    path = tmp_path / "a.db"
    filled(path, word).close()
    child = subprocess.run(
        [sys.executable, __file__, "die", str(path), call],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert file_has(path, tail)  # committed, not yet checkpointed
    with lf.SQLiteStore(path) as store:
        assert store.search("c", word, scope="all") == []  # the erasure committed
        assert not file_has(path, tail)  # checked while the store is open
        conn = store._connection()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 0)")


if __name__ == "__main__":
    if sys.argv[1] == "die":
        _erase_then_die(*sys.argv[2:])
    else:
        _erase_on_a_full_disk(*sys.argv[1:])
