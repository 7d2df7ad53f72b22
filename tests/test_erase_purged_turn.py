"""`retract(..., erase=True)` of a purged turn erases what is left of it (SPEC §15.5 and
§16.5 are silent on it; a user's request to be forgotten may name a message that retention
already purged): the purge blanked its body, but the sealed summary, written from it, still
held what it said. The erasure takes every version citing it, sealed or not, and reports the
sealed summary's loss as an erasure of a live source does (SPEC §17.5)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledgerfold as lf

SECRET = "quokkacode4711"


def sealed(path: Path, events: list[lf.Event]) -> lf.SQLiteStore:
    store = lf.SQLiteStore(path, on_event=events.append)
    for i in range(10):
        body = f"my locker code is {SECRET}" if i == 3 else f"turn {i} about the weather"
        store.append("c", "user", body, id=f"u{i}")
    summarize = lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=2), lambda r: SECRET)
    assert summarize.compact("c", force=True).accepted
    store.purge_through("c", 6, "retention")
    assert store.current_summary("c") is not None  # sealed, with the text
    return store


def test_erasing_a_purged_turn_erases_the_sealed_summary_written_from_it(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    path = tmp_path / "sealed.db"
    store = sealed(path, events)
    store.retract("c", "u3", erase=True)
    assert store.current_summary("c") is None
    assert store.summary_history("c") == []
    context = store.context("c", "v1")
    assert not any(isinstance(item, lf.SummaryItem) for item in context.items)
    assert context.history_boundary is not None  # the purge is still disclosed
    names = [event.name for event in events]
    assert names[-2:] == ["retention.erased", "summary.sealed-lost"]
    store.close()
    for suffix in ("", "-wal", "-shm"):
        file = Path(f"{path}{suffix}")
        assert not file.exists() or SECRET.encode() not in file.read_bytes()


def test_erasing_a_purged_turn_no_summary_cited_changes_nothing_else(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    store = sealed(tmp_path / "sealed.db", events)
    store.append("c", "user", "one more", id="late")
    store.purge_through("c", 11, "retention", force=True)  # `late`: purged, never summarised
    current = store.current_summary("c")
    store.retract("c", "late", erase=True)
    assert store.current_summary("c") == current
    store.close()


def test_retracting_a_purged_turn_without_erasure_is_still_bad_input(tmp_path: Path) -> None:
    store = sealed(tmp_path / "sealed.db", [])
    with pytest.raises(lf.InvalidInput, match="turn_id"):
        store.retract("c", "u3")
    with pytest.raises(lf.InvalidInput, match="turn_id"):
        store.retract("c", "never-written", erase=True)
    store.close()


def test_a_result_in_flight_from_the_erased_summary_is_not_recorded(tmp_path: Path) -> None:
    store = sealed(tmp_path / "sealed.db", [])
    for i in range(10, 16):
        store.append("c", "user", f"later turn {i}", id=f"u{i}")

    def summarize(request: lf.SummaryRequest) -> str:
        assert request.previous_summary == SECRET  # extending the sealed summary
        store.retract("c", "u3", erase=True)  # while the summarizer runs
        return f"still {SECRET}"

    compactor = lf.Compactor(store, lf.CompactionPolicy("v1", keep_tail=2), summarize)
    assert not compactor.compact("c", force=True).accepted
    assert store.summary_history("c") == []  # its text came from the erased summary
    store.close()
    assert SECRET.encode() not in (tmp_path / "sealed.db").read_bytes()
