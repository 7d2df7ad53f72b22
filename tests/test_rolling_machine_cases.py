"""Sequences the rolling state machine (`tests/test_rolling_state_machine.py`) once failed on,
replayed step by step with its rules and invariants, so they stay covered whatever the
hypothesis database holds."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import test_rolling_state_machine as rolling  # noqa: E402
from test_rolling_state_machine import RollingMachine  # noqa: E402


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[RollingMachine]:
    monkeypatch.setattr(rolling, "event", lambda *args: None)  # hypothesis's, tests only
    state = RollingMachine()
    try:
        yield state
    finally:
        state.teardown()


def replay(state: RollingMachine, steps: list[Callable[[], None]]) -> None:
    state.every_summary_in_use_matches_its_sources()
    for step in steps:
        step()
        state.every_summary_in_use_matches_its_sources()


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
