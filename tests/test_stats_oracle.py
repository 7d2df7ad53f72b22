"""`stats()` (SPEC §17.8) against a slow oracle: the same counts worked out from the store's
public reads (`load`, `summary_history`, `current_summary`, `context`, `sources_of`) and
from what each operation did to the turns, over real transcripts put through a seeded mix
of compactions, edits, retractions (erasing or not), purges, abandoned plans and deletions."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold._cli.commands_write import turn_spec
from ledgerfold._transcripts import iter_transcripts
from ledgers import DATA

PV = "oracle-v1"
STATUSES = ("current", "superseded", "stale", "failed", "rejected")  # SPEC §9


def _conversations(per_file: int) -> list[Any]:
    chosen = []
    for source in sorted(DATA.glob("*.jsonl")):
        chosen.extend(list(iter_transcripts(source))[:per_file])
    return chosen


class Oracle:
    """What each turn is, by conversation, from what the operations did (public reads)."""

    def __init__(self, store: lf.SQLiteStore) -> None:
        self.store = store
        # id -> (sequence, state, role, protected)
        self.state: dict[str, dict[str, tuple[int, str, str, bool]]] = {}

    def live(self, conversation_id: str) -> dict[str, int]:
        return {t.id: t.sequence for t in self.store.load(conversation_id).turns}

    def note(
        self, conversation_id: str, purged_through: int | None = None, force: bool = False
    ) -> None:
        """After an operation: turns no longer live were retracted, or purged by a purge,
        which also takes the retracted turns through its boundary (a protected one or a
        system prompt only when forced)."""
        known = self.state.setdefault(conversation_id, {})
        live = {t.id: t for t in self.store.load(conversation_id).turns}
        for turn_id, turn in live.items():
            known[turn_id] = (turn.sequence, "live", turn.role, turn.protected)
        for turn_id, (sequence, state, role, protected) in list(known.items()):
            if turn_id in live or state == "purged":
                continue
            purged = (
                purged_through is not None
                and sequence <= purged_through
                and (force or (not protected and role != "system"))
            )
            if state == "live" or purged:
                state = "purged" if purged else "retracted"
            known[turn_id] = (sequence, state, role, protected)

    def stats(self) -> dict[str, Any]:
        store = self.store
        ids = store.conversation_ids()
        states: Counter[str] = Counter()
        statuses: Counter[str] = Counter(dict.fromkeys(STATUSES, 0))
        fallbacks: Counter[str] = Counter()
        without = lost = 0
        for cid in ids:
            known = self.state.get(cid, {})
            states.update(row[1] for row in known.values())
            statuses.update(record.status for record in store.summary_history(cid))
            fallback = store.context(cid, PV).fallback
            if fallback is not None:
                fallbacks[fallback] += 1
            purged = {turn_id for turn_id, row in known.items() if row[1] == "purged"}
            current = store.current_summary(cid)
            usable = current is not None
            if purged and not usable:
                without += 1
            elif purged and current is not None and not purged & set(current.source_ids):
                lost += 1
        return {
            "conversations": len(ids),
            "turns": states["live"],
            "turns_retracted": states["retracted"],
            "turns_purged": states["purged"],
            "summaries": dict(statuses),
            "fallbacks": dict(sorted(fallbacks.items())),
            "purged_without_summary": without,
            "sealed_lost": lost,
        }


def _step(store: lf.SQLiteStore, oracle: Oracle, cid: str, rng: random.Random) -> None:
    live = list(oracle.live(cid).items())
    op = rng.choice(["compact", "compact", "edit", "retract", "erase", "purge", "plan"])
    compactor = lf.Compactor(
        store, lf.CompactionPolicy(PV, keep_tail=rng.choice([2, 4, 8]), min_new_turns=1)
    )
    if op == "compact":
        compactor.compact(cid, force=rng.random() < 0.5)
    elif op == "plan":
        store.start_plan(cid, 4, PV)  # ended by the next plan: `abandoned`
    elif not live:
        return
    elif op == "edit":
        store.edit(cid, rng.choice(live)[0], body=f"edited {rng.random()}")
    elif op in ("retract", "erase"):
        store.retract(cid, rng.choice(live)[0], erase=op == "erase")
    else:
        through, force = rng.choice(live)[1], rng.random() < 0.5
        # Unforced, the boundary may stop short of `through` (a unit it would split).
        boundary = store.purge_through(cid, through, "retention", force=force)
        oracle.note(cid, boundary.through_sequence, force)
        return
    oracle.note(cid)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stats_agree_with_the_oracle_after_mixed_operations(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with lf.SQLiteStore(tmp_path / "oracle.db") as store:
        oracle = Oracle(store)
        transcripts = _conversations(3)
        for transcript in transcripts:
            store.append_many(transcript.conversation_id, [turn_spec(t) for t in transcript.turns])
            oracle.note(transcript.conversation_id)
        cids = [t.conversation_id for t in transcripts]
        for step in range(60):
            cid = rng.choice(cids)
            try:
                _step(store, oracle, cid, rng)
            except lf.InvalidInput:
                oracle.note(cid)  # refused (e.g. a purge splitting a unit): nothing changed
            if step % 20 == 19:
                assert store.stats().as_dict() == oracle.stats(), step
        gone = rng.choice(cids)
        store.delete_conversation(gone)
        oracle.state.pop(gone)
        assert store.stats().as_dict() == oracle.stats()
        for cid in cids:
            if cid != gone:
                one = store.stats(cid).as_dict()
                assert one["fallbacks"] == (
                    {} if (f := store.context(cid, PV).fallback) is None else {f: 1}
                ), cid
