"""A read-only open of a file last written by a ledgerfold before the indexes of
`_schema.ADDED_INDEXES` (every writing open creates them when missing; a read-only open
cannot): every read answers as it does with the indexes (they only make reads faster), the
open writes nothing, and it says once in the log which are missing and how to get them
(docs/threading.md). Real files; the indexes dropped by another connection."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold.store._schema import ADDED_INDEXES

POLICY = lf.CompactionPolicy("ro-v1", keep_tail=4, min_new_turns=1)


def _calls(*ids: str) -> dict[str, str]:
    made = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return {"tool_calls": json.dumps(made)}


def _write(path: Path) -> None:
    """Two conversations with turns making one call, several, and more than the indexed
    positions; answers in and out of order; a summary, a retraction and a purge."""
    with lf.SQLiteStore(path) as store:
        for cid in ("a", "b"):
            store.append(cid, "system", "be brief", id="s")
            for n in range(12):
                many = [f"{cid}{n}c{k}" for k in range(1 if n % 3 == 0 else 3 if n % 3 else 11)]
                store.append(cid, "user", f"ask {n} about pelicans", id=f"u{n}")
                store.append(cid, "assistant", "", id=f"m{n}", meta=_calls(*many))
                for k, call in enumerate(reversed(many)):
                    store.append(
                        cid,
                        "tool",
                        f"result {k} of {n}",
                        id=f"r{n}-{k}",
                        meta={"tool_call_id": call},
                    )
            store.append(cid, "assistant", "", id="open", meta=_calls(f"{cid}-open"))
            store.append(cid, "user", "and then?", id="last")
            assert lf.Compactor(store, POLICY).compact(cid).accepted
        store.retract("a", "u11")
        store.purge_through("b", 10, "retention")
        assert lf.Compactor(store, POLICY).compact("b").status in ("accepted", "skipped")


def _reads(path: Path) -> dict[str, Any]:
    with lf.SQLiteStore(path, read_only=True) as store:
        out: dict[str, Any] = {"ids": store.conversation_ids(), "stats": store.stats().as_dict()}
        for cid in out["ids"]:
            summary = store.current_summary(cid)
            out[cid] = (
                store.load(cid),
                store.context(cid, POLICY.version),
                summary,
                [(r.status, r.reason, r.envelope) for r in store.summary_history(cid)],
                store.history_boundary(cid),
                None if summary is None else store.sources_of(summary.id),
                store.summaries_citing(cid, "u1"),
                store.known_ids(cid, ["u1", "u11", "nope"]),
                [(h.turn_id, h.score) for h in store.search(cid, "pelicans", scope="all")],
                store.stats(cid).as_dict(),
            )
    return out


def _index_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
    conn.close()
    return {row[0] for row in rows}


def test_reads_without_the_added_indexes_answer_as_with_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "old.db"
    _write(path)
    with_indexes = _reads(path)
    with sqlite3.connect(path) as conn:
        for name, _ in ADDED_INDEXES:
            conn.execute(f"DROP INDEX {name}")
    conn.close()
    before = _index_names(path)
    with caplog.at_level(logging.INFO, logger="ledgerfold.store"):
        without = _reads(path)
    assert without == with_indexes
    assert _index_names(path) == before  # a read-only open creates nothing
    said = [r.getMessage() for r in caplog.records if "indexes" in r.getMessage()]
    assert len(said) == 1 and "open it once for writing" in said[0], said
    assert str(len(ADDED_INDEXES)) in said[0]
    lf.SQLiteStore(path).close()  # a writing open builds them
    assert {name for name, _ in ADDED_INDEXES} <= _index_names(path)
