"""Sequences the state machines (`tests/test_rolling_state_machine.py`,
`tests/test_state_machine.py`) once failed on, replayed step by step with their rules and
invariants, so they stay covered whatever the hypothesis database holds."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import ledger_machine  # noqa: E402
import ledger_write_rules  # noqa: E402
import test_rolling_state_machine as rolling  # noqa: E402
import test_state_machine  # noqa: E402
from test_rolling_state_machine import RollingMachine  # noqa: E402
from test_state_machine import LedgerMachine  # noqa: E402


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[RollingMachine]:
    monkeypatch.setattr(rolling, "event", lambda *args: None)  # hypothesis's, tests only
    state = RollingMachine()
    try:
        yield state
    finally:
        state.teardown()


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerMachine]:
    for module in (ledger_machine, ledger_write_rules, test_state_machine):
        monkeypatch.setattr(module, "event", lambda *args: None)
    state = LedgerMachine()
    try:
        yield state
    finally:
        state.teardown()


def replay(state: RollingMachine, steps: list[Callable[[], None]]) -> None:
    state.every_summary_in_use_matches_its_sources()
    for step in steps:
        step()
        state.every_summary_in_use_matches_its_sources()


def replay_ledger(state: LedgerMachine, steps: list[Callable[[], None]]) -> None:
    state.check_everything()
    for step in steps:
        step()
        state.check_everything()


def test_a_purge_without_force_goes_past_a_protected_unanswered_call(
    machine: RollingMachine,
) -> None:
    # Hypothesis's shrunk sequence: the call is protected, so the purge never takes it (it
    # stays raw, waiting for its result) and need not stop before it.
    replay(
        machine,
        [
            lambda: machine.call_a_tool(at=0, cid="c2"),
            lambda: machine.edit(at=0, cid="c2", index=0, kind="protect"),
            lambda: machine.purge(at=0, back=0, cid="c2", force=False),
            lambda: machine.answer_late(at=0, cid="c2"),
            lambda: machine.converse(at=0, cid="c2", rounds=[3], budget=10**9),
        ],
    )
    assert "t1" in {turn.id for turn in machine.stores[0].load("c2").turns}


def test_retention_keeps_an_unanswered_call_below_the_summary(machine: RollingMachine) -> None:
    replay(
        machine,
        [
            lambda: machine.append(at=0, cid="c1", count=1, group=None, protect=False),
            lambda: machine.call_a_tool(at=0, cid="c1"),
            lambda: machine.append(at=1, cid="c1", count=4, group=None, protect=False),
            lambda: machine.compact(at=0, cid="c1", budget=10**9),
            lambda: machine.apply_retention(at=1, cid="c1", retain=0),
            lambda: machine.answer_late(at=0, cid="c1"),
            lambda: machine.converse(at=1, cid="c1", rounds=[2], budget=10**9),
        ],
    )
    turns = machine.model["c1"].turns
    assert (turns["t1"].state, turns["t2"].state) == ("purged", "live")


def test_a_purge_below_an_earlier_boundary_over_a_kept_unanswered_call(
    machine: RollingMachine,
) -> None:
    # Hypothesis's shrunk sequence: retention purges the covered orphan result (t2) and
    # keeps the unanswered call below it (t1), so the boundary (2) lies above a live turn;
    # the purge after it takes nothing more and returns that boundary. The rule took every
    # live turn below the boundary for purged, the call among them.
    replay(
        machine,
        [
            lambda: machine.answer_late(at=0, cid="c1"),
            lambda: machine.append_call(at=0, calls=1, cid="c1"),
            lambda: machine.answer_late(at=0, cid="c1"),
            lambda: machine.answer_late(at=0, cid="c1"),
            lambda: machine.converse(at=0, budget=1_000_000_000, cid="c1", rounds=[1, 1]),
            lambda: machine.apply_retention(at=0, cid="c1", retain=0),
            lambda: machine.purge(at=0, back=0, cid="c1", force=False),
        ],
    )
    turns = machine.model["c1"].turns
    assert (turns["t1"].state, turns["t2"].state) == ("live", "purged")
    assert "t1" in {turn.id for turn in machine.stores[0].load("c1").turns}


def test_a_turn_kept_below_a_purge_joins_the_sealed_summary_after_its_sources(
    ledger: LedgerMachine,
) -> None:
    # The ledger machine's shrunk sequence: a protected system turn kept raw below the purge
    # boundary is unprotected and folded into the sealed summary after its purged sources
    # (SPEC §17.5); the reference took that order for a reordering and expected a fallback.
    replay_ledger(
        ledger,
        [
            lambda: ledger.seed(
                seeds=[("c1", "system", "", (True, None)), ("c1", "user", "", (False, None))]
            ),
            lambda: ledger.converse(bodies_=[""], conversation="c1", max_input_tokens=10**9),
            lambda: ledger.append_ungrouped_call(body="", conversation="c1", count=1),
            lambda: ledger.retract(conversation="c1", erase=False, index=3417),
            lambda: ledger.append(
                body="",
                conversation="c1",
                group=None,
                meta=None,
                protection=(False, None),
                role="system",
            ),
            lambda: ledger.acompact_race(conversation="c1"),
            lambda: ledger.purge(conversation="c1", force=False, through=10),
            lambda: ledger.unprotect_below_the_summary(conversation="c1"),
            lambda: ledger.acompact_race(conversation="c1"),
        ],
    )
    current = ledger.model["c1"].current
    assert current is not None and current.envelope is not None
    assert current.envelope.source_ids[-1] == "t-1"
