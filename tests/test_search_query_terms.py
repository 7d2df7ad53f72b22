"""Which of a query's terms are used (SPEC §16.5 "Matching", "Normalisation"): a term too
common to tell passages apart is dropped while another remains — common in the conversation
searched, not in another one — and a lone CJK character is left out only when it touches a
digit run (`3号`), not when whitespace separates them (`猫 7`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledgerfold as lf


@pytest.fixture
def store(tmp_path: Path) -> lf.SQLiteStore:
    return lf.SQLiteStore(tmp_path / "terms.db")


def _ids(hits: list[lf.SearchHit]) -> list[str]:
    return [hit.turn_id for hit in hits]


def _mine(store: lf.SQLiteStore) -> None:
    store.append("mine", "user", "I want a refund for the blue kettle", id="refund")
    for n in range(3):
        store.append("mine", "user", f"My order {n} shipped", id=f"order{n}")


def test_a_term_common_only_in_another_conversation_is_not_dropped_here(
    store: lf.SQLiteStore,
) -> None:
    """Another conversation (another user's) says "refund" in 80 turns; here it is said
    once, and it is what the question is about."""
    with store:
        _mine(store)
        alone = _ids(store.search("mine", "refund order", limit=100))
        store.append_many("other", [{"role": "user", "body": f"refund {n}"} for n in range(80)])
        hits = _ids(store.search("mine", "refund order", limit=100))
        assert "refund" in hits
        # What this conversation's search finds does not depend on another's text.
        assert sorted(hits) == sorted(alone)


def test_a_term_common_in_this_conversation_is_still_dropped(store: lf.SQLiteStore) -> None:
    with store:
        store.append_many("mine", [{"role": "user", "body": f"refund {n}"} for n in range(80)])
        store.append("mine", "user", "refund for the kettle", id="rare")
        store.append("other", "user", "kettle", id="elsewhere")
        # Without the drop, short refund-only turns would follow the rare one.
        assert _ids(store.search("mine", "refund kettle", limit=5)) == ["rare"]


def test_a_lone_cjk_word_beside_digits_across_a_space_is_a_term(store: lf.SQLiteStore) -> None:
    """`3号` leaves the lone 号 out (it would match every `13号`); `猫 7` is two words, and
    猫 is one of the query's terms (SPEC §16.5: query terms come from the same
    normalisation as the index)."""
    with store:
        store.append("c", "user", "Her pet is a 猫 named Mochi.", id="cat")
        store.append("c", "user", "我的行李在13号柜。", id="thirteen")
        assert _ids(store.search("c", "猫 7", scope="all")) == ["cat"]
        assert _ids(store.search("c", "7 猫", scope="all")) == ["cat"]
        assert store.search("c", "3号", scope="all") == []  # not 13号
