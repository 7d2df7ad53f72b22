"""What the revalidation tests share: the slow Python oracle (rebuild Turns from the rows,
then `check_summary`), the native verdicts to compare with it, and tampering with summarised
turns behind the store's back."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ledgerfold import (
    Conversation,
    InvalidInput,
    SQLiteStore,
    StoreError,
    check_summary,
)
from ledgerfold import _revalidate_runs as revalidate_runs
from ledgerfold.revalidate import revalidate_database
from ledgerfold.store import _batch_reads as batch_reads
from ledgerfold.store._rows import turn_from_row

POLICY = "v1"
#: The fields of `ledgerfold.dask`'s aggregate that equal the command's report on the same
#: database (every one but `seconds`, `workers` and `partitions`).
DASK_SAME = (
    "conversations",
    "summaries_checked",
    "current",
    "stale",
    "turns_hashed",
    "bytes_hashed",
    "stale_summaries",
)


def encoded_file(path: Path, encoding: str) -> Path:
    """An empty database file whose text is `encoding` (`UTF-8`, `UTF-16le`, `UTF-16be`):
    the first table fixes it, so one is made and dropped."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA encoding = '{encoding}'")
    conn.execute("CREATE TABLE probe (x)")
    conn.execute("DROP TABLE probe")
    conn.commit()
    conn.close()
    return path


def oracle(path: Path) -> dict[str, str | None]:
    """The slow Python way: rebuild Turns from the rows (re-hashing), then check_summary."""
    verdicts: dict[str, str | None] = {}
    conn = sqlite3.connect(path)
    # Text fields by their bytes (whatever the storage class), decoded here: bytes that are
    # not UTF-8 are not a turn.
    # (the driver hands text over as UTF-8 whatever the database's encoding).
    conn.text_factory = bytes

    def text(value: object) -> object:
        return value.decode("utf-8") if isinstance(value, bytes) else value

    try:
        with SQLiteStore(path) as store:
            for conversation_id in store.conversation_ids():
                summary = store.current_summary(conversation_id)
                if summary is None:
                    continue
                rows = conn.execute(
                    "SELECT id, sequence, role, body, protected, protection_reason,"
                    " grp, meta FROM turns WHERE conversation_id = ? AND state = 0",
                    (conversation_id,),
                ).fetchall()
                turns, invalid = [], set()
                for raw_id, sequence, *fields in rows:
                    turn_id = text(raw_id)
                    protected = fields[2]
                    if not isinstance(protected, int):  # a damaged flag: not a turn
                        invalid.add(turn_id)
                        continue
                    try:
                        turns.append(turn_from_row((turn_id, sequence, *map(text, fields))))
                    # A damaged row reads back as a StoreError naming it.
                    except (
                        InvalidInput,
                        StoreError,
                        UnicodeDecodeError,
                        ValueError,
                        AttributeError,
                    ):
                        invalid.add(turn_id)
                if invalid & set(summary.source_ids):
                    verdicts[summary.id] = "source-modified"
                    continue
                check = check_summary(summary, Conversation(conversation_id, 0, turns), POLICY)
                verdicts[summary.id] = check.reason
    finally:
        conn.close()
    return verdicts


def native_verdicts(path: Path, **options: object) -> dict[str, str | None]:
    report = revalidate_database(path, mark_stale=False, **options)  # type: ignore[arg-type]
    stale = {item.summary_id: item.reason for item in report.stale_summaries}
    return {summary_id: stale.get(summary_id) for summary_id in oracle_ids(path)}


def oracle_ids(path: Path) -> Iterator[str]:
    with SQLiteStore(path) as store:
        for conversation_id in store.conversation_ids():
            summary = store.current_summary(conversation_id)
            if summary is not None:
                yield summary.id


def cited_rows(
    path: Path, count: int, seed: int, *, below_slot: bool = False
) -> list[tuple[int, str, str]]:
    """(turn pk, conversation id, summary id) of `count` random summarised turns; with
    `below_slot`, none at its summary's slot (a damaged sequence there makes the summary's
    slot no source's: a damaged record, not a damaged source)."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT t.pk, t.conversation_id, s.id FROM summary_sources AS ss"
            " JOIN summaries AS s ON s.pk = ss.summary_pk AND s.status = 'current'"
            " JOIN turns AS t ON t.conversation_id = s.conversation_id AND t.id = ss.turn_id"
            + (" WHERE t.sequence IS NOT s.through_sequence" if below_slot else "")
            + " ORDER BY t.pk"
        ).fetchall()
    finally:
        conn.close()
    picked = random.Random(seed).sample(rows, count)
    # One tamper per summary, so each expected verdict is unambiguous.
    seen: set[str] = set()
    return [row for row in picked if not (row[2] in seen or seen.add(row[2]))]


def tamper(path: Path, count: int, seed: int) -> list[tuple[int, str, str]]:
    """Change the body of `count` random summarised turns behind the store's back; returns
    their `cited_rows`."""
    targets = cited_rows(path, count, seed)
    conn = sqlite3.connect(path)
    conn.executemany("UPDATE turns SET body = 'tampered' WHERE pk = ?", [(t[0],) for t in targets])
    conn.commit()
    conn.close()
    return targets


TAMPERS = {
    "body": ("UPDATE turns SET body = body || 'x' WHERE pk = ?", "source-modified"),
    "role": (
        "UPDATE turns SET role = CASE role WHEN 'user' THEN 'assistant' ELSE 'user' END"
        " WHERE pk = ?",
        "source-modified",
    ),
    "protected": (
        "UPDATE turns SET protected = 1 - protected, protection_reason = NULL WHERE pk = ?",
        "source-modified",
    ),
    "meta": ('UPDATE turns SET meta = \'{"k": "v"}\' WHERE pk = ?', "source-modified"),
    "meta-not-json": ("UPDATE turns SET meta = '{\"k\": 1}' WHERE pk = ?", "source-modified"),
    "invalid-utf8": ("UPDATE turns SET body = X'ff00' WHERE pk = ?", "source-modified"),
    "unknown-role": ("UPDATE turns SET role = 'admin' WHERE pk = ?", "source-modified"),
    "retracted": ("UPDATE turns SET state = 1 WHERE pk = ?", "source-missing"),
    "deleted": ("DELETE FROM turns WHERE pk = ?", "source-missing"),
    "moved": ("UPDATE turns SET sequence = sequence + 1000000 WHERE pk = ?", "source-reordered"),
    "unknown-reason": (
        "UPDATE turns SET protected = 1, protection_reason = 'because' WHERE pk = ?",
        "source-modified",
    ),
    "protected-not-integer": ("UPDATE turns SET protected = 'yes' WHERE pk = ?", "source-modified"),
    "role-not-utf8": (
        "UPDATE turns SET role = CAST(X'ff' AS TEXT) WHERE pk = ?",
        "source-modified",
    ),
    "meta-not-utf8": (
        "UPDATE turns SET meta = CAST(X'7bff' AS TEXT) WHERE pk = ?",
        "source-modified",
    ),
}


def _current_jobs(path: Path) -> list[tuple[str, int, str, str, int, int | None]]:
    conn = batch_reads.open_readonly(str(path))
    try:
        return revalidate_runs.current_jobs(conn)
    finally:
        conn.close()


ROW = ("c", "a", 1, "user", b"hi", 0, None, None, None)
SUMMARY = ("c", 1, "s", "lf1:" + "0" * 64)
