"""Bodies of more passages than a turn has index rows (1,024: over ~600 KB), such as a tool's
1-2 MB output (SPEC §16.1, §16.5): a term near the end is found, the hit's text is the
passage that holds the query's rarest term (not the first passage of the row that holds
any term), and the turn leaves the index whole when retracted, erased or edited."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._segment import index_passages
from ledgerfold.store import _search_index as search_index

C = "c"
WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
]  # fmt: skip
KEY = "The locker code is QZ-704, remember it."


def _huge_body(size: int, seed: int = 1) -> str:
    """About `size` characters of sentences, `KEY` 400 characters before the end, and the
    word "locker" (the query's common term) early in the body's last rows."""
    rnd = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        sentence = " ".join(rnd.choice(WORDS) for _ in range(12)).capitalize() + ". "
        parts.append(sentence)
        length += len(sentence)
    body = "".join(parts)
    body = f"{body[:-400]} {KEY} {body[-400:]}"
    at = len(body) * 3 // 5
    return f"{body[:at]} Another locker was mentioned here. {body[at:]}"


@pytest.fixture
def store(tmp_path: Path) -> lf.SQLiteStore:
    return lf.SQLiteStore(tmp_path / "huge.db")


@pytest.mark.parametrize("size", [1_500_000, 2_000_000])
def test_the_hit_of_a_term_near_the_end_is_its_passage(store: lf.SQLiteStore, size: int) -> None:
    body = _huge_body(size)
    assert len(index_passages(body)) > 2 * 1024
    with store:
        store.append(C, "user", "a short note on the locker", id="short")
        store.append(C, "tool", body, id="huge")
        for query in ("QZ-704", "locker QZ-704", "what is the locker code QZ-704"):
            hits = {hit.turn_id: hit for hit in store.search(C, query, scope="all")}
            assert "huge" in hits, query
            text = hits["huge"].text
            assert "QZ-704" in text and text in body and len(text) <= 600, query


def test_a_huge_body_holding_the_rare_term_is_not_outranked_by_common_ones(
    store: lf.SQLiteStore,
) -> None:
    """Five short turns hold the query's common word; the huge one holds its rare code: with
    `limit=5` the huge turn is among the hits (it holds the rarer terms)."""
    with store:
        for n in range(5):
            store.append(C, "user", f"The locker {n} is by the door.", id=f"s{n}")
        store.append(C, "tool", _huge_body(1_500_000), id="huge")
        hits = store.search(C, "locker QZ-704", scope="all", limit=5)
        assert "huge" in [hit.turn_id for hit in hits]


@pytest.mark.parametrize("change", ["retract", "erase", "edit"])
def test_a_huge_body_leaves_the_index_whole(store: lf.SQLiteStore, change: str) -> None:
    with store:
        store.append(C, "user", "first", id="first")
        store.append(C, "tool", _huge_body(1_200_000, seed=2), id="huge")
        if change == "edit":
            store.edit(C, "huge", body="cut short: no code any more")
        else:
            store.retract(C, "huge", erase=change == "erase")
        assert store.search(C, "QZ-704", scope="all") == []
        assert store.search(C, "locker", scope="all") == []
        conn = store._connection()
        conn.execute("INSERT INTO search_fts(search_fts) VALUES ('integrity-check')")
        assert store.check_search_index() == []


def test_a_body_indexed_with_one_shared_last_row_still_reads_and_leaves(
    store: lf.SQLiteStore,
) -> None:
    """An index written before rows of several passages: passages from the 1,024th on in one
    last row. Its hit is still the right passage, and an erasure removes exactly its rows
    (they are made again from the stored bounds), leaving a sound index."""
    body = _huge_body(1_500_000, seed=3)
    passages = index_passages(body)
    with store:
        store.append(C, "user", "short locker note", id="short")
        store.append(C, "tool", body, id="huge")
        conn = store._connection()
        (pk,) = conn.execute("SELECT pk FROM turns WHERE id = 'huge'").fetchone()
        with conn:  # the turn's rows as the earlier layout wrote them
            search_index.unindex(conn, "pk = ?", (pk,))
            last = search_index.LAST_SLOT
            rows = [((pk << 10) + slot, p[2]) for slot, p in enumerate(passages[:last])]
            rows.append(((pk << 10) + last, " ".join(p[2] for p in passages[last:])))
            bounds = [(p[0], p[1]) for p in passages[:last]] + [(passages[last][0], len(body))]
            conn.executemany("INSERT INTO search_fts (rowid, tokens) VALUES (?, ?)", rows)
            conn.execute(
                "INSERT INTO search_offsets (turn_pk, bounds) VALUES (?, ?)",
                (pk, array("q", [n for pair in bounds for n in pair]).tobytes()),
            )
        assert store.check_search_index() == []
        hits = {hit.turn_id: hit.text for hit in store.search(C, "locker QZ-704", scope="all")}
        assert "QZ-704" in hits["huge"] and len(hits["huge"]) <= 600
        store.retract(C, "huge", erase=True)
        assert store.search(C, "QZ-704", scope="all") == []
        assert store.check_search_index() == []
