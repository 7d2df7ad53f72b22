"""`search` against a slow pure-Python reference (SPEC §16.5): the same segmenter, our own
BM25 over the passages (k1 = 1.2, b = 0.75, FTS5's idf floor, statistics over the whole
index), one hit per turn (best passage, ties the earlier one), score descending then
sequence descending. Compared where the order is determined (scores apart by more than
rounding); ties of equal score must come newest first."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold._segment import index_passages, query_terms

K1, B = 1.2, 0.75
EPS = 1e-9

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "zeta", "42", "7", "护照", "密码"]


@dataclass(frozen=True)
class Expected:
    turn_id: str
    sequence: int
    score: float
    text: str
    unique_best: bool  # the best passage beats every other passage of the turn


def reference(store: lf.SQLiteStore, conversation_id: str, query: str) -> list[Expected]:
    """Every live turn of every conversation is in the index (statistics); the hits are
    the conversation's live turns with a matching passage (no summary: scope covered =
    all)."""
    passages: list[tuple[str, str, int, str, list[str]]] = []  # conv, id, seq, text, tokens
    for cid in store.conversation_ids():
        for turn in store.load(cid).turns:
            for start, end, tokens in index_passages(turn.body):
                passages.append((cid, turn.id, turn.sequence, turn.body[start:end], tokens.split()))
    terms = query_terms(query)
    if not passages or not terms:
        return []
    n = len(passages)
    avgdl = sum(len(p[4]) for p in passages) / n
    idf = {}
    for term in terms:
        df = sum(1 for p in passages if term in p[4])
        value = math.log((n - df + 0.5) / (df + 0.5))
        idf[term] = value if value > 0 else 1e-6
    best: dict[str, list[tuple[float, int, str, int]]] = {}
    for cid, turn_id, sequence, text, tokens in passages:
        if cid != conversation_id:
            continue
        counts = Counter(tokens)
        if not any(counts[term] for term in terms):
            continue
        score = 0.0
        for term in terms:
            tf = counts[term]
            if tf:
                score += idf[term] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(tokens) / avgdl))
        best.setdefault(turn_id, []).append((score, sequence, text, len(best.get(turn_id, []))))
    out = []
    for turn_id, scored in best.items():
        top = max(score for score, *_ in scored)
        first = next(item for item in scored if item[0] >= top - EPS)
        rivals = [item for item in scored if item is not first and item[0] >= top - EPS]
        out.append(Expected(turn_id, first[1], top, first[2], not rivals))
    out.sort(key=lambda e: (-e.score, -e.sequence))
    return out


bodies = st.lists(st.sampled_from(WORDS), min_size=0, max_size=160).map(
    lambda words: " ".join(words) + "."
)
operations = st.lists(
    st.tuples(
        st.sampled_from(["c", "c", "c", "d"]),
        bodies,
        st.sampled_from(["keep", "keep", "keep", "retract", "edit", "erase"]),
        bodies,
    ),
    min_size=1,
    max_size=25,
)
queries = st.lists(
    st.sampled_from([*WORDS, "missing", "PO-42", "Alpha!"]), min_size=0, max_size=4
).map(" ".join)


def index_terms(store: lf.SQLiteStore) -> dict[str, int]:
    """Each term in the FTS5 index with the number of passages holding it."""
    conn = store._connection()
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, search_fts, row)"
    )
    return {row[0]: row[1] for row in conn.execute("SELECT term, doc FROM temp.vocab")}


def reference_terms(store: lf.SQLiteStore) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for cid in store.conversation_ids():
        for turn in store.load(cid).turns:
            for _, _, tokens in index_passages(turn.body):
                counts.update(set(tokens.split()))
    return dict(counts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    operations,
    queries,
    st.integers(min_value=1, max_value=100),
    st.integers(min_value=0, max_value=8),
)
def test_search_ranks_as_the_reference_does(
    ops: list[tuple[str, str, str, str]], query: str, limit: int, purge: int
) -> None:
    with lf.SQLiteStore() as store:
        for index, (cid, body, action, new_body) in enumerate(ops):
            turn = store.append(cid, "user", body, id=f"t{index}")
            if action == "retract":
                store.retract(cid, turn.id)
            elif action == "edit":
                store.edit(cid, turn.id, body=new_body)
            elif action == "erase":
                store.retract(cid, turn.id, erase=True)
        if purge and "c" in store.conversation_ids():
            store.purge_through("c", purge, "retention", force=True)
        # Every write path kept the index exactly: each term in as many passages as the
        # live bodies hold it (a delete with other tokens than the insert's would not be).
        assert index_terms(store) == reference_terms(store)
        expected = reference(store, "c", query)
        hits = store.search("c", query, limit=limit, scope="all")
        assert hits == store.search("c", query, limit=limit)  # no summary: covered = all
    by_id = {e.turn_id: e for e in expected}
    assert len(hits) == min(limit, len(expected))
    assert len({hit.turn_id for hit in hits}) == len(hits)  # one hit per turn
    for hit in hits:
        want = by_id[hit.turn_id]
        assert math.isclose(hit.score, want.score, rel_tol=1e-6, abs_tol=1e-9)
        assert hit.sequence == want.sequence and hit.summary_id is None
        if want.unique_best:
            assert hit.text == want.text
    for first, second in itertools.pairwise(hits):
        a, b = by_id[first.turn_id], by_id[second.turn_id]
        assert a.score >= b.score - EPS
        if abs(a.score - b.score) <= EPS:
            assert first.score >= second.score
            if first.score == second.score:
                assert first.sequence > second.sequence
    # The hits are the reference's best turns (up to ties at the cut).
    if len(expected) > len(hits) and hits:
        cut = by_id[hits[-1].turn_id].score
        assert all(
            e.score <= cut + EPS for e in expected if e.turn_id not in {h.turn_id for h in hits}
        )
    elif len(expected) <= limit:
        assert {hit.turn_id for hit in hits} == set(by_id)
