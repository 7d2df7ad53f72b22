"""A purge on demand reports (log record and `retention.purged` event, SPEC §1.10, §17.8) the
boundary it recorded, as `apply_retention` does: not the sequence asked for, which a purge
lowers to stay before a call whose result it would leave raw (SPEC §17.2) or to the last
turn written. On a real SQLite file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold._events import Event


def test_the_purge_event_and_log_carry_the_recorded_boundary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[Event] = []
    with lf.SQLiteStore(tmp_path / "ledger.db", on_event=events.append) as store:
        for n in range(5):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
        store.append("c", "assistant", "", id="a1", meta={"tool_calls": '[{"id": "k1"}]'})
        store.append("c", "tool", "result", id="r1", meta={"tool_call_id": "k1"})
        for n in range(5, 8):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
        with caplog.at_level(logging.INFO, logger="ledgerfold"):
            # Through the call (sequence 6) but not its result: stops before the call.
            split = store.purge_through("c", 6, "retention")
            # Beyond the last turn written (10): recorded at the last turn.
            beyond = store.purge_through("c", 1000, "retention")
    assert (split.through_sequence, beyond.through_sequence) == (5, 10)
    purged = [event.sequence for event in events if event.name == "retention.purged"]
    assert purged == [5, 10]
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("purged:")]
    assert len(logged) == 2
    assert "through_sequence=5 " in logged[0] and "through_sequence=10 " in logged[1]


def test_a_purge_that_takes_no_turn_records_no_boundary(tmp_path: Path) -> None:
    """SPEC §8: a context's `history_boundary` is None unless raw turns were purged. A purge
    through turns that all stay (protected, the system prompt, none at all) cuts no history:
    no boundary is recorded, the revision stays, and the context and the summary's framing do
    not say history was purged."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        store.append("c", "system", "be brief", id="s")
        store.append("c", "user", "hold", id="p", protected=True)
        for n in range(8):
            store.append("c", "user", f"turn {n}", id=f"t{n}")
        policy = lf.CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
        assert lf.Compactor(store, policy).compact("c").status == "accepted"
        revision = store.load("c").revision
        for through in (0, 1, 2):
            store.purge_through("c", through, "retention")
            assert store.history_boundary("c") is None, through
            assert store.load("c").revision == revision
            context = store.context("c", "v1")
            assert context.history_boundary is None and context.summary is not None
            assert context.summary.purged_through is None
        # A purge that takes a turn records its boundary, as before.
        boundary = store.purge_through("c", 3, "retention")
        assert store.history_boundary("c") == boundary and boundary.through_sequence == 3
        assert store.load("c").revision == revision + 1


def test_a_purge_inside_the_boundary_returns_it_and_sends_no_event(tmp_path: Path) -> None:
    """A purge through a sequence the history boundary already passes purges nothing: it
    returns the boundary the conversation has (not the one asked, which was not recorded)
    and sends no `retention.purged` event (nothing happened, as for a deletion of nothing)."""
    events: list[Event] = []
    with lf.SQLiteStore(tmp_path / "l.db", on_event=events.append) as store:
        for n in range(30):
            store.append("c", "user" if n % 2 == 0 else "assistant", f"turn {n}")
        first = store.purge_through("c", 20, "first")
        again = store.purge_through("c", 10, "again")
        assert (again.through_sequence, again.reason) == (20, "first")
        assert again == first == store.history_boundary("c")
        assert [e.name for e in events].count("retention.purged") == 1
