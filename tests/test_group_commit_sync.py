"""Group commit's syncs of the WAL, as the disk sees them (`store/_group_commit.py`, SPEC
§17.6): each scenario of `wal_sync.py` runs in a subprocess with a shim preloaded that logs,
and on request fails, SQLite's own fsync of the WAL. A batch of a `"full"` store is made
durable by one sync before any of its callers hears back; a batch whose sync fails fails
every caller and leaves the database exactly as before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wal_sync


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wal_sync.build_shim(tmp_path_factory.mktemp("shim"))


def _between(log: list[str], first: str, last: str) -> list[str]:
    return log[log.index(first) + 1 : log.index(last)]


def test_a_batch_is_made_durable_by_one_sync_before_its_callers_hear(
    shim: Path, tmp_path: Path
) -> None:
    log = wal_sync.run(shim, "batch", tmp_path)
    during = _between(log, "start", "end")
    # One sync for the ten commits of the batch, not ten; every answer after it.
    assert during.count("sync") == 1
    answers = [line for line in during if line.startswith("answered")]
    assert sorted(answers) == sorted(f"answered {n}" for n in range(10))
    assert during.index("sync") < during.index(answers[0])


def test_reads_need_no_sync(shim: Path, tmp_path: Path) -> None:
    assert _between(wal_sync.run(shim, "reads", tmp_path), "start", "end") == []


def test_a_normal_durability_store_does_not_sync_its_commits(shim: Path, tmp_path: Path) -> None:
    assert _between(wal_sync.run(shim, "normal", tmp_path), "start", "end") == []


def test_a_failed_sync_fails_every_caller_and_keeps_nothing(shim: Path, tmp_path: Path) -> None:
    log = wal_sync.run(shim, "failing", tmp_path)
    notes: dict[str, list[str]] = {}
    for line in log:
        word, _, rest = line.partition(" ")
        notes.setdefault(word, []).append(rest)
    # Both callers of the batch hear that the commit failed (no body in the message) ...
    errors = [json.loads(rest)["error"] for rest in notes["answered"]]
    assert len(errors) == 2
    for error in errors:
        assert "commit" in error and "disk I/O error" in error
        assert "secret" not in error
    # ... and nothing of the batch is seen afterwards, by the store nor after a reopen.
    assert [json.loads(rest) for rest in notes["seen"]] == [["before the batch"]]
    assert [json.loads(rest) for rest in notes["conversations"]] == [["kept"], ["kept"]]
    assert [json.loads(rest) for rest in notes["reopened"]] == [["before the batch"]]
    assert [json.loads(rest) for rest in notes["after"]] == [["before the batch", "after"]]


def test_a_job_closing_its_store_leaves_the_batchs_commit_synced(
    shim: Path, tmp_path: Path
) -> None:
    log = wal_sync.run(shim, "closing", tmp_path)
    assert "sync" in _between(log, "start", "answered")
    kept = [line.partition(" ")[2] for line in log if line.startswith("kept ")]
    assert [json.loads(rest) for rest in kept] == [["kept"]]


def test_a_call_of_its_own_whose_sync_fails_keeps_nothing(shim: Path, tmp_path: Path) -> None:
    log = wal_sync.run(shim, "direct", tmp_path)
    notes = {line.partition(" ")[0]: line.partition(" ")[2] for line in log if line != "sync"}
    error = json.loads(notes["answered"])["error"]
    assert "disk I/O error" in error and "secret" not in error
    assert json.loads(notes["seen"]) == ["before"]
    assert json.loads(notes["reopened"]) == ["before", "after"]
