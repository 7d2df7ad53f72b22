"""Deep revalidation of a whole database: every source body of every current summary re-hashed.

The database: the 244 real transcripts (with their tool-call meta and groups) repeated under
unique conversation IDs, plus one long conversation (5% of the turns) made of all of them
concatenated, to 1M turns under `make bench` (10k in smoke mode); every conversation then
compacted once (`start_plan` + `create_summary_envelope` + `commit_summary`, fixed text).
It is built once per session in a temporary directory (about two minutes at 1M turns).

Anchors in the same run: the hand-written `sqlite3` + blake3 script (for every current
summary, read its sources in position order, rebuild the SPEC §3 encoding with `struct`,
derive-key hash it, fingerprint, compare), raw BLAKE3 over the same source bodies in one
stream (the physical limit), and `workers=1` for the `workers=2` run. The script and
`workers=1` are timed in turn with ours (one call of each before every round of ours), so a
drift in the shared machine's speed hits both sides of a ratio alike. Peak RSS is measured
in a child process.

Targets: `revalidate_database` >= 2x the hand-written script with one worker (one core, as
the script) and with two; `workers=2` >= 1.6x faster than `workers=1`; peak RSS <= 2x the
largest conversation's bytes + a fixed allowance (the RSS of the same child stopped just
before revalidating, plus 64 MiB).
"""

from __future__ import annotations

import importlib
import json
import sqlite3
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import pytest
from bench_conftest import SHARED, anchor_seconds, full_size, interleaved, record_ratio, target

from ledgerfold import SQLiteStore, create_summary_envelope
from ledgerfold._transcripts import load_transcripts

revalidate = importlib.import_module("ledgerfold.revalidate")

POLICY = "bench-v1"
KEEP_TAIL = 4
LONG_SHARE = 0.05
ALLOWANCE_BYTES = 64 * 1024 * 1024

# ------------------------------------------------------------------ the database


@dataclass(frozen=True)
class Database:
    path: Path
    turns: int
    conversations: int
    summaries: int  # current summaries: one per conversation with anything to compact
    largest_conversation_bytes: int  # body + meta bytes of the largest conversation
    build_seconds: float


def _fast_build(store: SQLiteStore) -> None:
    """Setup only: no fsync per append while building (the benchmarks never write)."""
    conn = store._connection()
    if isinstance(conn, sqlite3.Connection):
        conn.execute("PRAGMA synchronous = OFF")


def _spec(turn: Any, suffix: str) -> dict[str, Any]:
    return {
        "id": f"{turn.id}{suffix}",
        "role": turn.role,
        "body": turn.body,
        "group": None if turn.group is None else f"{turn.group}{suffix}",
        "meta": turn.meta,
    }


def _conversation_bytes(specs: list[dict[str, Any]]) -> int:
    meta_bytes = sum(
        len(json.dumps(s["meta"], ensure_ascii=False).encode()) for s in specs if s["meta"]
    )
    return sum(len(s["body"].encode()) for s in specs) + meta_bytes


def build_database(path: Path, total_turns: int) -> Database:
    started = time.perf_counter()
    transcripts = load_transcripts(SHARED / "transcripts")
    every_turn = [(t, n) for t in transcripts for n in range(len(t.turns))]
    long_turns = int(total_turns * LONG_SHARE)
    conversations: list[tuple[str, list[dict[str, Any]]]] = []
    # The long conversation: every transcript concatenated, repeated; IDs and groups made
    # unique by the repeat number, sequences assigned by the store.
    long_specs = []
    for index in range(long_turns):
        transcript, n = every_turn[index % len(every_turn)]
        long_specs.append(_spec(transcript.turns[n], f"~{index // len(every_turn)}"))
    conversations.append(("long", long_specs))
    written = long_turns
    repeat = 0
    while written < total_turns:  # whole transcripts: the last one may overshoot a little
        for transcript in transcripts:
            if written >= total_turns:
                break
            specs = [_spec(turn, "") for turn in transcript.turns]
            conversations.append((f"{transcript.conversation_id}#{repeat}", specs))
            written += len(specs)
        repeat += 1
    largest = max(_conversation_bytes(specs) for _, specs in conversations)

    summaries = 0
    with SQLiteStore(path) as store:
        _fast_build(store)
        for number, (conversation_id, specs) in enumerate(conversations):
            turns = []
            for start in range(0, len(specs), 50_000):
                turns += store.append_many(conversation_id, specs[start : start + 50_000])
            plan = store.start_plan(conversation_id, KEEP_TAIL, POLICY, plan_id=f"plan-{number}")
            # The appended Turns are the ledger: no need to load it back.
            envelope = create_summary_envelope(plan, turns, f"summary-{number}", POLICY, "summary")
            if envelope is None:  # nothing compactable (tail, protected or grouped with it)
                continue
            assert store.commit_summary(envelope).accepted
            summaries += 1
    return Database(
        path, written, len(conversations), summaries, largest, time.perf_counter() - started
    )


@pytest.fixture(scope="module")
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Database:
    total = 1_000_000 if full_size(request.config) else 10_000
    return build_database(tmp_path_factory.mktemp("revalidate") / "ledger.db", total)


# ------------------------------------------------------------------ the anchors

ROLE_CODES = {"system": 1, "user": 2, "assistant": 3, "tool": 4}
REASON_CODES = {
    None: 0,
    "pending-confirmation": 1,
    "active-constraint": 2,
    "audit-evidence": 3,
    "unverified-provenance": 4,
}
_SUMMARIES = (
    "SELECT c.id, s.pk, s.source_fingerprint, s.source_count FROM conversations AS c"
    " JOIN summaries AS s ON s.pk = c.current_summary WHERE s.status = 'current'"
)
_SOURCE_ROWS = (
    "SELECT t.id, t.sequence, t.role, t.body, t.protected, t.protection_reason, t.grp, t.meta"
    " FROM summary_sources AS s JOIN turns AS t ON t.conversation_id = ? AND t.id = s.turn_id"
    " WHERE s.summary_pk = ? AND t.state = 0 ORDER BY s.position"
)


def _lp(raw: bytes) -> bytes:
    return struct.pack("<Q", len(raw)) + raw


def encode_row(row: tuple[Any, ...]) -> bytes:
    """SPEC §3 from a `turns` row: meta from its JSON column, entries sorted by key bytes."""
    turn_id, sequence, role, body, protected, reason, group, meta = row
    entries = sorted(
        (key.encode(), value.encode()) for key, value in (json.loads(meta) if meta else {}).items()
    )
    parts = [
        _lp(turn_id.encode()),
        struct.pack("<qBBB", sequence, ROLE_CODES[role], protected, REASON_CODES[reason]),
        _lp((group or "").encode()),
        struct.pack("<Q", len(entries)),
    ]
    for key, value in entries:
        parts.append(_lp(key))
        parts.append(_lp(value))
    parts.append(_lp(body.encode()))
    return b"".join(parts)


def hand_written_revalidate(path: Path) -> tuple[int, int]:
    """The hand-written `sqlite3` + blake3 script: (summaries checked, stale found)."""
    conn = sqlite3.connect(path)
    checked = stale = 0
    try:
        for conversation_id, summary_pk, fingerprint, source_count in conn.execute(
            _SUMMARIES
        ).fetchall():
            digests = [
                blake3.blake3(encode_row(row), derive_key_context="ledgerfold v1 turn").digest()
                for row in conn.execute(_SOURCE_ROWS, (conversation_id, summary_pk))
            ]
            material = struct.pack("<Q", len(digests)) + b"".join(digests)
            found = blake3.blake3(material, derive_key_context="ledgerfold v1 fingerprint")
            checked += 1
            if len(digests) != source_count or "lf1:" + found.hexdigest() != fingerprint:
                stale += 1
    finally:
        conn.close()
    return checked, stale


def source_bodies(path: Path) -> bytes:
    """Every source body of every current summary, as one byte string."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT CAST(t.body AS BLOB) FROM conversations AS c"
            " JOIN summary_sources AS s ON s.summary_pk = c.current_summary"
            " JOIN turns AS t ON t.conversation_id = c.id AND t.id = s.turn_id"
        )
        return b"".join(row[0] for row in rows)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def anchors(database: Database, request: pytest.FixtureRequest) -> dict[str, float]:
    """The raw BLAKE3 anchors, measured once in this run and shared by the benchmarks of this
    module (the script's answer is checked here; it is timed beside each benchmark)."""
    config = request.config
    checked, stale = hand_written_revalidate(database.path)
    assert (checked, stale) == (database.summaries, 0)
    stream = source_bodies(database.path)
    return {
        "raw_blake3_one_stream_of_bodies": anchor_seconds(
            config, lambda: blake3.blake3(stream).digest(), rounds=3
        ),
        "raw_blake3_one_stream_of_bodies_all_cores": anchor_seconds(
            config,
            lambda: blake3.blake3(stream, max_threads=blake3.blake3.AUTO).digest(),
            rounds=3,
        ),
        "source_body_bytes": float(len(stream)),
    }


# ------------------------------------------------------------------ the benchmarks


@pytest.mark.parametrize("workers", [1, 2], ids=["workers=1", "workers=2"])
def test_revalidate_database(
    benchmark: Any,
    database: Database,
    anchors: dict[str, float],
    workers: int,
    request: pytest.FixtureRequest,
) -> None:
    """The ratios to the script and, for `workers=2`, to `workers=1` come from anchors timed in
    turn with ours: one call of each before every round of ours, so a drift in the shared
    machine's speed over the minute a round takes hits both sides alike."""
    config = request.config
    path = database.path
    timed_in_turn: dict[str, Callable[[], object]] = {
        "hand_written_sqlite3_blake3": lambda: hand_written_revalidate(path)
    }
    if workers > 1:
        timed_in_turn["workers_1"] = lambda: revalidate.revalidate_database(path, workers=1)
    report = interleaved(
        benchmark,
        config,
        lambda: revalidate.revalidate_database(path, workers=workers),
        timed_in_turn,
        rounds=3,
    )
    assert report.summaries_checked == report.current == database.summaries
    assert report.stale == 0
    benchmark.extra_info.update(
        turns=database.turns,
        conversations=database.conversations,
        summaries=database.summaries,
        turns_hashed=report.turns_hashed,
        bytes_hashed=report.bytes_hashed,
        source_body_bytes=int(anchors["source_body_bytes"]),
        build_s=round(database.build_seconds, 1),
    )
    for name in ("raw_blake3_one_stream_of_bodies", "raw_blake3_one_stream_of_bodies_all_cores"):
        record_ratio(benchmark, name, anchors[name])
    target(benchmark, "hand_written_sqlite3_blake3", min_speedup=2)
    if workers > 1:
        target(benchmark, "workers_1", min_speedup=1.6)


_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from ledgerfold import SQLiteStore
    from ledgerfold.revalidate import revalidate_database

    def high_water_mark():
        # VmHWM belongs to this process's own address space; ru_maxrss would also carry
        # the RSS of the forked pytest process this interpreter was exec'd from.
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    path, workers, run = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "run"
    with SQLiteStore(path) as store:
        store.conversation_ids()
    checked = revalidate_database(path, workers=workers).summaries_checked if run else 0
    # Workers are threads of this process: its high-water mark holds them all.
    print(json.dumps({"self": high_water_mark(), "checked": checked}))
    """
)


def child_peak_rss(path: Path, workers: int, *, run: bool) -> dict[str, int]:
    """Peak RSS (bytes) of a fresh interpreter revalidating `path` with `workers` threads (or
    stopping just before). The child measures itself, so neither this pytest process nor
    the processes it started earlier count."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(workers), "run" if run else "idle"],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, int] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("workers", [1, 2], ids=["workers=1", "workers=2"])
def test_revalidate_peak_rss(
    benchmark: Any, database: Database, workers: int, request: pytest.FixtureRequest
) -> None:
    """Wall time of a child process revalidating the database; its peak RSS in extra_info.

    With `workers=2` both workers' batches are in the one process: the bound covers two of
    the largest conversation, which is what two workers can hold at once."""
    idle = child_peak_rss(database.path, workers, run=False)
    peak = benchmark.pedantic(
        child_peak_rss, args=(database.path, workers), kwargs={"run": True}, rounds=1
    )
    assert peak["checked"] == database.summaries
    limit = 2 * database.largest_conversation_bytes + idle["self"] + ALLOWANCE_BYTES
    benchmark.extra_info.update(
        peak_rss_bytes=peak["self"],
        idle_child_rss_bytes=idle["self"],
        largest_conversation_bytes=database.largest_conversation_bytes,
        rss_limit_bytes=limit,
    )
    target(benchmark, "peak_rss_bytes", max_value=limit)
