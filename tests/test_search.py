"""`SQLiteStore.search` (SPEC §16.1, §16.5): matching, passages, ranking, scope, query
safety, and the index kept by every write path in the same transaction."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold import Store
from ledgerfold._segment import index_passages
from ledgerfold.store import PROTOCOL_VERSION, SearchableStore
from ledgerfold.store import _search as search_queries
from ledgerfold.store import _search_index as search_index


@pytest.fixture
def store(tmp_path: Path) -> lf.SQLiteStore:
    made = lf.SQLiteStore(tmp_path / "a.db")
    yield made
    made.close()


def ids(hits: list[lf.SearchHit]) -> list[str]:
    return [hit.turn_id for hit in hits]


def indexed(store: lf.SQLiteStore) -> set[str]:
    """IDs of the turns with passages in the index (what the write paths keep)."""
    return {
        row[0]
        for row in store._connection().execute(
            "SELECT DISTINCT t.id FROM search_fts_docsize d JOIN turns t ON t.pk = d.id >> 10"
        )
    }


# ---------------------------------------------------------------------- matching


def test_words_match_case_and_diacritics_folded(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "We met at the Café Zürich on Friday.", id="a")
    store.append("c", "user", "Nothing to see here.", id="b")
    assert ids(store.search("c", "cafe ZURICH")) == ["a"]
    assert ids(store.search("c", "CAFÉ")) == ["a"]


def test_codes_and_numbers_match_exactly(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "Ship order PO-9302 today.", id="po")
    store.append("c", "user", "Locker 13 holds the key.", id="l13")
    store.append("c", "user", "Locker 130 is empty.", id="l130")
    store.append("c", "user", "Code QZ-704 was issued.", id="qz")
    assert ids(store.search("c", "PO-9302")) == ["po"]
    assert ids(store.search("c", "po 9302"))[0] == "po"
    assert ids(store.search("c", "13")) == ["l13"]
    assert ids(store.search("c", "130")) == ["l130"]
    assert ids(store.search("c", "3")) == []
    assert ids(store.search("c", "qz-704")) == ["qz"]


def test_chinese_without_spaces(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "我的护照放在3号储物柜，密码是5100。", id="zh")
    store.append("c", "user", "今天天气很好，我们去公园散步。", id="other")
    store.append("c", "user", "钥匙在13号柜子里。", id="k13")
    hits = store.search("c", "护照 3号储物柜 密码")
    assert ids(hits)[0] == "zh"
    # Digits never join a CJK bigram: 3号 is `3` + `号`, and `3` is not `13`.
    assert "k13" not in ids(store.search("c", "3"))
    assert ids(store.search("c", "储物柜")) == ["zh"]


def test_a_number_with_its_cjk_counter_does_not_match_another_number(
    store: lf.SQLiteStore,
) -> None:
    """`3号` does not match `13号` (SPEC §16.5): the lone `号` beside the digits is left out
    of the query, which the digits identify."""
    store.append("c", "user", "13号", id="k13")
    store.append("c", "user", "3号", id="k3")
    store.append("c", "user", "第13章", id="ch13")
    assert ids(store.search("c", "3号")) == ["k3"]
    assert ids(store.search("c", "第3章")) == ["k3"]
    assert set(ids(store.search("c", "号"))) == {"k13", "k3"}  # alone, it is the query


def test_japanese_and_korean_bigrams(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "東京駅で待ち合わせしましょう", id="ja")
    store.append("c", "user", "서울역에서 만나요", id="ko")
    assert ids(store.search("c", "東京駅")) == ["ja"]
    assert ids(store.search("c", "서울역")) == ["ko"]


def test_a_fact_deep_in_a_long_message_is_found_with_its_passage(store: lf.SQLiteStore) -> None:
    filler = "The weather report said nothing of note that day. " * 80  # ~4,000 characters
    body = filler + "The vault combination is 7719-alpha. " + filler
    store.append("c", "user", body, id="long")
    store.append("c", "user", "A short note about combination locks.", id="short")
    hits = store.search("c", "vault 7719")
    assert ids(hits)[0] == "long"
    passage = hits[0].text
    assert "7719-alpha" in passage and len(passage) <= 600 and passage in body


def test_the_one_passage_with_words_is_the_hit_not_the_body(store: lf.SQLiteStore) -> None:
    # Passages of 600, 101 (to the space) and 600 characters hold no token; the hit is the
    # fourth, the only one that does, not the body.
    body = "-" * 700 + " " + "=" * 700 + " The kiwi code is 4411."
    store.append("c", "tool", body, id="out")
    assert [hit.text for hit in store.search("c", "kiwi")] == [body[1301:]]


def test_a_hundred_kilobyte_tool_output_gives_a_passage_not_the_body(
    store: lf.SQLiteStore,
) -> None:
    lines = [f"row {n}: status ok, latency {n % 97} ms" for n in range(3000)]
    lines[2100] = "row 2100: status FAILED with errno ECONNRESET"
    body = "\n".join(lines)
    assert len(body) > 100_000
    store.append("c", "tool", body, id="out")
    hits = store.search("c", "econnreset")
    assert ids(hits) == ["out"]
    assert "ECONNRESET" in hits[0].text and len(hits[0].text) <= 600
    start = body.index(hits[0].text)
    # Cut after a sentence end or line break in the window's second half.
    assert body[start + len(hits[0].text) - 1] == "\n"


def test_only_bodies_are_indexed(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "plain words", id="turnidzz", meta={"tag": "metaword"})
    assert store.search("c", "metaword") == []
    assert store.search("c", "turnidzz") == []
    assert store.search("c", "user") == []


# ---------------------------------------------------------------------- hits and ranking


def test_one_hit_per_turn_with_its_best_passage(store: lf.SQLiteStore) -> None:
    weak = "Nothing much about apples here, apart from this line. " + "filler words. " * 60
    strong = " apples apples apples pears. "
    body = weak + "x " * 300 + strong
    store.append("c", "user", body, id="t")
    hits = store.search("c", "apples pears")
    assert len(hits) == 1
    assert "pears" in hits[0].text


def test_ties_are_broken_by_newer_sequence(store: lf.SQLiteStore) -> None:
    for n in range(5):
        store.append("c", "user", "the same sentence about kiwis", id=f"t{n}")
    hits = store.search("c", "kiwis")
    assert [hit.sequence for hit in hits] == [5, 4, 3, 2, 1]
    assert len({hit.score for hit in hits}) == 1


def test_better_matches_score_higher_and_come_first(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "kiwis and mangos and papayas", id="three")
    store.append("c", "user", "kiwis only in this one, padded with other words", id="one")
    store.append("c", "user", "kiwis and mangos", id="two")
    hits = store.search("c", "kiwis mangos papayas")
    assert ids(hits) == ["three", "two", "one"]
    assert hits[0].score > hits[1].score > hits[2].score > 0


def test_limit_applies_after_deduplication(store: lf.SQLiteStore) -> None:
    for n in range(8):
        store.append("c", "user", ("plums here. " + "x " * 400) * 3, id=f"t{n}")
    assert len(store.search("c", "plums", limit=3)) == 3
    assert len(set(ids(store.search("c", "plums", limit=100)))) == 8
    assert len(store.search("c", "plums", limit=1)) == 1


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'say "hello',
        "NEAR(a b, 2)",
        "NEAR(",
        "*",
        "pre*",
        "a AND b",
        "AND",
        "OR NOT",
        "tokens: secret",
        "{tokens} : x",
        "^start",
        "col:umn",
        "a\x00b",
        "\x00",
        "\ud800 lone surrogate",
        "x" * 5000,
        "word " * 1000,
        "(((",
        "-",
        "+",
        "'; DROP TABLE turns; --",
    ],
)
def test_any_query_is_text_never_syntax(store: lf.SQLiteStore, query: str) -> None:
    store.append("c", "user", "hello secret start column word and near tokens", id="t")
    hits = store.search("c", query)
    assert isinstance(hits, list)
    assert store.load("c").turns[0].id == "t"  # nothing was dropped


def test_query_words_that_are_fts_operators_still_match_as_words(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "near the and or not gate", id="t")
    assert ids(store.search("c", "NEAR")) == ["t"]
    assert ids(store.search("c", "AND")) == ["t"]
    assert ids(store.search("c", 'tokens: "gate"')) == ["t"]


@pytest.mark.parametrize("query", ["", "   ", "?!...", "\n\t", "—"])
def test_blank_or_punctuation_only_query_gives_nothing(store: lf.SQLiteStore, query: str) -> None:
    store.append("c", "user", "anything at all", id="t")
    assert store.search("c", query) == []


def test_unknown_conversation_gives_nothing(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "apples", id="t")
    assert store.search("other", "apples") == []


def test_other_conversations_are_not_searched(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "apples in c", id="t")
    store.append("d", "user", "apples in d", id="t")
    assert [(hit.turn_id, hit.text) for hit in store.search("d", "apples")] == [
        ("t", "apples in d")
    ]


def test_searchhit_is_a_frozen_value_whose_repr_hides_the_text() -> None:
    hit = lf.SearchHit("t1", 3, "user", "secret passage", 1.5, None)
    same = lf.SearchHit("t1", 3, "user", "secret passage", 1.5, None)
    assert hit == same and hash(hit) == hash(same)
    assert hit != lf.SearchHit("t1", 3, "user", "other passage", 1.5, None)
    assert pickle.loads(pickle.dumps(hit)) == hit
    assert "secret" not in repr(hit) and "t1" in repr(hit)
    with pytest.raises(AttributeError):
        hit.text = "changed"  # type: ignore[misc]
    assert "SearchHit" in lf.__all__


def test_the_searchable_protocol() -> None:
    with lf.SQLiteStore() as store:
        assert isinstance(store, SearchableStore) and isinstance(store, Store)
    assert PROTOCOL_VERSION == 2
    assert issubclass(SearchableStore, Store)


# ---------------------------------------------------------------------- scope


def _compacted(store: lf.SQLiteStore, n: int = 12, keep_tail: int = 4) -> lf.SummaryEnvelope:
    store.append("c", "system", "You are helpful. System words: kumquat.", id="sys")
    for i in range(1, n):
        store.append("c", "user" if i % 2 else "assistant", f"turn {i} kumquat", id=f"t{i}")
    policy = lf.CompactionPolicy("p", keep_tail=keep_tail, min_new_turns=1)
    summary = lf.Compactor(store, policy).compact("c").summary
    assert summary is not None
    return summary


def test_covered_scope_is_the_summarys_live_sources(store: lf.SQLiteStore) -> None:
    summary = _compacted(store)
    covered = store.search("c", "kumquat", limit=100)
    assert set(ids(covered)) == set(summary.source_ids)
    assert "sys" not in ids(covered)  # a preserved system prompt is shown raw
    assert all(hit.summary_id == summary.id for hit in covered)
    store.append("c", "user", "a new kumquat after the summary", id="new")
    assert "new" not in ids(store.search("c", "kumquat", limit=100))


def test_all_scope_is_every_live_turn_with_summary_ids_where_covered(
    store: lf.SQLiteStore,
) -> None:
    summary = _compacted(store)
    hits = store.search("c", "kumquat", limit=100, scope="all")
    assert set(ids(hits)) == {turn.id for turn in store.load("c").turns}
    for hit in hits:
        expected = summary.id if hit.turn_id in summary.source_ids else None
        assert hit.summary_id == expected


def test_without_a_summary_covered_is_every_live_turn(store: lf.SQLiteStore) -> None:
    for i in range(4):
        store.append("c", "user", f"kumquat {i}", id=f"t{i}")
    hits = store.search("c", "kumquat")
    assert set(ids(hits)) == {"t0", "t1", "t2", "t3"}
    assert all(hit.summary_id is None for hit in hits)


def test_a_stale_summary_makes_covered_every_live_turn(store: lf.SQLiteStore) -> None:
    summary = _compacted(store)
    store.edit("c", summary.source_ids[0], body="edited kumquat")
    assert store.current_summary("c") is None
    hits = store.search("c", "kumquat", limit=100)
    assert set(ids(hits)) == {turn.id for turn in store.load("c").turns}
    assert all(hit.summary_id is None for hit in hits)


def test_a_sealed_summary_still_defines_covered(store: lf.SQLiteStore) -> None:
    summary = _compacted(store)
    store.purge_through("c", 3, "retention")
    hits = store.search("c", "kumquat", limit=100)
    live = {turn.id for turn in store.load("c").turns}
    assert set(ids(hits)) == set(summary.source_ids) & live
    assert all(hit.summary_id == summary.id for hit in hits)


# ---------------------------------------------------------------------- write paths


def test_append_many_and_import_are_indexed(store: lf.SQLiteStore) -> None:
    store.append_many(
        "c", [{"role": "user", "body": f"guava {i}", "id": f"m{i}"} for i in range(3)]
    )
    store.import_legacy("c", [{"id": "old", "role": "user", "body": "legacy guava"}])
    assert set(ids(store.search("c", "guava"))) == {"m0", "m1", "m2", "old"}


def test_append_chat_messages_is_indexed(store: lf.SQLiteStore) -> None:
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "Where is parcel 4471?"},
            {"role": "assistant", "content": "Let me check parcel status."},
        ],
    )
    assert sorted(hit.role for hit in store.search("c", "parcel", scope="all")) == [
        "assistant",
        "user",
    ]


def test_a_failed_write_leaves_the_index_as_before(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "first", id="dup")
    with pytest.raises(lf.DuplicateId):
        store.append_many(
            "c",
            [
                {"role": "user", "body": "durian one", "id": "x"},
                {"role": "user", "body": "durian", "id": "dup"},
            ],
        )
    assert store.search("c", "durian") == []
    assert indexed(store) == {"dup"}
    store.append("c", "user", "durian now", id="y")
    assert ids(store.search("c", "durian")) == ["y"]


def test_edit_makes_the_new_text_findable_and_the_old_not(store: lf.SQLiteStore) -> None:
    store.append("c", "user", "the meeting is on tuesday", id="t")
    store.edit("c", "t", body="the meeting is on thursday")
    assert store.search("c", "tuesday") == []
    hits = store.search("c", "thursday")
    assert ids(hits) == ["t"] and hits[0].text == "the meeting is on thursday"
    store.edit("c", "t", protected=True)  # not a text change: still indexed once
    assert ids(store.search("c", "thursday")) == ["t"]
    rows = store._connection().execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0]
    assert rows == 1


def test_retracted_purged_and_deleted_turns_are_never_returned(store: lf.SQLiteStore) -> None:
    for i in range(6):
        store.append("c", "user", f"lychee {i}", id=f"t{i}")
    store.retract("c", "t5")
    store.retract("c", "t4", erase=True)
    store.purge_through("c", 2, "retention")
    assert set(ids(store.search("c", "lychee", scope="all"))) == {"t2", "t3"}
    assert indexed(store) == {"t2", "t3"}  # the others left the index, not only the hits
    store.delete_conversation("c")
    assert store.search("c", "lychee", scope="all") == []
    assert indexed(store) == set()
    store.append("c", "user", "lychee again", id="t0")  # a reused ID in a new conversation
    assert ids(store.search("c", "lychee")) == ["t0"]


def test_retention_purge_removes_from_the_index(store: lf.SQLiteStore) -> None:
    for i in range(12):
        store.append("c", "user", f"quince {i}", id=f"t{i}")
    policy = lf.CompactionPolicy("p", keep_tail=4, min_new_turns=1)
    lf.Compactor(store, policy).compact("c")
    boundary = store.apply_retention("c", retain_turns=4)
    assert boundary is not None
    live = {turn.id for turn in store.load("c").turns}
    assert set(ids(store.search("c", "quince", limit=100, scope="all"))) == live
    assert indexed(store) == live


# ---------------------------------------------------------------------- recall results


RECALL_CALL = {
    "id": "call-r",
    "type": "function",
    "function": {"name": "recall_history", "arguments": '{"query": "tamarind"}'},
}
OTHER_CALL = {
    "id": "call-o",
    "type": "function",
    "function": {"name": "lookup", "arguments": "{}"},
}


def test_a_recall_result_is_never_indexed_but_other_tool_results_are(
    store: lf.SQLiteStore,
) -> None:
    store.append_chat_messages(
        "c",
        [
            {"role": "user", "content": "What about tamarind?"},
            {"role": "assistant", "content": None, "tool_calls": [RECALL_CALL, OTHER_CALL]},
            {"role": "tool", "tool_call_id": "call-r", "content": "recalled: tamarind copy"},
            {"role": "tool", "tool_call_id": "call-o", "content": "lookup: tamarind fact"},
        ],
    )
    hits = store.search("c", "tamarind", scope="all")
    assert [hit.text for hit in hits if hit.role == "tool"] == ["lookup: tamarind fact"]


def test_a_recall_result_appended_in_a_later_call_is_not_indexed(store: lf.SQLiteStore) -> None:
    store.append_chat_messages(
        "c", [{"role": "assistant", "content": None, "tool_calls": [RECALL_CALL]}]
    )
    store.append_chat_messages(
        "c", [{"role": "tool", "tool_call_id": "call-r", "content": "tamarind copy"}]
    )
    assert store.search("c", "tamarind", scope="all") == []


def test_a_recall_result_known_by_group_or_call_id_alone_is_not_indexed(
    store: lf.SQLiteStore,
) -> None:
    calls = json.dumps([RECALL_CALL])
    store.append("c", "assistant", "", id="a1", group="g", meta={"tool_calls": calls})
    store.append("c", "tool", "tamarind by group", id="r1", group="g")
    store.append(
        "c", "assistant", "", id="a2", meta={"tool_calls": calls.replace("call-r", "call-s")}
    )
    store.append("c", "tool", "tamarind by id", id="r2", meta={"tool_call_id": "call-s"})
    store.append("c", "tool", "tamarind unrelated tool", id="r3", meta={"tool_call_id": "x"})
    assert ids(store.search("c", "tamarind", scope="all")) == ["r3"]


# ---------------------------------------------------------------------- dropping common terms


def test_a_term_in_too_many_passages_is_dropped_while_a_rarer_one_remains(
    store: lf.SQLiteStore,
) -> None:
    common = search_queries.DF_DROP + 100
    store.append_many("c", [{"role": "user", "body": f"alpha {i}"} for i in range(common)])
    store.append("c", "user", "zeta and alpha", id="rare")
    # Without the drop, alpha-only turns would follow the rare one.
    assert ids(store.search("c", "alpha zeta", limit=5)) == ["rare"]
    assert len(store.search("c", "alpha", limit=5)) == 5  # the only term is kept


def test_when_every_term_is_too_common_the_rarest_is_kept(store: lf.SQLiteStore) -> None:
    # alpha in 1,100 long passages, beta in 1,200 short ones (beta repeated): with both
    # terms, short beta-only turns would outrank the long alpha ones; the rarest term
    # (alpha) alone is kept, so every hit holds alpha.
    padding = " ".join(f"pad{k}" for k in range(40))
    turns = [{"role": "user", "body": f"alpha {padding}"} for _ in range(1100)]
    turns += [{"role": "user", "body": "beta beta beta"} for _ in range(1200)]
    turns += [{"role": "user", "body": "gamma"} for _ in range(3700)]
    store.append_many("c", turns)
    hits = store.search("c", "beta alpha", limit=20)
    assert len(hits) == 20 and all("alpha" in hit.text for hit in hits)


def test_a_write_failing_after_the_index_changed_rolls_the_index_back(
    store: lf.SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.append("c", "user", "first fig", id="a")
    real = search_index._insert

    def insert_then_fail(conn: object, turns: list[tuple[int, str]]) -> None:
        real(conn, turns)  # type: ignore[arg-type]
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(search_index, "_insert", insert_then_fail)
    with pytest.raises(lf.StoreError):
        store.append("c", "user", "second fig", id="b")
    with pytest.raises(lf.StoreError):
        store.edit("c", "a", body="edited fig")
    monkeypatch.undo()
    assert ids(store.search("c", "fig")) == ["a"]
    assert store.search("c", "second") == [] and store.search("c", "edited") == []
    conn = store._connection()
    conn.execute("INSERT INTO search_fts(search_fts) VALUES ('integrity-check')")
    assert conn.execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0] == 1
    store.append("c", "user", "third fig", id="c")
    assert set(ids(store.search("c", "fig"))) == {"a", "c"}


def test_passage_offsets_count_code_points_beyond_the_bmp(store: lf.SQLiteStore) -> None:
    """Offsets are Python code points; SQLite's substr counts the same characters, so a
    passage after emoji and CJK is cut exactly."""
    body = "🙂😀 emoji 护照 " * 80 + "The answer is rambutan. " + "🙂 tail words " * 60
    store.append("c", "user", body, id="e")
    hits = store.search("c", "rambutan")
    assert ids(hits) == ["e"] and "rambutan" in hits[0].text
    start = body.index(hits[0].text)
    assert any(body[s:e] == hits[0].text and s == start for s, e, _ in index_passages(body))


def test_a_body_of_more_than_1024_passages_is_found_to_its_end(store: lf.SQLiteStore) -> None:
    """Passages from the 1,024th on share the last rowid slot: a word in one of them is
    still found, with its own passage as the hit's text, and the turn leaves the index
    whole when retracted."""
    line = "filler words " * 44 + "end.\n"  # one passage a line
    lines = [line] * 1100
    lines[1050] = "hidden salsify " + "filler words " * 42 + "end.\n"
    body = "".join(lines)
    assert len(index_passages(body)) == 1100
    store.append("c", "tool", body, id="huge")
    store.append("c", "user", "salsify is a root vegetable", id="short")
    hits = {hit.turn_id: hit for hit in store.search("c", "salsify")}
    assert set(hits) == {"huge", "short"}
    assert hits["huge"].text == lines[1050]
    store.retract("c", "huge")
    assert indexed(store) == {"short"}


def test_a_query_word_found_nowhere_does_not_cancel_one_that_matches(
    store: lf.SQLiteStore,
) -> None:
    store.append_many("c", [{"role": "user", "body": f"alpha note {n}"} for n in range(60)])
    assert len(store.search("c", "alpha zyzzyva")) == 5  # "alpha" is past DF_DROP


def test_a_term_rare_elsewhere_does_not_cancel_one_that_matches_here(
    store: lf.SQLiteStore,
) -> None:
    store.append("e", "user", "I want a refund", id="e1")
    store.append_many("o", [{"role": "user", "body": f"refund {n}"} for n in range(60)])
    store.append("o", "user", "my order", id="o-order")
    assert ids(store.search("e", "refund order")) == ["e1"]


def test_a_passage_of_a_body_holding_a_nul_is_its_text(store: lf.SQLiteStore) -> None:
    body = "log\x00line " + "filler words " * 60 + "end. the answer is rambutan."
    store.append("c", "tool", body, id="t")
    (hit,) = store.search("c", "rambutan")
    assert "rambutan" in hit.text and hit.text in body and len(hit.text) <= 600
