"""Disk faults under the store's group commit, as the disk sees them (`wal_faults.py`'s
scenarios, run in a subprocess with `tests/native/wal_sync_shim.c` preloaded): a failing
WAL sync under the Agents session and its deferred compaction, a batch committed early by
an erasing call or a close, a failing checkpoint, a disk that fills and a process killed in
the middle of a batch. A failed write leaves the database as before, now and after a
reopen; every caller hears the truth; nothing committed is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import wal_faults
import wal_faults_async
import wal_sync


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wal_sync.build_shim(tmp_path_factory.mktemp("shim"))


def _run(shim: Path, scenario: str, directory: Path, *, killed: bool = False) -> dict[str, Any]:
    """The scenario's notes: each word's JSON values, in order."""
    script = (
        wal_faults_async.SCRIPT if scenario in wal_faults_async.SCENARIOS else wal_faults.SCRIPT
    )
    log = wal_sync.run(shim, scenario, directory, script, killed=killed)
    notes: dict[str, Any] = {}
    for line in log:
        word, _, rest = line.partition(" ")
        if rest:
            notes.setdefault(word, []).append(json.loads(rest))
    return notes


def _failed(heard: Any) -> bool:
    """A caller heard that its write failed on the disk (no text of it in the message)."""
    text = heard.get("text", heard.get("error")) if isinstance(heard, dict) else ""
    return "disk I/O error" in text and "secret" not in text and "lost" not in text


def test_add_items_whose_sync_fails_raises_and_keeps_nothing(shim: Path, tmp_path: Path) -> None:
    notes = _run(shim, "session", tmp_path)
    (added,) = notes["add"]
    assert _failed(added) and added["error"].startswith("commit: ")
    assert notes["waited"] == ["None"]  # the failed call made no compaction check
    assert notes["items"] == [["before"]]
    assert notes["again"] == [["before", "after"]]
    # `clear_session` hears the failure of its early commit and erases nothing; once the
    # disk is back it erases all, in the file too.
    failed, cleared = notes["cleared"]
    assert _failed(failed) and cleared == "ok"
    assert notes["left"] == [["before", "after"], []]
    assert notes["erased"] == [[]]
    assert notes["reopened"] == [[]]


def test_a_deferred_compaction_whose_sync_fails_leaves_nothing(shim: Path, tmp_path: Path) -> None:
    notes = _run(shim, "deferred", tmp_path)
    assert notes["added"] == [6]  # the append's own batch committed
    (waited,) = notes["waited"]
    assert waited["error"] == "StoreError" and _failed(waited)
    # No plan, summary or event of the compaction whose commit failed ...
    assert notes["events"] == [[]]
    assert notes["history"] == [[]]
    assert notes["current"] == [False]
    # ... and the next one plans and lands on its own (one plan in the file: its own).
    assert notes["next"] == ["accepted"]
    assert notes["plans"] == [[[1]]]


def test_an_erasing_call_committing_a_failing_batch_fails_the_jobs_up_to_it(
    shim: Path, tmp_path: Path
) -> None:
    notes = _run(shim, "erasing", tmp_path)
    (heard,) = notes["heard"]
    # The append and the erasure before the early commit hear its failure; the append after
    # it commits on its own, and fails on its own (the disk still fails).
    assert all(_failed(h) and h["error"] == "StoreError" for h in heard)
    assert heard[0]["text"].startswith("commit: ") and heard[1]["text"].startswith("commit: ")
    assert heard[2]["text"].startswith("append: ")
    assert notes["seen"] == [["keep", "erase me"]]
    assert notes["reopened"] == [["keep", "erase me"]]


def test_the_jobs_after_a_failed_early_commit_keep_their_own_outcomes(
    shim: Path, tmp_path: Path
) -> None:
    (tmp_path / "variant").write_text("back")  # the disk is back after the erasure
    notes = _run(shim, "erasing", tmp_path)
    (heard,) = notes["heard"]
    assert _failed(heard[0]) and _failed(heard[1])
    assert heard[2:] == ["ok", "ok"]  # what they heard is what the file holds
    assert notes["seen"] == [["keep", "erase me", "two"]]
    assert notes["reopened"] == [["keep", "erase me", "two"]]


def test_an_erasure_whose_checkpoint_fails_in_a_batch_lands_and_is_scrubbed_later(
    shim: Path, tmp_path: Path
) -> None:
    (tmp_path / "variant").write_text("checkpoint")  # the database file's syncs fail
    notes = _run(shim, "erasing", tmp_path)
    assert notes["heard"] == [["ok", "ok", "ok"]]
    assert notes["seen"] == [["keep", "one", "two"]]
    assert notes["erased"] == [[]]  # the close's checkpoint, the disk back
    assert notes["reopened"] == [["keep", "one", "two"]]


def test_acompact_whose_commit_fails_to_sync_raises_and_leaves_no_summary(
    shim: Path, tmp_path: Path
) -> None:
    notes = _run(shim, "acompact", tmp_path)
    # The built-in summarizer (one job) and a model of one's own (the plan's job commits,
    # the commit's job fails, and so does recording the failure: the disk still fails):
    # each caller hears the failure, no summary is left, and the next call compacts. The
    # model's plan is left without a result: its event says it was abandoned (the built-in
    # one's plan went with its batch: no event).
    assert len(notes["heard"]) == 2 and all(_failed(h) for h in notes["heard"])
    assert notes["again"] == ["accepted", "accepted"]
    assert notes["history"] == [[], ["current"], [], ["failed", "current"]]
    assert notes["events"] == [
        [],
        ["compaction.accepted"],
        ["compaction.failed"],
        ["compaction.accepted"],
    ]
    # The model's plan, left without a result, was recorded abandoned by the next plan.
    assert notes["reopened"] == [["current"], ["failed", "current"]]


def test_acompact_whose_end_fails_to_sync_once_fails_the_compaction_not_the_call(
    shim: Path, tmp_path: Path
) -> None:
    # As a commit that fails on its own (`store-error`, recorded, its event): the caller
    # gets an outcome, so a call that appended first (add_items) does not raise after its
    # items were stored, and the next compaction plans afresh.
    notes = _run(shim, "acompact_once", tmp_path)
    assert notes["outcome"] == [["failed", "store-error"]]
    assert notes["events"] == [[["compaction.failed", "store-error"]]]
    assert notes["history"] == [[["failed", "store-error"]]]
    assert notes["again"] == ["accepted"]


def test_a_failed_checkpoint_leaves_erased_text_until_the_next_write_or_open(
    shim: Path, tmp_path: Path
) -> None:
    notes = _run(shim, "checkpoint", tmp_path)
    # The erasure committed: its caller hears so, though its checkpoint failed ...
    assert notes["erase"] == ["ok", "ok"]
    # ... which leaves the old pages in the WAL (logged), until the next write's retry.
    assert notes["failed"] == [["-wal"]]
    assert notes["next"] == [[]]
    # A close whose checkpoint fails too leaves them for the next open, which checkpoints.
    assert notes["closing"] == ["ok"]
    assert notes["closed"] == [["-wal"]]
    assert notes["reopened"] == [["keep", "next"]]
    assert notes["search"] == [[]]
    assert notes["end"] == [[]]


def test_a_close_whose_commit_of_the_batch_fails_keeps_nothing_after_a_reopen(
    shim: Path, tmp_path: Path
) -> None:
    notes = _run(shim, "closing_fails", tmp_path)
    (heard,) = notes["heard"]
    assert len(heard) == 2 and all(_failed(h) for h in heard)
    # The WAL still holds the failed commit's frames (the close's checkpoint failed too):
    # the next open's recovery must not read them back.
    assert notes["reopened"] == [["before"]]


@pytest.mark.parametrize(
    ("scenario", "killed"),
    [
        ("killed_after_failure", True),
        ("killed_after_direct_failure", True),
        ("closed_after_failure", False),
    ],
)
def test_a_failed_commit_does_not_come_back_at_the_next_open(
    shim: Path, tmp_path: Path, scenario: str, killed: bool
) -> None:
    """The failed commit's frames stay in the WAL; the process dies (the disk back) or closes
    the store (the disk still failing): the next open recovers the WAL without them."""
    notes = _run(shim, scenario, tmp_path, killed=killed)
    (heard,) = notes["heard"]
    assert heard and all(_failed(h) for h in heard)
    (tmp_path / "fail").unlink(missing_ok=True)
    assert _run(shim, "reopen", tmp_path)["reopened"] == [["before"]]


@pytest.mark.parametrize("room", [0, 300_000, 2_000_000])
def test_a_disk_filling_in_a_batch_fails_its_callers_and_keeps_nothing(
    shim: Path, tmp_path: Path, room: int
) -> None:
    """The WAL may grow by `room` bytes: none (the first write of a frame fails), some (the
    batch's pages spill to it before the commit), or most of the batch's commit."""
    (tmp_path / "room").write_text(str(room))
    notes = _run(shim, "filling", tmp_path)
    (heard,) = notes["heard"]
    assert len(heard) == 1  # every caller hears the same failure ...
    error = json.loads(heard[0])["error"]
    assert error.startswith("commit: ") and "job" not in error
    assert "database or disk is full" in error  # ... and what it was
    assert notes["seen"] == [["before"]]
    assert notes["search"] == [0]
    assert notes["reopened"] == [["before", "after"]]
    assert notes["index"] == [[]]


@pytest.mark.parametrize("at", [0, 1, 2, 7, 40])
def test_a_process_killed_in_a_batch_keeps_whole_jobs_and_an_index_that_agrees(
    shim: Path, tmp_path: Path, at: int
) -> None:
    """Killed at the `at`-th write of the batch's commit to the WAL (0: at its sync, once
    every frame is written): the next open finds every job of the batch or none of them,
    and search finds exactly the live turns."""
    (tmp_path / "at").write_text(str(at))
    notes = _run(shim, "killed", tmp_path, killed=True)
    assert "not" not in notes  # it was killed before any caller heard back
    (tmp_path / "kill").unlink()
    checked = _run(shim, "killed_check", tmp_path)
    (ids,) = checked["ids"]
    seeds = ["s0", "s1", "s2"]
    batch = [f"{n}.{k}" for n in range(wal_faults.KILLED_JOBS) for k in range(3)]
    # The frames were all written before the sync: the commit is in the WAL, whole.
    assert ids == (seeds + batch if at == 0 else seeds)
    (found,) = checked["found"]
    assert found == [[turn_id] if turn_id in ids else [] for turn_id in seeds + batch]
    assert checked["common"] == [len(ids)]
    assert checked["index"] == [[]]


@pytest.mark.parametrize("late", [False, True])
def test_wait_compaction_after_a_cancelled_add_items_whose_batch_failed(
    shim: Path, tmp_path: Path, late: bool
) -> None:
    """The caller of `add_items` gives up while its job runs (its batch then fails, and
    `wait_compaction()` says so: `StoreError`), or once that batch has ended, before it heard
    back: the compaction its job deferred was dropped with the append, and the wait gives
    None, not a `CancelledError` the waiting task would take for its own cancellation."""
    if late:
        (tmp_path / "variant").write_text("late")
    notes = _run(shim, "cancelled", tmp_path)
    assert notes["add"] == ["cancelled"]
    assert notes["waited"] == (["None"] if late else ["StoreError"])
    assert notes["seen"] == [0]


def test_wait_compaction_does_not_report_a_compaction_its_failed_batch_undid(
    shim: Path, tmp_path: Path
) -> None:
    """Below the trigger, the job of `add_items` compacts at once (the rest of a backlog);
    its caller gives up once that job's batch has ended, and the batch's sync failed: the
    summary was never kept, and `wait_compaction()` does not say it was accepted."""
    notes = _run(shim, "cancelled_in_job", tmp_path)
    assert notes["first"] == ["accepted"]
    assert notes["add"] == ["cancelled"]
    assert notes["waited"] == [None]
    assert notes["history"] == [["current"]]  # the first compaction's only
