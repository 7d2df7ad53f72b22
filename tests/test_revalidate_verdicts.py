"""Deep batch revalidation (`revalidate_database`, native, streamed from SQLite) gives the
verdicts of the slow Python path (rebuild Turns, `check_summary`): it re-hashes bodies and
never trusts stored digests, finds every kind of tampering behind the store's back, marks
stale summaries so that contexts fall back, and refuses bad arguments."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from ledgerfold import InvalidInput, SQLiteStore, StoreError
from ledgerfold.revalidate import revalidate_database

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))


from revalidate_support import POLICY, TAMPERS, cited_rows, native_verdicts, oracle, tamper  # noqa: E402


def test_all_current_and_counts(db: Path) -> None:
    report = revalidate_database(db)
    with SQLiteStore(db) as store:
        conversations = store.conversation_ids()
        summaries = [store.current_summary(c) for c in conversations]
    expected = [s for s in summaries if s is not None]
    assert report.conversations == len(conversations) == 244
    assert report.summaries_checked == len(expected) > 200
    assert (report.current, report.stale) == (len(expected), 0)
    assert report.turns_hashed == sum(len(s.source_ids) for s in expected)
    conn = sqlite3.connect(db)
    try:
        (bytes_cited,) = conn.execute(
            "SELECT SUM(LENGTH(CAST(t.body AS BLOB))) FROM summary_sources AS ss"
            " JOIN summaries AS s ON s.pk = ss.summary_pk AND s.status = 'current'"
            " JOIN turns AS t ON t.conversation_id = s.conversation_id AND t.id = ss.turn_id"
        ).fetchone()
    finally:
        conn.close()
    assert report.bytes_hashed == bytes_cited


@pytest.mark.parametrize("kind", sorted(TAMPERS))
def test_tampering_behind_the_stores_back_is_found(db: Path, kind: str) -> None:
    statement, expected = TAMPERS[kind]
    targets = cited_rows(db, 12, seed=len(kind))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    for pk, _, _ in targets:
        conn.execute(statement, (pk,))
    conn.commit()
    conn.close()
    verdicts = native_verdicts(db)
    tampered = {summary_id for _, _, summary_id in targets}
    for summary_id, reason in verdicts.items():
        if summary_id in tampered:
            # Moving the last source past the tail keeps the order: then only the sequence
            # (an encoded field) changed.
            allowed = {expected, "source-modified"} if kind == "moved" else {expected}
            assert reason in allowed, (kind, summary_id, reason)
        else:
            assert reason is None, (kind, summary_id, reason)
    assert verdicts == oracle(db)


def test_meta_key_order_in_the_json_does_not_matter(db: Path) -> None:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT pk, meta FROM turns WHERE meta IS NOT NULL").fetchall()
    for pk, meta in rows:
        reordered = dict(reversed(list(json.loads(meta).items())))
        conn.execute(
            "UPDATE turns SET meta = ? WHERE pk = ?", (json.dumps(reordered, indent=1), pk)
        )
    conn.commit()
    conn.close()
    assert len(rows) > 1000
    assert set(native_verdicts(db).values()) == {None}


def test_stale_summaries_are_marked_and_contexts_fall_back(db: Path) -> None:
    ((_, conversation_id, summary_id),) = tamper(db, 1, seed=3)
    with SQLiteStore(db) as store:
        # The per-call path trusts stored digests and eager invalidation; only deep
        # revalidation can see a change made behind the store's back.
        assert store.context(conversation_id, POLICY).fallback is None
    report = revalidate_database(db)
    assert [(s.conversation_id, s.summary_id, s.reason) for s in report.stale_summaries] == [
        (conversation_id, summary_id, "source-modified")
    ]
    with SQLiteStore(db) as store:
        assert store.current_summary(conversation_id) is None
        assert store.context(conversation_id, POLICY).fallback == "stale-summary:source-modified"
        statuses = {
            r.envelope.id: (r.status, r.reason)
            for r in store.summary_history(conversation_id)
            if r.envelope
        }
        assert statuses[summary_id] == ("stale", "source-modified")
    again = revalidate_database(db)
    assert again.stale == 0 and again.summaries_checked == report.summaries_checked - 1


def test_bad_arguments(db: Path, tmp_path: Path) -> None:
    for options, field in (
        ({"workers": 0}, "workers"),
        ({"workers": True}, "workers"),
        ({"batch_turns": 0}, "batch_turns"),
        ({"threads": 0}, "threads"),
    ):
        with pytest.raises(InvalidInput) as caught:
            revalidate_database(db, **options)  # type: ignore[arg-type]
        assert caught.value.field == field
    with pytest.raises(InvalidInput):
        revalidate_database(42)  # type: ignore[arg-type]
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError):
        revalidate_database(foreign)
