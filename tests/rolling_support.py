"""What the deterministic rolling tests share: a policy that compacts at every call, plain
turns appended in bulk, one accepted compaction, and the reference fingerprint of an
envelope's sources."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ledgerfold as lf

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402

VERSION = "v1"


# -- deterministic cases --------------------------------------------------------------------

POLICY = lf.CompactionPolicy(VERSION, keep_tail=2, min_new_turns=1, max_input_tokens=10**9)


def _say(store: lf.SQLiteStore, cid: str, count: int, stem: str = "turn") -> None:
    turns = store.load(cid).turns
    start = turns[-1].sequence if turns else 0  # unique IDs even after a purge
    store.append_many(
        cid,
        [
            {"id": f"{stem}{start + i}", "role": ("user", "assistant")[i % 2], "body": f"b{i}"}
            for i in range(count)
        ],
    )


def _reference(store: lf.SQLiteStore, envelope: lf.SummaryEnvelope) -> str:
    turns = {turn.id: turn for turn in store.load(envelope.conversation_id).turns}
    return ref.fingerprint_turns(turns[turn_id] for turn_id in envelope.source_ids)


def _compact(store: Any, cid: str = "c") -> lf.SummaryEnvelope:
    outcome = lf.Compactor(store, POLICY, lambda request: "summary").compact(cid)
    assert outcome.accepted and outcome.summary is not None, outcome
    return outcome.summary
