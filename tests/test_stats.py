"""`SQLiteStore.stats()` (SPEC §17.8): the state now — conversations, turns by state,
summaries by status, fallbacks by reason — for the store and for one conversation, on the
real transcripts; read-only, and it writes nothing."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.store import StoreStats
from steps_support import vm_steps

PV = "stats-v1"


def build(path: Path) -> None:
    with lf.SQLiteStore(path) as store:
        for conversation in ("fresh", "compacted", "edited", "purged"):
            for i in range(14):
                store.append(conversation, "user", f"{conversation} turn {i}", id=f"{i}")
        compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1))
        for conversation in ("compacted", "edited", "purged"):
            assert compactor.compact(conversation).accepted
        store.edit("edited", "2", body="changed")  # its summary goes stale
        store.retract("compacted", "13")
        store.purge_through("purged", 5, "retention", force=True)
        store.edit("purged", "7", body="changed")  # sealed summary stale: purged, no summary
        store.start_plan("fresh", 2, PV)
        store.start_plan("fresh", 2, PV)  # the first plan is abandoned: one failed record


def test_stats_of_the_store_and_of_one_conversation(tmp_path: Path) -> None:
    path = tmp_path / "stats.db"
    build(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with lf.SQLiteStore(path, read_only=True) as store:
        stats = store.stats()
        one = store.stats("edited")
        unknown = store.stats("nobody")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert isinstance(stats, StoreStats)
    assert (stats.conversations, stats.turns, stats.turns_retracted, stats.turns_purged) == (
        4,
        4 * 14 - 1 - 5,
        1,
        5,
    )
    assert stats.summaries == {
        "current": 1,
        "superseded": 0,
        "stale": 2,
        "failed": 1,
        "rejected": 0,
    }
    assert stats.fallbacks == {"no-summary": 1, "stale-summary:source-modified": 2}
    assert stats.purged_without_summary == 1
    assert one.as_dict() == {
        "conversations": 1,
        "turns": 14,
        "turns_retracted": 0,
        "turns_purged": 0,
        "summaries": {"current": 0, "superseded": 0, "stale": 1, "failed": 0, "rejected": 0},
        "fallbacks": {"stale-summary:source-modified": 1},
        "purged_without_summary": 0,
        "sealed_lost": 0,
    }
    assert (unknown.conversations, unknown.turns, unknown.fallbacks) == (0, 0, {})


def test_stats_agree_with_each_conversations_context(tmp_path: Path) -> None:
    """The fallback a conversation is counted under is the one its context reports."""
    path = tmp_path / "agree.db"
    build(path)
    with lf.SQLiteStore(path) as store:
        for conversation in store.conversation_ids():
            fallback = store.context(conversation, PV).fallback
            counted = store.stats(conversation).fallbacks
            assert counted == ({} if fallback is None else {fallback: 1}), conversation


@pytest.mark.parametrize("bad", ["", 5, "\ud800"])
def test_a_bad_conversation_id_is_invalid_input(bad: object) -> None:
    with lf.SQLiteStore() as store, pytest.raises(lf.InvalidInput) as caught:
        store.stats(bad)  # type: ignore[arg-type]
    assert caught.value.field == "conversation_id"


def test_layout_fallbacks_of_a_current_summary_are_counted(tmp_path: Path) -> None:
    """SPEC §17.3 and §8: a current summary whose protected turn below the slot was retracted
    (`preserved-missing`) or whose ID a live turn also holds (`duplicate-id`) is not used:
    the context is raw, so `stats()` counts the conversation under that reason."""
    path = tmp_path / "layout.db"
    with lf.SQLiteStore(path) as store:
        for conversation in ("missing", "clash", "fine"):
            for i in range(14):
                store.append(
                    conversation,
                    "user",
                    f"{conversation} turn {i}",
                    id=f"{i}",
                    protected=i == 3,
                    protection_reason="audit-evidence" if i == 3 else None,
                )
        compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1))
        for conversation in ("missing", "clash", "fine"):
            assert compactor.compact(conversation).accepted
        store.retract("missing", "3")
        clash = store.current_summary("clash")
        assert clash is not None
        store.append("clash", "user", "a turn named like the summary", id=clash.id)
    with lf.SQLiteStore(path, read_only=True) as store:
        for conversation in ("missing", "clash", "fine"):
            fallback = store.context(conversation, PV).fallback
            counted = store.stats(conversation).fallbacks
            assert counted == ({} if fallback is None else {fallback: 1}), conversation
        stats = store.stats()
    assert stats.fallbacks == {"duplicate-id": 1, "preserved-missing": 1}
    assert stats.summaries["current"] == 3


def test_a_purge_that_purged_nothing_is_no_purge(tmp_path: Path) -> None:
    """A purge through the system prompt alone (kept: `keep_roles`) purges no turn: it
    records no boundary (SPEC §8), and the boundary a database written before that rule
    holds for it does not count: `purged_without_summary` and `sealed_lost` count
    conversations with purged turns."""
    path = tmp_path / "kept.db"
    with lf.SQLiteStore(path) as store:
        for conversation in ("plain", "compacted"):
            store.append(conversation, "system", "prompt", id="sys")
            for i in range(10):
                store.append(conversation, "user", f"{conversation} turn {i}", id=f"{i}")
        compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1))
        assert compactor.compact("compacted").accepted
        for conversation in ("plain", "compacted"):
            store.purge_through(conversation, 1, "retention")
            assert store.history_boundary(conversation) is None
    with sqlite3.connect(path) as db:  # what an earlier version recorded for such a purge
        db.executemany(
            "INSERT INTO history_boundaries (conversation_id, through_sequence, reason,"
            " purged_at) VALUES (?, 1, 'retention', '2026-01-01T00:00:00+00:00')",
            [("plain",), ("compacted",)],
        )
    db.close()
    with lf.SQLiteStore(path, read_only=True) as store:
        assert store.history_boundary("plain") is not None
        stats = store.stats()
    assert stats.turns_purged == 0
    assert (stats.purged_without_summary, stats.sealed_lost) == (0, 0)


def _one_conversation_steps(path: Path, others: int) -> int:
    """SQLite VM steps (in tens) of `stats()` of one compacted, purged conversation beside
    `others` more like it."""
    with lf.SQLiteStore(path, durability="normal") as store:
        compactor = lf.Compactor(store, lf.CompactionPolicy(PV, keep_tail=4, min_new_turns=1))
        for n in range(others + 1):
            store.append_many(f"c{n}", [{"role": "user", "body": f"turn {i}"} for i in range(12)])
            if n % 25 == 0:
                assert compactor.compact(f"c{n}").accepted
                store.purge_through(f"c{n}", 3, "retention")
        steps, found = vm_steps(store, lambda: store.stats("c0"))
        assert found.conversations == 1 and found.turns_purged == 3
        return steps


def test_stats_of_one_conversation_do_not_read_the_others(tmp_path: Path) -> None:
    # Measured, not a fix: every query of `stats(conversation_id)` is an index search of that
    # conversation's rows (EXPLAIN QUERY PLAN), so its cost follows the conversation.
    small = _one_conversation_steps(tmp_path / "small.db", 10)
    large = _one_conversation_steps(tmp_path / "large.db", 1000)
    assert large <= small + 5
