"""U+FFFE and U+FFFF in a file whose text is stored as UTF-16 (`PRAGMA encoding` set by another
tool). SQLite converts the UTF-8 it is given to UTF-16 with these two replaced by U+FFFD, so
a turn written with one would be stored as another text than the one its digest was made
of (revalidation then finds a body nobody changed `source-modified`, and "repairs" it), and
two conversation or turn IDs differing only there would be one. The store refuses such text
in a UTF-16 file (`InvalidInput`, nothing written); a UTF-8 file stores it as given."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledgerfold import CompactionPolicy, Compactor, InvalidInput, SQLiteStore
from ledgerfold.revalidate import revalidate_database
from revalidate_support import encoded_file

POLICY = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
ENCODINGS = ["UTF-8", "UTF-16le", "UTF-16be"]
NONCHARACTERS = ["\ufffe", "\uffff"]


def _append(store: SQLiteStore, conversation_id: str, *args: object, **kwargs: object) -> bool:
    """Whether the append was taken (False: refused with `InvalidInput`)."""
    try:
        store.append(conversation_id, *args, **kwargs)  # type: ignore[arg-type]
    except InvalidInput:
        return False
    return True


@pytest.mark.parametrize("char", NONCHARACTERS)
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_body_is_stored_as_given_or_refused(tmp_path: Path, encoding: str, char: str) -> None:
    path = encoded_file(tmp_path / "s.db", encoding)
    with SQLiteStore(path) as store:
        store.append("c", "system", "sys prompt", id="s")
        taken = _append(store, "c", "user", f"x{char}y", id="u1")
        assert taken == (encoding == "UTF-8")
        bodies = {turn.id: turn.body for turn in store.load("c").turns}
        assert bodies == ({"s": "sys prompt", "u1": f"x{char}y"} if taken else {"s": "sys prompt"})
        for n in range(4):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
        assert Compactor(store, POLICY).compact("c", force=True).status == "accepted"
    report = revalidate_database(path, workers=1, mark_stale=False)
    assert (report.stale, report.digests_wrong) == (0, 0)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_ids_that_differ_only_there_stay_apart_or_are_refused(
    tmp_path: Path, encoding: str
) -> None:
    path = encoded_file(tmp_path / "s.db", encoding)
    with SQLiteStore(path) as store:
        store.append("\ufffd", "user", "a", id="a")
        taken = _append(store, "\uffff", "user", "b", id="b")
        assert taken == (encoding == "UTF-8")
        assert [t.id for t in store.load("\ufffd").turns] == ["a"]
        store.append("c", "user", "a", id="t\ufffd")
        assert _append(store, "c", "user", "b", id="t\uffff") == (encoding == "UTF-8")
        assert next(t.id for t in store.load("c").turns) == "t\ufffd"


@pytest.mark.parametrize("encoding", ["UTF-16le", "UTF-16be"])
def test_an_edit_to_such_a_body_is_refused(tmp_path: Path, encoding: str) -> None:
    path = encoded_file(tmp_path / "s.db", encoding)
    with SQLiteStore(path) as store:
        store.append("c", "user", "plain", id="u1")
        with pytest.raises(InvalidInput):
            store.edit("c", "u1", body="x\uffff")
        assert [t.body for t in store.load("c").turns] == ["plain"]


def _rekey(path: Path, old: str, new: str, encoding: str) -> None:
    """Another tool renames conversation `old` to `new`, written as the file's UTF-16 bytes
    (as SQLite stores text it is given as UTF-16: U+FFFF stays U+FFFF)."""
    codec = {"UTF-16le": "utf-16-le", "UTF-16be": "utf-16-be"}[encoding]
    key = f"CAST(X'{new.encode(codec).hex()}' AS TEXT)"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    for table, column in (
        ("turns", "conversation_id"),
        ("summaries", "conversation_id"),
        ("conversations", "id"),
    ):
        conn.execute(f"UPDATE {table} SET {column} = {key} WHERE {column} = ?", (old,))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("options", [{"workers": 1}, {"workers": 2, "batch_turns": 1}])
@pytest.mark.parametrize("encoding", ["UTF-16le", "UTF-16be"])
def test_a_key_holding_a_noncharacter_in_a_utf16_file_bounds_no_run(
    tmp_path: Path, encoding: str, options: dict[str, int]
) -> None:
    """A conversation key stored (by another tool) with U+FFFF cannot be bound as it is
    stored (SQLite converts the bound U+FFFF to U+FFFD): no API call names it, so its summary
    is damaged-record, as a key that is not valid text is, and its turns are still audited.
    Bound as a run's range it left out the sound conversations between U+FFFD and U+FFFF
    (U+00FE in UTF-16le sorts there), which were reported, and marked, source-missing."""
    path = encoded_file(tmp_path / "s.db", encoding)
    with SQLiteStore(path) as store:
        for c in ("k1", "k\u00fe", "k9"):
            store.append(c, "system", "sys prompt", id=f"{c}-s")
            for n in range(5):
                store.append(c, "user", f"turn {n}", id=f"{c}-u{n}")
            assert Compactor(store, POLICY).compact(c, force=True).status == "accepted"
    _rekey(path, "k9", "k\uffff", encoding)
    with sqlite3.connect(path) as conn:  # a tail body of the renamed one changed
        conn.execute("UPDATE turns SET body = 'changed' WHERE id = 'k9-u4'")
    conn.close()
    report = revalidate_database(path, mark_stale=False, **options)
    assert sorted((s.conversation_id, s.reason) for s in report.stale_summaries) == [
        ("k\uffff", "damaged-record")
    ]
    assert ("k\uffff", "k9-u4") in set(report.wrong_digests)
    revalidate_database(path, **options)
    with SQLiteStore(path) as store:
        assert store.context("k\u00fe", "v1").fallback is None
        assert store.context("k1", "v1").fallback is None


@pytest.mark.parametrize("encoding", ["UTF-16le", "UTF-16be"])
def test_meta_and_batch_fields_are_refused_by_name(tmp_path: Path, encoding: str) -> None:
    path = encoded_file(tmp_path / "s.db", encoding)
    with SQLiteStore(path) as store:
        with pytest.raises(InvalidInput) as meta:
            store.append("c", "user", "a", meta={"k": "v\uffff"})
        assert meta.value.field == "meta"
        with pytest.raises(InvalidInput) as batch:
            store.append_many(
                "c", [{"role": "user", "body": "a"}, {"role": "user", "body": "b\ufffe"}]
            )
        assert batch.value.field.endswith("[1].body")
        assert len(store.load("c").turns) == 0
