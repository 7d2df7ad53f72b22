"""The search index of a file whose text is stored as UTF-16 (`PRAGMA encoding` set by
another tool before the first table; the store reads and writes such a file): the batched
build (`rebuild_search_index`, `ledgerfold reindex`, the first writing open of an older
file) indexes its turns as the write paths do, and `check_search_index` sees a turn missing
from it (SPEC §16.1: the index is derived from the ledger). Real file databases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._segment import index_passages

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from revalidate_support import encoded_file  # noqa: E402
from test_search_repaired_bodies import changed_outside  # noqa: E402

BODIES = {
    "en": "We met at the Café Zürich about order PO-9302.",
    "zh": "我的护照放在3号储物柜，密码是5100。",
    "long": " ".join(f"Sentence {n} of a long message." for n in range(40)) + " zebra",
}
QUERIES = {"en": "cafe PO-9302", "zh": "护照 3号储物柜 密码", "long": "zebra"}


def utf16_store(path: Path, encoding: str) -> lf.SQLiteStore:
    encoded_file(path, encoding)
    store = lf.SQLiteStore(path)
    for turn_id, body in BODIES.items():
        store.append("c", "user", body, id=turn_id)
    return store


def found(store: lf.SQLiteStore) -> dict[str, list[tuple[str, str]]]:
    return {
        key: [(hit.turn_id, hit.text) for hit in store.search("c", query, limit=1)]
        for key, query in QUERIES.items()
    }


@pytest.mark.parametrize("encoding", ["UTF-16le", "UTF-16be"])
def test_a_rebuilt_index_of_a_utf16_file_finds_what_the_write_paths_indexed(
    tmp_path: Path, encoding: str
) -> None:
    store = utf16_store(tmp_path / "a.db", encoding)
    before = found(store)
    assert before["zh"] == [("zh", BODIES["zh"])]
    assert store.rebuild_search_index() == len(BODIES)
    assert found(store) == before
    assert store.check_search_index() == []
    store.close()


def test_a_utf16_turn_missing_from_the_index_is_reported(tmp_path: Path) -> None:
    store = utf16_store(tmp_path / "b.db", "UTF-16le")
    conn = store._connection()
    with conn:
        conn.execute(
            "INSERT INTO search_fts (search_fts, rowid, tokens) VALUES ('delete', ?, ?)",
            (
                conn.execute("SELECT pk FROM turns WHERE id = 'zh'").fetchone()[0] << 10,
                index_passages(BODIES["zh"])[0][2],
            ),
        )
    assert store.check_search_index() == ["live-turns-missing"]
    store.close()


def test_a_utf16_body_changed_outside_and_repaired_is_searched_as_it_now_is(
    tmp_path: Path,
) -> None:
    store = utf16_store(tmp_path / "c.db", "UTF-16be")
    store.close()
    changed_outside(tmp_path / "c.db", "zh", "钥匙在13号柜子里。")
    store = lf.SQLiteStore(tmp_path / "c.db")
    assert store.repair_digests([("c", "zh")]) == 1
    assert store.search("c", "护照") == []
    assert [hit.turn_id for hit in store.search("c", "钥匙")] == ["zh"]
    store.close()
