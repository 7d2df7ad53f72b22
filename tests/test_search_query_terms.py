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


def test_when_every_term_is_common_the_rarest_is_kept_past_5000_passages(
    store: lf.SQLiteStore,
) -> None:
    """Both terms in more passages than the old count's cap (5,001): it found them equally
    common and kept the first term of the query, the commoner one here. The rarest is
    kept (`_search_terms.rarest`), so every hit holds it, whichever term comes first."""
    with store:
        store.append_many("c", [{"role": "user", "body": f"alpha {n}"} for n in range(5200)])
        store.append_many("c", [{"role": "user", "body": f"beta {n}"} for n in range(5100)])
        for query in ("alpha beta", "beta alpha"):
            hits = store.search("c", query, limit=20)
            assert len(hits) == 20 and all(hit.text.startswith("beta ") for hit in hits)


def test_when_every_term_is_common_and_as_common_the_first_is_kept(
    store: lf.SQLiteStore,
) -> None:
    with store:
        words = ("alpha", "beta")
        store.append_many(
            "c", [{"role": "user", "body": f"{word} {n}"} for n in range(300) for word in words]
        )
        for first in ("alpha", "beta"):
            other = "beta" if first == "alpha" else "alpha"
            hits = store.search("c", f"{first} {other}", limit=10)
            assert len(hits) == 10 and all(hit.text.startswith(f"{first} ") for hit in hits)
