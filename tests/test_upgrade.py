"""A v1 database (schema 1, written before the agent loop) opens, migrates to the newest
schema and keeps working:
its current summary is still used, and the next compaction rebases or extends it soundly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import ledgerfold as lf
from ledgerfold.store._schema import APPLICATION_ID, MIGRATIONS

V1_DDL = MIGRATIONS[0][2]


def write_v1_database(path: Path) -> list[lf.Turn]:
    """What v1 wrote for 21 turns and one summary of the first 17 (system prompt included:
    v1 preserved no role), with v1's own tables and rows."""
    turns = [lf.Turn("sys", 1, "system", "You are an agent.")] + [
        lf.Turn(f"m{i}", i + 2, "user" if i % 2 == 0 else "assistant", f"message {i}")
        for i in range(20)
    ]
    sources = turns[:17]
    envelope_fingerprint = lf.fingerprint_turns(sources)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(V1_DDL)
    conn.execute("INSERT INTO schema_migrations VALUES (1, 'initial', '2026-01-01T00:00:00')")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO conversations VALUES ('c', 21, 21, NULL)")
    for turn in turns:
        conn.execute(
            "INSERT INTO turns (conversation_id, id, sequence, role, body, protected,"
            " protection_reason, grp, meta, digest) VALUES ('c', ?, ?, ?, ?, 0, NULL, NULL,"
            " NULL, ?)",
            (turn.id, turn.sequence, turn.role, turn.body, turn.digest),
        )
    conn.execute(
        "INSERT INTO plans (id, conversation_id, policy_version, source_revision,"
        " through_sequence, compacted_count, created_at) VALUES ('p1', 'c', 'v1', 21, 17, 17,"
        " '2026-01-01T00:00:00')"
    )
    pk = conn.execute(
        "INSERT INTO summaries (id, conversation_id, plan_id, status, created_at,"
        " source_revision, source_fingerprint, policy_version, text, source_count,"
        " through_sequence) VALUES ('s1', 'c', 'p1', 'current', '2026-01-01T00:00:00', 21, ?,"
        " 'v1', 'the first 17 turns', 17, 17)",
        (envelope_fingerprint,),
    ).lastrowid
    for position, turn in enumerate(sources):
        conn.execute(
            "INSERT INTO summary_sources VALUES (?, ?, ?, ?)",
            (pk, position, turn.id, turn.digest),
        )
    conn.execute("UPDATE conversations SET current_summary = ? WHERE id = 'c'", (pk,))
    conn.close()
    return turns


def test_a_v1_database_migrates_and_its_summary_is_rebased_without_the_system_prompt(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v1.db"
    write_v1_database(path)
    with lf.SQLiteStore(path) as store:
        context = store.context("c", "v1")
        assert context.fallback is None and context.summary is not None
        assert context.summary.id == "s1" and len(context.summary.source_ids) == 17
        for i in range(20, 30):
            store.append("c", "user", f"message {i}", id=f"m{i}")
        compactor = lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=4))
        # v1's summary covers the system prompt, which v1.1 keeps raw: coverage would
        # shrink, so this is a rebase (no parent, no previous text).
        rebased = compactor.compact("c")
        assert rebased.summary is not None and rebased.summary.parent_id is None
        assert "sys" not in rebased.summary.source_ids
        for i in range(30, 40):
            store.append("c", "user", f"message {i}", id=f"m{i}")
        rolled = compactor.compact("c")
        assert rolled.summary is not None and rolled.summary.parent_id == rebased.summary.id
        context = store.context("c", "v1")
        assert context.fallback is None and context.items[0].id == "sys"
    with sqlite3.connect(path) as conn:
        assert (
            conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
            == (MIGRATIONS[-1][0])
        )
