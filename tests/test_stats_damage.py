"""`stats()` counts a conversation under the fallback its `context()` gives also when the
current summary's record was damaged outside ledgerfold (SPEC §17.8: stats describes the
conversations whose context falls back, by reason): a record the store cannot read is
`stale-summary:damaged-record`, one naming another conversation
`stale-summary:conversation-mismatch`, a pointer to no record `no-summary`. Differential:
random damage on several conversations of a real file, stats against each context."""

from __future__ import annotations

import random
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import ledgerfold as lf

PV = "stats-damage-v1"
CONVERSATIONS = [f"c{n}" for n in range(10)]
POINTED = "(SELECT current_summary FROM conversations WHERE id = ?)"
RUN = f"(SELECT source_run FROM summaries WHERE pk = {POINTED})"

#: Damage to a conversation's pointed summary (`?`: the conversation ID); the last ones
#: leave a record the store reads (a source ID stored as a blob of UTF-8, a fingerprint
#: that is text but wrong: the context's fast path does not check it).
DAMAGE = {
    "text not UTF-8": f"UPDATE summaries SET text = CAST(x'ff41' AS TEXT) WHERE pk = {POINTED}",
    "text NULL": f"UPDATE summaries SET text = NULL WHERE pk = {POINTED}",
    "text a blob": f"UPDATE summaries SET text = x'41' WHERE pk = {POINTED}",
    "reason not UTF-8": f"UPDATE summaries SET reason = CAST(x'ff' AS TEXT) WHERE pk = {POINTED}",
    "created_at not UTF-8": (
        f"UPDATE summaries SET created_at = CAST(x'c3' AS TEXT) WHERE pk = {POINTED}"
    ),
    "through_sequence not UTF-8": (
        f"UPDATE summaries SET through_sequence = CAST(x'ff41' AS TEXT) WHERE pk = {POINTED}"
    ),
    "fingerprint NULL": f"UPDATE summaries SET source_fingerprint = NULL WHERE pk = {POINTED}",
    "fingerprint blank": f"UPDATE summaries SET source_fingerprint = ' ' WHERE pk = {POINTED}",
    "id NULL": f"UPDATE summaries SET id = NULL WHERE pk = {POINTED}",
    "plan_id blank": f"UPDATE summaries SET plan_id = ' ' WHERE pk = {POINTED}",
    "parent_id blank": f"UPDATE summaries SET parent_id = '' WHERE pk = {POINTED}",
    "revision negative": f"UPDATE summaries SET source_revision = -1 WHERE pk = {POINTED}",
    "revision text": f"UPDATE summaries SET source_revision = 'x' WHERE pk = {POINTED}",
    "rejected ids not JSON": (
        f"UPDATE summaries SET rejected_source_ids = '[' WHERE pk = {POINTED}"
    ),
    "source ID a blob not UTF-8": (
        f"UPDATE run_sources SET turn_id = x'ff' WHERE run_pk = {RUN} AND position = 0"
    ),
    "another conversation's": (
        f"UPDATE summaries SET conversation_id = 'elsewhere' WHERE pk = {POINTED}"
    ),
    "pointer to no record": "UPDATE conversations SET current_summary = 99999 WHERE id = ?",
    "source ID a blob of UTF-8": (
        "UPDATE run_sources SET turn_id = CAST(turn_id AS BLOB)"
        f" WHERE run_pk = {RUN} AND position = 0"
    ),
    "fingerprint wrong": f"UPDATE summaries SET source_fingerprint = 'zz' WHERE pk = {POINTED}",
}


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten conversations: eight compacted (two of them edited since: stale), two never."""
    path = tmp_path_factory.mktemp("damage") / "base.db"
    with lf.SQLiteStore(path) as store:
        for cid in CONVERSATIONS:
            store.append_many(cid, [{"role": "user", "body": f"{cid} turn {n}"} for n in range(12)])
        compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1))
        for cid in CONVERSATIONS[:8]:
            assert compactor.compact(cid).accepted
        for cid in CONVERSATIONS[6:8]:
            store.edit(cid, store.load(cid).turns[1].id, body="changed")
    return path


def _contexts(path: Path) -> dict[str, str | None]:
    with lf.SQLiteStore(path, read_only=True) as store:
        return {cid: store.context(cid, PV).fallback for cid in store.conversation_ids()}


@pytest.mark.parametrize("seed", range(8))
def test_stats_fallbacks_equal_each_context_under_random_damage(
    ledger: Path, tmp_path: Path, seed: int
) -> None:
    path = tmp_path / "damaged.db"
    shutil.copy(ledger, path)
    rng = random.Random(seed)
    damaged = rng.sample(CONVERSATIONS, 5)
    with sqlite3.connect(path) as conn:
        for cid in damaged:
            conn.execute(DAMAGE[rng.choice(sorted(DAMAGE))], (cid,))
    contexts = _contexts(path)
    with lf.SQLiteStore(path, read_only=True) as store:
        for cid, fallback in contexts.items():
            counted = store.stats(cid).fallbacks
            assert counted == ({} if fallback is None else {fallback: 1}), (cid, seed)
        whole = store.stats()
    assert whole.fallbacks == dict(Counter(f for f in contexts.values() if f is not None))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_each_damage_is_counted_as_the_context_gives_it(
    ledger: Path, tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "damaged.db"
    shutil.copy(ledger, path)
    with sqlite3.connect(path) as conn:
        conn.execute(DAMAGE[damage], ("c0",))
    fallback = _contexts(path)["c0"]
    readable = damage in ("source ID a blob of UTF-8", "fingerprint wrong")
    if readable:
        assert fallback is None
    elif damage == "another conversation's":
        assert fallback == "stale-summary:conversation-mismatch"
    elif damage == "pointer to no record":
        assert fallback == "no-summary"
    else:
        assert fallback == "stale-summary:damaged-record"
    with lf.SQLiteStore(path, read_only=True) as store:
        assert store.stats("c0").fallbacks == ({} if fallback is None else {fallback: 1})


def test_a_damaged_summary_over_purged_turns_leaves_them_summarised_nowhere(
    tmp_path: Path,
) -> None:
    """The model sees no summary the context cannot read: with purged turns under it, the
    conversation counts in `purged_without_summary` (not `sealed_lost`, which is about a
    readable current summary that does not cover them)."""
    path = tmp_path / "purged.db"
    with lf.SQLiteStore(path) as store:
        store.append_many("p", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
        compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1))
        assert compactor.compact("p").accepted
        store.purge_through("p", 3, "retention")
        assert (store.stats().purged_without_summary, store.stats().sealed_lost) == (0, 0)
    with sqlite3.connect(path) as conn:
        conn.execute(DAMAGE["text not UTF-8"], ("p",))
    with lf.SQLiteStore(path, read_only=True) as store:
        assert store.context("p", PV).fallback == "stale-summary:damaged-record"
        stats = store.stats()
    assert stats.fallbacks == {"stale-summary:damaged-record": 1}
    assert (stats.purged_without_summary, stats.sealed_lost) == (1, 0)
