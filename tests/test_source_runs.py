"""The shared source index (schema v4, SPEC §15.8 cost): a rolling version appends its new
sources to its parent's run instead of copying the parent's, pruning and erasure delete only
rows no remaining version reads, and every version still reads exactly its own sources."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import ledgerfold as lf
from ledgerfold._summary import extended_fingerprint
from ledgerfold.revalidate import revalidate_database

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from source_index import check_source_index  # noqa: E402


def neutral(request: lf.SummaryRequest) -> str:
    return f"summary of {len(request.turns)} turns"


def policy(**settings: Any) -> lf.CompactionPolicy:
    return lf.CompactionPolicy("p", **{"keep_tail": 4, "min_new_turns": 1, **settings})


def add(store: lf.SQLiteStore, n: int, conversation: str = "c") -> None:
    store.append_many(
        conversation,
        [{"role": "user" if i % 2 == 0 else "assistant", "body": f"turn {i}"} for i in range(n)],
    )


def count(store: lf.SQLiteStore, query: str, *args: Any) -> int:
    return int(store._connection().execute(query, args).fetchone()[0])


def each_version_reads_its_own_sources(store: lf.SQLiteStore, conversation: str = "c") -> None:
    """Every remaining version's stored sources are its envelope's; the current one checks
    current on the ledger and the database revalidates clean."""
    check_source_index(store._connection())
    for record in store.summary_history(conversation):
        if record.envelope is not None and record.status != "rejected":
            ids = [turn.id for turn in store.sources_of(record.envelope.id)]
            assert tuple(ids) == record.envelope.source_ids
    current = store.current_summary(conversation)
    assert current is not None
    assert lf.check_summary(current, store.load(conversation), "p").current


def test_rolling_versions_write_each_source_once(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "db") as store:
        compactor = lf.Compactor(store, policy(keep_versions=None), neutral)
        add(store, 40)
        versions = []
        for _ in range(6):
            outcome = compactor.compact("c")
            assert outcome.status == "accepted" and outcome.summary is not None
            versions.append(outcome.summary)
            add(store, 10)
        assert all(v.parent_id is not None for v in versions[1:])  # one rolling lineage
        covered = len(versions[-1].source_ids)
        # One run holding each covered turn once, not a copy per version...
        assert count(store, "SELECT COUNT(*) FROM source_runs") == 1
        assert count(store, "SELECT COUNT(*) FROM run_sources") == covered
        # ...while every version still reads its own sources.
        assert count(store, "SELECT COUNT(*) FROM summary_sources") == sum(
            len(v.source_ids) for v in versions
        )
        each_version_reads_its_own_sources(store)
        assert store.summaries_citing("c", versions[-1].source_ids[-1]) == [versions[-1].id]
        assert store.summaries_citing("c", versions[0].source_ids[0]) == [v.id for v in versions]


def test_pruning_keeps_the_lineage_rows_and_a_rebase_releases_the_old_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db"
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(store, policy(keep_versions=1), neutral)
        add(store, 40)
        for _ in range(5):
            assert compactor.compact("c").status == "accepted"
            add(store, 10)
            current = store.current_summary("c")
            assert current is not None
            # Pruned ancestors share the current version's run: none of its rows went.
            assert count(store, "SELECT COUNT(*) FROM run_sources") == len(current.source_ids)
            each_version_reads_its_own_sources(store)
        old_run = count(store, "SELECT MAX(pk) FROM source_runs")
        # A longer tail shrinks coverage: a rebase starts a new run; once the versions of
        # the old one are pruned, its rows go.
        rebased = lf.Compactor(store, policy(keep_versions=0, keep_tail=30), neutral)
        outcome = rebased.compact("c")
        assert outcome.status == "accepted" and outcome.summary is not None
        assert outcome.summary.parent_id is None
        assert count(store, "SELECT COUNT(*) FROM source_runs WHERE pk = ?", old_run) == 0
        assert count(store, "SELECT COUNT(*) FROM run_sources") == len(outcome.summary.source_ids)
        each_version_reads_its_own_sources(store)
    report = revalidate_database(path, workers=1)
    assert report.current == 1 and report.stale == 0


def test_an_edit_marks_exactly_the_versions_whose_prefix_holds_the_turn(tmp_path: Path) -> None:
    with lf.SQLiteStore(tmp_path / "db") as store:
        compactor = lf.Compactor(store, policy(keep_versions=None), neutral)
        add(store, 20)
        first = compactor.compact("c").summary
        add(store, 10)
        second = compactor.compact("c").summary
        assert first is not None and second is not None and second.parent_id == first.id
        only_second = second.source_ids[-1]
        store.edit("c", only_second, body="changed")
        statuses = {r.envelope.id: r.status for r in store.summary_history("c") if r.envelope}
        assert statuses == {first.id: "superseded", second.id: "stale"}
        store.edit("c", first.source_ids[0], body="changed too")
        statuses = {r.envelope.id: r.status for r in store.summary_history("c") if r.envelope}
        assert statuses == {first.id: "stale", second.id: "stale"}


def test_extending_a_version_that_is_not_its_runs_head_copies_its_rows(tmp_path: Path) -> None:
    """Only the current version is extended, and it heads its run; should an older one ever
    be current again, extending it must not touch the rows a later version reads."""
    with lf.SQLiteStore(tmp_path / "db") as store:
        compactor = lf.Compactor(store, policy(keep_versions=None), neutral)
        add(store, 20)
        parent = compactor.compact("c").summary
        add(store, 10)
        child = compactor.compact("c").summary
        assert parent is not None and child is not None and child.parent_id == parent.id
        conn = store._connection()
        conn.execute("UPDATE summaries SET status = 'superseded' WHERE id = ?", (child.id,))
        conn.execute("UPDATE summaries SET status = 'current' WHERE id = ?", (parent.id,))
        conn.execute(
            "UPDATE conversations SET current_summary = (SELECT pk FROM summaries WHERE id = ?)",
            (parent.id,),
        )
        add(store, 10)
        sibling = compactor.compact("c").summary
        assert sibling is not None and sibling.parent_id == parent.id
        assert count(store, "SELECT COUNT(DISTINCT source_run) FROM summaries") == 2
        for envelope in (parent, child, sibling):
            ids = tuple(turn.id for turn in store.sources_of(envelope.id))
            assert ids == envelope.source_ids
        check_source_index(conn)


def test_run_ids_are_never_reused(tmp_path: Path) -> None:
    """SQLite reuses the rowid of a deleted newest row; a run's pk must not be, so rows of a
    deleted run can never be read as another's."""
    with lf.SQLiteStore(tmp_path / "db") as store:
        compactor = lf.Compactor(store, policy(), neutral)
        add(store, 20, "old")
        assert compactor.compact("old").status == "accepted"
        deleted = count(store, "SELECT MAX(pk) FROM source_runs")
        store.delete_conversation("old")
        assert count(store, "SELECT COUNT(*) FROM source_runs") == 0
        assert count(store, "SELECT COUNT(*) FROM run_sources") == 0
        add(store, 20, "new")
        assert compactor.compact("new").status == "accepted"
        assert count(store, "SELECT MAX(pk) FROM source_runs") > deleted
        each_version_reads_its_own_sources(store, "new")


def test_purge_erases_the_other_versions_but_keeps_the_sealed_lineage(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(store, policy(keep_versions=None), neutral)
        add(store, 20)
        for _ in range(3):
            assert compactor.compact("c").status == "accepted"
            add(store, 10)
        sealed = store.current_summary("c")
        assert sealed is not None
        store.purge_through("c", 10, "retention")
        assert [r.envelope.id for r in store.summary_history("c") if r.envelope] == [sealed.id]
        assert count(store, "SELECT COUNT(*) FROM run_sources") == len(sealed.source_ids)
        check_source_index(store._connection())
        assert compactor.compact("c").status == "accepted"  # rolls on from the sealed one
        rolled = store.current_summary("c")
        assert rolled is not None and rolled.parent_id == sealed.id
        assert count(store, "SELECT COUNT(*) FROM source_runs") == 1
        check_source_index(store._connection())
    report = revalidate_database(path, workers=1)
    assert report.current == 1 and report.stale == 0


def test_a_v3_database_keeps_each_versions_sources(tmp_path: Path) -> None:
    """Each v3 version had its own full copy of its sources: after the upgrade each reads
    its own run, the current one rolls on by appending, and pruning keeps it intact."""
    from ledgerfold.store._schema import APPLICATION_ID, MIGRATIONS

    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version, name, ddl in MIGRATIONS[:3]:
        conn.executescript(ddl)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01')", (version, name))
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 3")
    turns = [lf.Turn(f"t{i}", i + 1, "user", f"body {i}") for i in range(30)]
    conn.execute("INSERT INTO conversations (id, revision, last_sequence) VALUES ('c', 30, 30)")
    for turn in turns:
        conn.execute(
            "INSERT INTO turns (conversation_id, id, sequence, role, body, protected, digest)"
            " VALUES ('c', ?, ?, 'user', ?, 0, ?)",
            (turn.id, turn.sequence, turn.body, turn.digest),
        )
    versions = (("p1", 10, "superseded", None), ("p2", 20, "current", "s1"))
    for plan, count_, status, parent in versions:
        conn.execute(
            "INSERT INTO plans (id, conversation_id, policy_version, source_revision,"
            " through_sequence, compacted_count, created_at, ended, preserve_roles)"
            " VALUES (?, 'c', 'p', 30, ?, ?, '2026-01-01', 1, '[\"system\"]')",
            (plan, count_, count_),
        )
        pk = conn.execute(
            "INSERT INTO summaries (id, conversation_id, plan_id, status, created_at,"
            " source_revision, source_fingerprint, policy_version, text, source_count,"
            " through_sequence, parent_id) VALUES (?, 'c', ?, ?, '2026-01-01', 30, ?, 'p',"
            " 'text', ?, ?, ?)",
            (
                "s" + plan[1],
                plan,
                status,
                lf.fingerprint_turns(turns[:count_]),
                count_,
                count_,
                parent,
            ),
        ).lastrowid
        for position, turn in enumerate(turns[:count_]):
            conn.execute(
                "INSERT INTO summary_sources VALUES (?, ?, ?, ?)",
                (pk, position, turn.id, turn.digest),
            )
    conn.execute(  # a rejected result: no index rows, so no run
        "INSERT INTO summaries (id, conversation_id, plan_id, status, created_at,"
        " source_count, rejected_source_ids) VALUES ('r1', 'c', 'p2', 'rejected', '2026-01-01',"
        " 1, '[\"t0\"]')"
    )
    conn.execute("UPDATE conversations SET current_summary = ?", (pk,))
    conn.close()
    with lf.SQLiteStore(path) as store:
        assert [t.id for t in store.sources_of("s1")] == [t.id for t in turns[:10]]
        assert [t.id for t in store.sources_of("s2")] == [t.id for t in turns[:20]]
        check_source_index(store._connection())
        assert count(store, "SELECT COUNT(*) FROM run_sources") == 30  # the v3 rows, as they were
        # keep_checkpoints=0: s1 is pruned, not kept as a checkpoint (SPEC §17.5).
        pruning = policy(keep_versions=0, keep_checkpoints=0)
        outcome = lf.Compactor(store, pruning, neutral).compact("c")
        assert outcome.summary is not None and outcome.summary.parent_id == "s2"
        # Appended to s2's run (pk: s2's row); s1's run went with s1 (pruned).
        assert count(
            store, "SELECT source_run FROM summaries WHERE id = ?", outcome.summary.id
        ) == int(pk)
        assert count(store, "SELECT COUNT(*) FROM run_sources") == 26
        each_version_reads_its_own_sources(store)


def test_a_long_parent_digest_list_fingerprints_as_the_turns_do() -> None:
    """The parent's digests are hashed in one update (many BLAKE3 chunks at once): the same
    fingerprint as the turns themselves, at every split between parent and new turns."""
    turns = [lf.Turn(f"t{i}", i + 1, "user", f"body {i}") for i in range(3_000)]
    expected = lf.fingerprint_turns(turns)
    for split in (0, 1, 31, 32, 33, 1_024, 2_999, 3_000):
        parent = b"".join(turn.digest for turn in turns[:split])
        assert extended_fingerprint(parent, turns[split:]) == expected, split
    # The same parent object with other new turns is hashed again, not taken from the last.
    parent = b"".join(turn.digest for turn in turns[:2_000])
    assert extended_fingerprint(parent, turns[2_000:]) == expected
    shorter = turns[2_000:2_500]
    assert extended_fingerprint(parent, shorter) == lf.fingerprint_turns(turns[:2_500])


def test_starts_with_ids_compares_text_when_the_objects_differ() -> None:
    from ledgerfold import _native

    parent = tuple(f"t{i}" for i in range(1_000))
    assert _native.starts_with_ids((*parent, "n1"), parent)  # the very objects
    copies = tuple("".join(["t", str(i)]) for i in range(1_000))  # equal, other objects
    assert copies[5] is not parent[5] and _native.starts_with_ids((*copies, "n1"), parent)
    changed = (*parent[:500], "other", *parent[501:])
    assert not _native.starts_with_ids((*changed, "n1"), parent)
    assert not _native.starts_with_ids(parent[:-1], parent)  # shorter than the prefix
    assert _native.starts_with_ids(parent, ()) and _native.starts_with_ids((), ())
