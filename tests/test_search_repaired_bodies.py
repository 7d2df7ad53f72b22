"""A body changed behind the library's back, then accepted by a deep revalidation's repair
(`repair_digests`): the search index follows the ledger (SPEC §16.1), so the earlier words
no longer find the turn, the new ones do, and a later erasure leaves none of the earlier
text's terms in the file (§16.5 "Erasure"). On a real file database, the body changed with
raw SQL as an operator's script would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import _search_levels as search_levels
from test_search_erasure import in_index, marker

OLD_LONG = " ".join(f"Sentence {n} of the long original message." for n in range(60))


def changed_outside(path: Path, turn_id: str, body: str | bytes) -> None:
    """The turn's body changed with raw SQL (bytes: stored as text as they are)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("UPDATE turns SET body = CAST(? AS TEXT) WHERE id = ?", (body, turn_id))
        conn.commit()
    finally:
        conn.close()


def in_files(directory: Path, text: str) -> bool:
    """Whether `text`'s bytes are in any file of `directory` (the database, its WAL)."""
    return any(text.encode() in p.read_bytes() for p in directory.iterdir() if p.is_file())


def ledger(path: Path, body: str) -> None:
    store = lf.SQLiteStore(path)
    store.append("c", "user", "an ordinary first message", id="t0")
    store.append("c", "user", body, id="changed")
    store.append("c", "user", "an ordinary last message", id="t2")
    store.close()


def test_a_repaired_body_is_found_by_its_new_words_only(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    old, _ = marker()
    new, _ = marker()
    ledger(path, f"the old secret is {old}")
    changed_outside(path, "changed", f"the new text is {new}")
    store = lf.SQLiteStore(path)
    assert store.repair_digests([("c", "changed")]) == 1
    assert store.search("c", old) == []
    (hit,) = store.search("c", new)
    assert (hit.turn_id, hit.text) == ("changed", f"the new text is {new}")
    assert store.check_search_index() == []
    store.close()


def test_revalidation_repairs_the_index_of_a_long_body_changed_to_a_short_one(
    tmp_path: Path,
) -> None:
    """The old body had several passages (stored bounds); the hit is the new body's."""
    path = tmp_path / "b.db"
    new, _ = marker()
    ledger(path, OLD_LONG)
    changed_outside(path, "changed", f"short {new}")
    report = revalidate_database(path)
    assert report.digests_repaired == 1
    store = lf.SQLiteStore(path)
    assert store.search("c", "original sentence") == []
    assert [(h.turn_id, h.text) for h in store.search("c", new)] == [("changed", f"short {new}")]
    store.close()


def test_an_erasure_after_the_repair_leaves_no_term_of_the_earlier_text(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    old, tail = marker()
    ledger(path, f"the old secret is {old}")
    changed_outside(path, "changed", "the new text")
    store = lf.SQLiteStore(path)
    store.repair_digests([("c", "changed")])
    store.retract("c", "changed", erase=True)
    assert not in_index(store, tail)
    store.close()
    assert not in_files(tmp_path, tail)


# ---------------------------------------------------------------------- not repaired yet


@pytest.mark.parametrize("change", ["erase", "purge", "delete"])
def test_erasing_a_body_changed_outside_leaves_no_term_of_the_earlier_text(
    tmp_path: Path, change: str
) -> None:
    """No revalidation ran: the index still holds the earlier words, which the erasure
    must remove although the body it reads no longer has them."""
    path = tmp_path / "d.db"
    old, tail = marker()
    ledger(path, f"the old secret is {old}")
    changed_outside(path, "changed", "the new text is something else")
    store = lf.SQLiteStore(path)
    if change == "erase":
        store.retract("c", "changed", erase=True)
    elif change == "purge":
        store.purge_through("c", 2, "test")
    else:
        store.delete_conversation("c")
    assert not in_index(store, tail)
    assert store.check_search_index() == []
    store.close()
    assert not in_files(tmp_path, tail)


def test_a_body_changed_outside_to_fewer_passages_is_still_erased(tmp_path: Path) -> None:
    """The earlier body had several index rows; the erasure neither fails on the new one
    nor leaves the earlier rows."""
    path = tmp_path / "e.db"
    old, tail = marker()
    ledger(path, f"{OLD_LONG} {old}")
    changed_outside(path, "changed", "short now")
    store = lf.SQLiteStore(path)
    store.retract("c", "changed", erase=True)
    assert not in_index(store, tail)
    assert store.search("c", "original sentence", scope="all") == []
    assert store.check_search_index() == []
    store.close()


def test_an_edit_of_a_body_changed_outside_leaves_only_the_edit_searchable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.db"
    old, _ = marker()
    edited, _ = marker()
    ledger(path, f"the old secret is {old}")
    changed_outside(path, "changed", "the new text is something else")
    store = lf.SQLiteStore(path)
    store.edit("c", "changed", body=f"edited to {edited}")
    assert store.search("c", old) == []
    assert [hit.turn_id for hit in store.search("c", edited)] == ["changed"]
    assert store.check_search_index() == []
    store.close()


@pytest.mark.parametrize("change", ["purge", "delete"])
def test_a_turn_whose_body_is_no_longer_utf8_can_still_be_erased(
    tmp_path: Path, change: str
) -> None:
    """A row damaged in storage (its text's bytes are not UTF-8): the ledger's reads refuse
    it, but a purge or a conversation's deletion, which never read it back as a turn, must
    not fail because the index deletes its rows, nor leave its indexed words in the file."""
    path = tmp_path / "g.db"
    old, tail = marker()
    ledger(path, f"the old secret is {old}")
    changed_outside(path, "changed", b"bad \xff bytes")  # stored as text, not UTF-8
    store = lf.SQLiteStore(path)
    if change == "purge":
        store.purge_through("c", 2, "test")
    else:
        store.delete_conversation("c")
    assert not in_index(store, tail)
    assert store.check_search_index() == []
    store.close()
    assert not in_files(tmp_path, tail)


def test_the_erasures_index_rebuild_skips_a_body_that_is_no_longer_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure that rebuilds a deep index (`_search_levels`, forced here) re-indexes the
    indexed turns from their bodies: one damaged in storage is left out, as the build
    leaves it out, instead of failing the erasure."""
    monkeypatch.setattr(search_levels, "MAX_LEVELS", 0)
    path = tmp_path / "h.db"
    ledger(path, "a body that will be damaged")
    changed_outside(path, "changed", b"bad \xff bytes")  # stored as text, not UTF-8
    store = lf.SQLiteStore(path)
    store.retract("c", "t0", erase=True)
    assert [hit.turn_id for hit in store.search("c", "ordinary")] == ["t2"]
    store.close()


@pytest.mark.parametrize("new_body", ["the new text is something else", "short", OLD_LONG])
def test_the_index_check_finds_a_body_changed_outside_and_a_rebuild_mends_it(
    tmp_path: Path, new_body: str
) -> None:
    path = tmp_path / "i.db"
    old, _ = marker()
    ledger(path, f"the old secret is {old}")
    store = lf.SQLiteStore(path)
    assert store.check_search_index() == []
    store.close()
    changed_outside(path, "changed", new_body)
    store = lf.SQLiteStore(path)
    assert store.check_search_index() == ["stale-turns"]
    store.rebuild_search_index()
    assert store.check_search_index() == []
    assert store.search("c", old) == []
    store.close()
