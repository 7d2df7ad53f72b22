"""The shared source index (schema v4, SPEC §15.8 cost), inside the caller's transaction.

A *source run* is an append-only list of `(position, turn_id, turn_digest)` rows in
`run_sources`. A version uses the first `source_count` rows of its run (`summaries.source_run`);
the `summary_sources` view reads exactly those, so readers see every version's sources as
before. A version extending the head of its parent's run appends only its new sources, so a
rolling compaction writes O(new sources) rows however much the lineage covers; a rebase
starts a new run. Deleting versions deletes run rows only when no remaining version reads
them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

__all__ = [
    "adopt",
    "append",
    "delete_conversation_runs",
    "extension_run",
    "new_run",
    "release",
    "runs_of",
]


def new_run(conn: sqlite3.Connection, conversation_id: str) -> int:
    """A new, empty run (its pk is never one a deleted run had: AUTOINCREMENT)."""
    pk = conn.execute(
        "INSERT INTO source_runs (conversation_id) VALUES (?)", (conversation_id,)
    ).lastrowid
    assert pk is not None
    return pk


def append(
    conn: sqlite3.Connection, run_pk: int, start: int, rows: Sequence[tuple[str, bytes]]
) -> None:
    """Write `(turn_id, turn_digest)` rows at positions `start`, `start + 1`, ..."""
    conn.executemany(
        "INSERT INTO run_sources (run_pk, position, turn_id, turn_digest) VALUES (?, ?, ?, ?)",
        [(run_pk, start + i, turn_id, digest) for i, (turn_id, digest) in enumerate(rows)],
    )


def extension_run(conn: sqlite3.Connection, conversation_id: str, parent_pk: int) -> int:
    """The run a version extending `parent_pk` appends to: the parent's own when the parent
    is its head (the usual case: only the current version is extended), else a new run
    holding a copy of the parent's rows, so no other version's sources change."""
    run_pk, count = conn.execute(
        "SELECT source_run, source_count FROM summaries WHERE pk = ?", (parent_pk,)
    ).fetchone()
    if run_pk is not None:
        end = conn.execute(
            "SELECT MAX(position) FROM run_sources WHERE run_pk = ?", (run_pk,)
        ).fetchone()[0]
        if (-1 if end is None else end) + 1 == count:
            return int(run_pk)
    copy = new_run(conn, conversation_id)
    conn.execute(
        "INSERT INTO run_sources (run_pk, position, turn_id, turn_digest)"
        " SELECT ?, position, turn_id, turn_digest FROM run_sources"
        " WHERE run_pk = ? AND position < ?",
        (copy, run_pk, count),
    )
    return copy


def adopt(conn: sqlite3.Connection, parent_pk: int, run_pk: int) -> None:
    """A version extending `parent_pk` was written in a new run `run_pk` whose first rows
    are the parent's (a rebuild from a checkpoint, SPEC §17.5): the parent and the versions
    reading a shorter prefix of its run before it (its ancestors there) move into the new
    run, when its rows are theirs, so the lineage stays one run. Otherwise every rebuild
    left a crossing between runs that pruning must keep with both ends (`links`), and those
    piled up with each edit, each holding its own copy of the index. O(parent's sources),
    as the write was; the old run keeps its rows while another version reads them."""
    row = conn.execute(
        "SELECT source_run, source_count FROM summaries WHERE pk = ?", (parent_pk,)
    ).fetchone()
    if row is None or row[0] is None or row[0] == run_pk:
        return
    old, count = int(row[0]), int(row[1] or 0)
    differs = conn.execute(
        "SELECT 1 FROM run_sources a LEFT JOIN run_sources b ON b.run_pk = ?"
        " AND b.position = a.position WHERE a.run_pk = ? AND a.position < ?"
        " AND (b.turn_id IS NOT a.turn_id OR b.turn_digest IS NOT a.turn_digest) LIMIT 1",
        (run_pk, old, count),
    ).fetchone()
    if differs is not None:
        return
    conn.execute(
        "UPDATE summaries SET source_run = ? WHERE source_run = ? AND pk <= ?"
        " AND source_count <= ?",
        (run_pk, old, parent_pk, count),
    )
    release(conn, [old])


def runs_of(conn: sqlite3.Connection, summary_pks: Sequence[int]) -> set[int]:
    """The runs these versions read (call before deleting them, then `release`)."""
    runs: set[int] = set()
    for start in range(0, len(summary_pks), 500):
        chunk = summary_pks[start : start + 500]
        marks = ",".join("?" * len(chunk))
        runs.update(
            row[0]
            for row in conn.execute(
                f"SELECT DISTINCT source_run FROM summaries WHERE pk IN ({marks})"
                " AND source_run IS NOT NULL",
                chunk,
            )
        )
    return runs


def release(conn: sqlite3.Connection, runs: Iterable[int]) -> None:
    """After versions were deleted: drop each run no remaining version reads, and the rows
    of the others beyond the longest remaining prefix."""
    for run_pk in sorted(runs):
        longest = conn.execute(
            "SELECT MAX(source_count) FROM summaries WHERE source_run = ?", (run_pk,)
        ).fetchone()[0]
        if longest is None:
            conn.execute("DELETE FROM run_sources WHERE run_pk = ?", (run_pk,))
            conn.execute("DELETE FROM source_runs WHERE pk = ?", (run_pk,))
        else:
            conn.execute(
                "DELETE FROM run_sources WHERE run_pk = ? AND position >= ?", (run_pk, longest)
            )


def delete_conversation_runs(conn: sqlite3.Connection, conversation_id: str) -> None:
    """Every run of the conversation, once its versions are deleted."""
    conn.execute(
        "DELETE FROM run_sources WHERE run_pk IN"
        " (SELECT pk FROM source_runs WHERE conversation_id = ?)",
        (conversation_id,),
    )
    conn.execute("DELETE FROM source_runs WHERE conversation_id = ?", (conversation_id,))
