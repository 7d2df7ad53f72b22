"""Revalidation's split check and digest audit, done by the workers run by run
(`ledgerfold._revalidate_audit`), give the report the two whole-database passes that preceded
them gave (kept here as the oracle: one query per current summary for its raw turns' tool-call
links, one scan of every live turn no verified summary covers), whatever the workers and
batches, on random databases with split units, wrong digests, damaged rows and records,
conversations without a summary and rows the native pass cannot read."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore
from ledgerfold import _revalidate_audit as revalidate_audit
from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold.revalidate import RevalidationReport, revalidate_database
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store import _digests as digests
from ledgerfold.store._schema import CURRENT, TURN_LIVE

# ------------------------------------------------------------------ the oracle (the old passes)

# (The old scan read the digest as it was stored, and failed on text that is not UTF-8; a
# digest not stored as a blob is wrong either way.)
_OLD_UNVERIFIED = (
    "SELECT t.conversation_id, CAST(t.id AS BLOB), t.sequence, CAST(t.role AS BLOB),"
    " CAST(t.body AS BLOB), t.protected, CAST(t.protection_reason AS BLOB),"
    " CAST(t.grp AS BLOB), CAST(t.meta AS BLOB),"
    " CASE WHEN typeof(t.digest) = 'blob' THEN t.digest END, t.pk"
    " FROM turns AS t WHERE t.state = ? AND NOT EXISTS ("
    " SELECT 1 FROM conversations AS c JOIN summaries AS s ON s.pk = c.current_summary"
    " JOIN summary_sources AS ss ON ss.summary_pk = s.pk"
    f" WHERE c.id = t.conversation_id AND s.status = '{CURRENT}' AND ss.turn_id = t.id"
    " AND s.id NOT IN (SELECT value FROM json_each(?))) ORDER BY t.pk"
)


def old_report(path: Path) -> dict[str, Any]:
    """The verdicts of the fingerprint check, then the split check per current summary, then
    the scan of every unverified live turn: what revalidation reported before the workers
    did the last two."""
    conn = batch_reads.open_readonly(path)
    try:
        jobs, verdicts = revalidate_runs.jobs_and_damage(conn)
        utf8 = batch_reads.is_utf8(conn)
        for run in revalidate_runs.runs(jobs, 2_000):
            found, _, _ = revalidate_runs.check_run(conn, run, 1, utf8=utf8)
            verdicts.extend(revalidate_runs._unseal(conn, verdict) for verdict in found)
        split: list[tuple[str, str, str | None, str | None]] = []
        for conversation_id, summary_id, reason, turn_id in verdicts:
            if reason is None:
                found_split = revalidate_audit.split_in(conn, conversation_id, summary_id)
                if found_split is not None:
                    reason, turn_id = "group-split", found_split
            split.append((conversation_id, summary_id, reason, turn_id))
        stale = [verdict for verdict in split if verdict[2] is not None]
        audit = revalidate_audit.Audit()
        stale_ids = json.dumps(sorted({verdict[1] for verdict in stale}))
        for row in conn.execute(_OLD_UNVERIFIED, (TURN_LIVE, stale_ids)):
            audit.count(digests.check_row(row))
    finally:
        conn.close()
    return {
        "stale": sorted(stale),
        "checked": len(split),
        "digests_checked": audit.checked,
        "turns_damaged": audit.damaged,
        "wrong_digests": [(conversation, turn) for _, conversation, turn in audit.wrong],
    }


def summary_of(report: RevalidationReport) -> dict[str, Any]:
    return {
        "stale": sorted(
            (item.conversation_id, item.summary_id, item.reason, item.turn_id)
            for item in report.stale_summaries
        ),
        "checked": report.summaries_checked,
        "digests_checked": report.digests_checked,
        "turns_damaged": report.turns_damaged,
        "wrong_digests": list(report.wrong_digests),
    }


# ------------------------------------------------------------------ random databases


def _calls(*call_ids: str) -> dict[str, str]:
    return {"tool_calls": json.dumps([{"id": c, "type": "function"} for c in call_ids])}


def _conversation(rng: random.Random, number: int) -> list[dict[str, Any]]:
    """User turns, tool calls with their results (some unanswered, some with a result in a
    group), plain assistant turns."""
    specs: list[dict[str, Any]] = []
    for step in range(rng.randint(2, 14)):
        kind = rng.random()
        tag = f"{number}-{step}"
        if kind < 0.4:
            specs.append({"role": "user", "body": f"question {tag} " + "x" * rng.randint(0, 50)})
        elif kind < 0.8:
            count = rng.randint(1, 2)
            ids = [f"call-{tag}-{n}" for n in range(count)]
            specs.append({"role": "assistant", "body": f"calling {tag}", "meta": _calls(*ids)})
            answered = ids if rng.random() < 0.85 else ids[:-1]
            for call_id in answered:
                specs.append(
                    {"role": "tool", "body": f"result {call_id}", "meta": {"tool_call_id": call_id}}
                )
        else:
            specs.append({"role": "assistant", "body": f"answer {tag}"})
    return specs


def _build(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with SQLiteStore(path) as store:
        for number in range(rng.randint(8, 20)):
            conversation_id = f"conv-{number:03d}"
            store.append_many(conversation_id, _conversation(rng, number))
            if rng.random() < 0.85:
                policy = CompactionPolicy("v1", keep_tail=rng.randint(1, 4), min_new_turns=1)
                Compactor(store, policy).compact(conversation_id, force=True)


def _damage(path: Path, seed: int) -> None:
    """Behind the store's back: bodies changed (digests left wrong), a result appended to a
    summarised call with the summary left current (a database written before links made
    units), rows made unreadable, a digest stored as text, a record damaged."""
    rng = random.Random(seed + 1)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    live = [row[0] for row in conn.execute("SELECT pk FROM turns WHERE state = 0")]
    changes = [
        "UPDATE turns SET body = body || ' changed' WHERE pk = ?",
        "UPDATE turns SET body = X'ff00' WHERE pk = ?",
        "UPDATE turns SET role = 'admin' WHERE pk = ?",
        "UPDATE turns SET meta = '{\"k\": 1}' WHERE pk = ?",
        'UPDATE turns SET meta = \'{"tool_call_id": "a", "tool_call_id": "b"}\' WHERE pk = ?',
        "UPDATE turns SET digest = CAST(digest AS TEXT) WHERE pk = ?",
        "UPDATE turns SET digest = hex(digest) WHERE pk = ?",
        'UPDATE turns SET meta = json_object(\'tool_calls\', \'[{"id": "x", "n": NaN}]\')'
        " WHERE pk = ?",
    ]
    for pk in rng.sample(live, min(len(live), rng.randint(1, 8))):
        conn.execute(rng.choice(changes), (pk,))
    # Late results of summarised calls, recorded as an older version would have.
    cited_calls = conn.execute(
        "SELECT t.conversation_id, t.meta FROM turns AS t"
        " JOIN conversations AS c ON c.id = t.conversation_id"
        " JOIN summary_sources AS ss ON ss.summary_pk = c.current_summary AND ss.turn_id = t.id"
        " WHERE t.role = 'assistant' AND t.meta IS NOT NULL AND t.state = 0"
    ).fetchall()
    conn.commit()
    conn.close()
    for conversation_id, meta in rng.sample(cited_calls, min(len(cited_calls), 3)):
        try:
            call_id = json.loads(json.loads(meta)["tool_calls"])[0]["id"]
        except (ValueError, KeyError, IndexError, TypeError):
            continue
        with SQLiteStore(path) as store:
            store.append(conversation_id, "tool", "late", meta={"tool_call_id": call_id})
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE summaries SET status = 'current', reason = NULL"
        " WHERE status = 'stale' AND reason = 'group-split'"
    )
    # An unsummarised conversation's turn and a tail turn changed too; a record damaged.
    if rng.random() < 0.5:
        conn.execute(
            "UPDATE summaries SET source_fingerprint = NULL WHERE pk ="
            " (SELECT current_summary FROM conversations WHERE current_summary IS NOT NULL"
            " ORDER BY id LIMIT 1)"
        )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("seed", range(12))
def test_the_workers_report_what_the_whole_database_passes_reported(
    tmp_path: Path, seed: int
) -> None:
    path = tmp_path / "ledger.db"
    _build(path, seed)
    _damage(path, seed)
    expected = old_report(path)
    reports = [
        revalidate_database(path, workers=workers, batch_turns=batch, mark_stale=False)
        for workers, batch in ((1, 2_000), (2, 2_000), (3, 7), (2, 1))
    ]
    for report in reports:
        assert summary_of(report) == expected
        assert report.stale_summaries == reports[0].stale_summaries
    assert expected["digests_checked"] > 0


def test_the_random_databases_hold_what_the_audit_must_find(tmp_path: Path) -> None:
    """The oracle's cases happen: across the seeds, splits, wrong digests and damaged rows."""
    seen: dict[str, int] = {"group-split": 0, "wrong": 0, "damaged": 0}
    for seed in range(12):
        path = tmp_path / f"ledger-{seed}.db"
        _build(path, seed)
        _damage(path, seed)
        expected = old_report(path)
        seen["group-split"] += sum(item[2] == "group-split" for item in expected["stale"])
        seen["wrong"] += len(expected["wrong_digests"])
        seen["damaged"] += expected["turns_damaged"]
    assert all(seen.values()), seen


def test_a_split_and_a_wrong_digest_are_repaired_with_any_workers(tmp_path: Path) -> None:
    """Marking: the same summaries go stale and the same digests are repaired, whatever the
    workers (the same database built three times: its generated IDs differ); a second pass
    finds the store sound."""
    marked = []
    for workers in (1, 2, 3):
        path = tmp_path / f"ledger-{workers}.db"
        _build(path, 3)
        _damage(path, 3)
        first = revalidate_database(path, workers=workers, batch_turns=5)
        again = revalidate_database(path, workers=workers, batch_turns=5)
        assert again.stale == 0 and again.digests_wrong == 0
        stale = [(item.conversation_id, item.reason) for item in first.stale_summaries]
        wrong = [conversation_id for conversation_id, _ in first.wrong_digests]
        assert first.stale > 0 and first.digests_repaired > 0
        marked.append((stale, wrong, first.digests_repaired, first.turns_damaged))
    assert marked[0] == marked[1] == marked[2]
