"""Benchmarks of search (SPEC §16.1 costs, measured as §16.5 "Measurement" says).

- `test_search_p50`: questions worded differently from planted facts (sharing only key
  terms), against a 100k-turn conversation of the real transcripts with the facts planted;
  p50 over the questions (target ≤ 5 ms), and how many facts the hits reach.
- `test_search_of_common_words`: a query of the 64 commonest words (only the rarest term
  kept, SPEC §16.5), against its kept term searched alone and a question, in one run.
- `test_index_size`: bytes of the index's tables (dbstat) over the body bytes, English
  transcripts at 100k turns (target ≤ 0.6); a CJK corpus (the seed design note's lines)
  reported beside it.
- `test_append_with_and_without_index`: `SQLiteStore.append` p50 with the index vs the
  same store with the index switched off, interleaved in one run, at durability "full"
  (target ≤ 1.25×) and "normal" (≤ 2.5×).
- `test_index_build` and `test_erase_scrub`: building the index of an existing ledger (a
  v4 file's first writing open) and an erasing call's index rewrite, reported.

Under the normal suite (`--benchmark-disable`) each runs once on small sizes as a smoke test.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from bench_conftest import full_size, interleaved, iter_transcript_turns, target

import ledgerfold as lf
from ledgerfold._segment import query_terms
from ledgerfold.store import _ledger as ledger_module
from ledgerfold.store import _search as search_module

#: (fact, question): the question shares only the fact's key terms.
FACTS: tuple[tuple[str, str], ...] = (
    ("My passport is in locker 3 and its code is 5100.", "what code opens the passport locker"),
    (
        "Never use the Oracle database for the billing service; licensing is too costly.",
        "which database must billing avoid over licensing",
    ),
    (
        "To-do: renew the TLS certificate for api.example.org before March 12.",
        "when is the TLS certificate due for renewal",
    ),
    ("The staging cluster password rotates every 30 days.", "how often does the password rotate"),
    (
        "I refused the vendor contract because clause 14 allows data resale.",
        "why did I turn down the vendor contract",
    ),
    ("Shipment PO-9302 goes to warehouse QZ-704.", "which warehouse gets PO-9302"),
    ("The budget cap for the marketing offsite is 4200 euros.", "offsite budget cap in euros"),
    ("My daughter is allergic to peanuts and sesame.", "what is my daughter allergic to"),
    (
        "Backups of the ledger database run nightly at 02:30 UTC.",
        "at what hour do the nightly backups run",
    ),
    (
        "Do not email the finance team after 6pm; use the ticket queue.",
        "how to reach finance team late, email or ticket queue",
    ),
    ("我的护照放在3号储物柜，密码是5100。", "护照在哪个储物柜，密码多少"),
    ("周五之前必须把合同草稿发给李经理。", "合同草稿要发给李经理吗"),
    (
        "The Kubernetes upgrade is blocked by the deprecated ingress annotations.",
        "what blocks the Kubernetes upgrade",
    ),
    ("Preferred flight seat: aisle, never the last row.", "aisle or window flight seat"),
    (
        "The API rate limit for partner Zephyr is 120 requests per minute.",
        "Zephyr rate limit per minute",
    ),
    (
        "Grandma's birthday dinner is at the Lotus restaurant on June 8.",
        "where is grandma's birthday dinner",
    ),
)

INDEX_TABLES = (
    "search_fts_data",
    "search_fts_idx",
    "search_fts_docsize",
    "search_fts_config",
)


def turns_of_size(n: int) -> Iterator[dict[str, Any]]:
    """`n` append specs of the real transcripts (repeated), with the facts planted as user
    turns spread evenly."""
    source = [(t["role"], t["body"]) for t in iter_transcript_turns()]
    every = max(1, n // len(FACTS))
    for i in range(n):
        if i % every == every // 2 and i // every < len(FACTS):
            yield {"role": "user", "body": FACTS[i // every][0], "id": f"fact{i // every}"}
        else:
            role, body = source[i % len(source)]
            yield {"role": role, "body": body, "id": f"t{i}"}


def fill(store: lf.SQLiteStore, conversation_id: str, specs: Iterator[dict[str, Any]]) -> None:
    chunk: list[dict[str, Any]] = []
    for spec in specs:
        chunk.append(spec)
        if len(chunk) == 5000:
            store.append_many(conversation_id, chunk)
            chunk = []
    if chunk:
        store.append_many(conversation_id, chunk)


@pytest.fixture(scope="module")
def searched_ledger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[lf.SQLiteStore, Path, int]]:
    """A file store holding one conversation of 100k real turns (600 in smoke mode;
    `LEDGERFOLD_BENCH_SEARCH_TURNS=1000000` for the 1M-turn build and scrub figures)."""
    n = 100_000 if full_size(request.config) else 600
    n = int(os.environ.get("LEDGERFOLD_BENCH_SEARCH_TURNS", n))
    path = tmp_path_factory.mktemp("search") / "ledger.db"
    store = lf.SQLiteStore(path, durability="normal")
    start = time.perf_counter()
    fill(store, "c", turns_of_size(n))
    store._build_seconds = time.perf_counter() - start  # type: ignore[attr-defined]
    yield store, path, n
    store.close()


def test_search_p50(
    benchmark: Any,
    request: pytest.FixtureRequest,
    searched_ledger: tuple[lf.SQLiteStore, Path, int],
) -> None:
    store, _, n = searched_ledger
    questions = [question for _, question in FACTS]
    cycle = count()
    seconds: list[float] = []

    def ask() -> list[lf.SearchHit]:
        question = questions[next(cycle) % len(questions)]
        start = time.perf_counter()
        hits = store.search("c", question, limit=5)
        seconds.append(time.perf_counter() - start)
        return hits

    rounds = 5 * len(questions) if full_size(request.config) else len(questions)
    benchmark.pedantic(ask, rounds=rounds, iterations=1)
    if not seconds:  # --benchmark-disable runs the function once
        for _ in questions:
            ask()
    reached = sum(
        f"fact{k}" in {hit.turn_id for hit in store.search("c", question, limit=5)}
        for k, (_, question) in enumerate(FACTS)
    )
    benchmark.extra_info.update(
        turns=n,
        questions=len(questions),
        search_p50_s=statistics.median(seconds),
        search_p90_s=statistics.quantiles(seconds, n=10)[-1] if len(seconds) > 1 else None,
        facts_reached=reached,
    )
    target(benchmark, "search_p50_s", max_value=0.005)
    assert reached >= 1  # the ledger holds the facts and search reaches them


def _common_words(store: lf.SQLiteStore, k: int = 64) -> str:
    """The `k` words (letters only) the most of the ledger's first 5,000 bodies hold."""
    held: Counter[str] = Counter()
    for turn in store.load("c").turns[:5000]:
        held.update({word for word in turn.body.lower().split() if word.isalpha()})
    return " ".join(word for word, _ in held.most_common(k))


def test_search_of_common_words(
    benchmark: Any,
    request: pytest.FixtureRequest,
    searched_ledger: tuple[lf.SQLiteStore, Path, int],
) -> None:
    """A query of the 64 commonest words (every term past `DF_DROP`: only the rarest is
    kept, SPEC §16.5), against the same ledger, with two anchors timed in the same rounds:
    that kept term searched alone (the scoring every such search must do) and a question
    of `test_search_p50`. The choice of the rarest used to count each term's passages up
    to 5,001 with a join to its turn and keep the first term when all reached that (the
    commonest, "the"): ~440 ms here at 100k turns against ~50 ms now."""
    store, _, n = searched_ledger
    query = _common_words(store)
    terms = query_terms(query)
    conn = store._connection()
    kept = search_module.kept_terms(conn, "c", terms, search_module._span(conn, "c"))
    question = FACTS[0][1]

    def ours() -> list[lf.SearchHit]:
        return store.search("c", query, limit=5)

    anchors = {
        "search_of_the_kept_term_alone": lambda: store.search("c", " ".join(kept), limit=5),
        "search_of_a_question": lambda: store.search("c", question, limit=5),
    }
    rounds = 30 if full_size(request.config) else 1
    interleaved(benchmark, request.config, ours, anchors, rounds=rounds)
    held = conn.execute(
        "SELECT COUNT(*) FROM search_fts WHERE search_fts MATCH ?",
        (" OR ".join(f'"{term}"' for term in kept),),
    ).fetchone()[0]
    benchmark.extra_info.update(
        turns=n, distinct_terms=len(terms), kept=" ".join(kept), kept_passages=held
    )
    target(benchmark, "search_of_the_kept_term_alone", max_ratio=3.0)
    # At 100k turns every term is common; in smoke mode (600 turns) a few are not.
    assert (len(kept) == 1 or not full_size(request.config)) and ours()


def _index_bytes(conn: sqlite3.Connection) -> int:
    marks = ",".join("?" * len(INDEX_TABLES))
    return int(
        conn.execute(
            f"SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN ({marks})", INDEX_TABLES
        ).fetchone()[0]
    )


def _body_bytes(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT SUM(LENGTH(CAST(body AS BLOB))) FROM turns").fetchone()[0] or 0)


def _optimized_ratio(store: lf.SQLiteStore) -> float:
    """Index bytes over body bytes, the index merged into one segment (as after an erasing
    call) and the file vacuumed, so free pages do not count."""
    conn = store._connection()
    conn.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
    conn.execute("VACUUM")
    return _index_bytes(conn) / _body_bytes(conn)


def cjk_turns(n: int) -> Iterator[dict[str, Any]]:
    """The seed design note (Chinese), one turn per non-empty line, repeated."""
    path = Path(__file__).resolve().parent / "data" / "seed-design-note.zh.txt"
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i in range(n):
        yield {"role": "user", "body": lines[i % len(lines)]}


def test_index_size(
    benchmark: Any,
    searched_ledger: tuple[lf.SQLiteStore, Path, int],
    tmp_path: Path,
) -> None:
    store, _, n = searched_ledger
    conn = store._connection()
    unmerged = _index_bytes(conn) / _body_bytes(conn)
    with lf.SQLiteStore(tmp_path / "cjk.db", durability="normal") as cjk:
        fill(cjk, "c", cjk_turns(n // 10))
        cjk_ratio = _optimized_ratio(cjk)
    ratio = benchmark.pedantic(lambda: _optimized_ratio(store), rounds=1, iterations=1)
    benchmark.extra_info.update(
        turns=n,
        index_to_body_ratio=ratio,
        index_to_body_ratio_before_merge=unmerged,
        cjk_index_to_body_ratio=cjk_ratio,
        cjk_turns=n // 10,
        build_by_append_many_s=store._build_seconds,  # type: ignore[attr-defined]
    )
    target(benchmark, "index_to_body_ratio", max_value=0.6)


@contextmanager
def index_off() -> Iterator[None]:
    """The write paths without the index: what `append` costs when nothing is indexed."""
    real = ledger_module.search_index.index_turns
    ledger_module.search_index.index_turns = lambda *args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        ledger_module.search_index.index_turns = real  # type: ignore[assignment]


@pytest.mark.parametrize(("durability", "max_ratio"), [("full", 1.25), ("normal", 2.5)])
def test_append_with_and_without_index(
    benchmark: Any,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    durability: str,
    max_ratio: float,
) -> None:
    prefill = 20_000 if full_size(request.config) else 200
    rounds = 400 if full_size(request.config) else 1
    with_index = lf.SQLiteStore(tmp_path / "with.db", durability=durability)
    without = lf.SQLiteStore(tmp_path / "without.db", durability=durability)
    fill(with_index, "c", turns_of_size(prefill))
    with index_off():
        fill(without, "c", turns_of_size(prefill))
    bodies = [spec["body"] for spec in turns_of_size(prefill + rounds * 2)][prefill:]
    ours_next, anchor_next = count(), count()

    def ours() -> lf.Turn:
        return with_index.append("c", "user", bodies[next(ours_next) % len(bodies)])

    def anchor() -> object:
        with index_off():
            return without.append("c", "user", bodies[next(anchor_next) % len(bodies)])

    interleaved(benchmark, request.config, ours, {"append_without_index": anchor}, rounds=rounds)
    benchmark.extra_info.update(durability=durability, prefill_turns=prefill)
    target(benchmark, "append_without_index", max_ratio=max_ratio)
    with_index.close()
    without.close()


def _as_v4(path: Path) -> None:
    """Take the index out of a file, as a v4 store wrote it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        "DROP TABLE search_fts; DROP TABLE search_state; DROP TABLE search_offsets;"
        " DELETE FROM schema_migrations WHERE version = 5; PRAGMA user_version = 4; VACUUM;"
    )
    conn.close()


def test_index_build(
    benchmark: Any, searched_ledger: tuple[lf.SQLiteStore, Path, int], tmp_path: Path
) -> None:
    store, _, n = searched_ledger
    copy = tmp_path / "v4.db"
    with sqlite3.connect(copy) as target_conn:
        store._connection().backup(target_conn)
    _as_v4(copy)

    def open_for_writing() -> None:
        lf.SQLiteStore(copy, durability="normal").close()

    benchmark.pedantic(open_for_writing, rounds=1, iterations=1)
    start = time.perf_counter()
    _as_v4(copy)
    open_for_writing()
    benchmark.extra_info.update(turns=n, build_s=time.perf_counter() - start)


def test_erase_scrub(
    benchmark: Any,
    request: pytest.FixtureRequest,
    searched_ledger: tuple[lf.SQLiteStore, Path, int],
) -> None:
    """`retract(..., erase=True)` on the 100k-turn ledger: the erasure with the index
    rewrite (`optimize`) and the WAL checkpoint, vs a retraction without erasure."""
    store, _, n = searched_ledger
    erased = count()

    def erase() -> None:
        store.retract("c", f"t{2 * next(erased) + 1}", erase=True)

    plain = count()

    def retract() -> None:
        store.retract("c", f"t{2 * next(plain) + 2}")

    seconds = _time(retract)
    benchmark.pedantic(erase, rounds=3 if full_size(request.config) else 1, iterations=1)
    benchmark.extra_info.update(turns=n, retract_without_erase_s=seconds)


def _time(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start
