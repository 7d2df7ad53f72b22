"""SPEC §15.1 under §17.5, as a property over mixed histories on a real SQLite file: edits
(also back to an earlier body), retractions, erasures, purges, pruning with any
`keep_checkpoints`, policy changes and a second store object compacting on the same file
while the first one writes. Every summarizer request is recorded; its previous text must
have been derived only from turn contents the ledger holds when the request is made, and
the summary in the context only from its sources as they are now."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import SQLiteStore

CONV = "c"
PV = "v1"
Content = tuple[str, str, str]


def content(turn: lf.Turn) -> Content:
    return turn.role, turn.body, json.dumps(turn.meta, sort_keys=True)


class Recorder:
    """Unique texts; per text, the turn contents it was derived from (its request's turns
    and everything its previous text was derived from)."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.derived: dict[str, dict[str, Content]] = {}
        self.violations: list[str] = []

    def __call__(self, request: lf.SummaryRequest) -> str:
        ledger = {turn.id: turn for turn in self.store.load(CONV).turns}
        derived: dict[str, Content] = {}
        if request.previous_summary is not None:
            derived.update(self.derived[request.previous_summary])
            self.violations.extend(
                turn_id
                for turn_id, seen in derived.items()
                if turn_id in ledger and content(ledger[turn_id]) != seen
            )
        derived.update((item.id, content(ledger[item.id])) for item in request.turns)
        text = f"S{len(self.derived)}"
        self.derived[text] = derived
        return text


ACTIONS = ["talk", "edit", "edit-back", "retract", "erase", "purge", "prune", "policy"]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    actions=st.lists(
        st.tuples(st.sampled_from(ACTIONS), st.floats(0, 1), st.booleans()),
        min_size=10,
        max_size=50,
    ),
)
def test_no_previous_text_saw_content_the_ledger_no_longer_holds(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    actions: list[tuple[str, float, bool]],
) -> None:
    path = tmp_path_factory.mktemp("lineage") / "ledger.db"
    rng = random.Random(seed)
    with SQLiteStore(path) as store, SQLiteStore(path) as other:
        recorder = Recorder(store)

        def policy() -> lf.CompactionPolicy:
            return lf.CompactionPolicy(
                PV,
                keep_tail=rng.choice([1, 2, 3]),
                min_new_turns=rng.choice([1, 2, 4]),
                keep_versions=rng.choice([0, 1, 2]),
                keep_checkpoints=rng.choice([0, 1, 3, 8]),
                max_input_tokens=rng.choice([10**6, 30]),
            )

        compactor = lf.Compactor(store, policy(), recorder)
        written = 0

        def talk(count: int) -> None:
            nonlocal written
            for n in range(written, written + count):
                store.append(CONV, rng.choice(["user", "assistant"]), f"turn {n}", id=f"t{n}")
            written += count

        talk(8)
        for action, where, by_other in actions:
            turns = store.load(CONV).turns
            victim = turns[min(len(turns) - 1, int(where * len(turns)))] if turns else None
            if action == "talk":
                talk(3)
            elif action == "edit" and victim is not None:
                store.edit(CONV, victim.id, body=f"{victim.body} +{rng.randint(0, 9)}")
            elif action == "edit-back" and victim is not None:
                store.edit(CONV, victim.id, body=victim.body.split(" +")[0])
            elif action in ("retract", "erase") and len(turns) > 3 and victim is not None:
                store.retract(CONV, victim.id, erase=action == "erase")
            elif action == "purge" and len(turns) > 6 and victim is not None:
                store.purge_through(CONV, turns[len(turns) // 3].sequence, "retention")
            elif action == "prune":
                store.prune_versions(
                    CONV, keep=rng.randint(0, 2), keep_checkpoints=rng.randint(0, 8)
                )
            elif action == "policy":
                compactor.policy = policy()
            # Half the time another store object on the same file compacts.
            runner = lf.Compactor(other, compactor.policy, recorder) if by_other else compactor
            outcome = runner.compact(CONV, force=rng.random() < 0.5)
            assert outcome.status != "failed", outcome
            assert recorder.violations == []
            context = store.context(CONV, PV)
            if context.summary is not None and context.fallback is None:
                ledger = {turn.id: turn for turn in store.load(CONV).turns}
                for turn_id, seen in recorder.derived[context.summary.text].items():
                    if turn_id in ledger:  # (a purged source is sealed)
                        assert content(ledger[turn_id]) == seen, turn_id
