"""A `purge` through which no turn would go (`--through 0`, turns purged already, only
protected turns or the system prompt) says so on one line, exits 0 and writes nothing: no
boundary is recorded, the revision stays, the summary is not sealed, the file is unchanged
(SPEC §15.5: a purge records a boundary of what it deleted; here nothing is deleted)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cli_support import run
from ledgerfold import CompactionPolicy, Compactor, SQLiteStore


def _state(db: Path) -> tuple[str, bool]:
    return hashlib.sha256(db.read_bytes()).hexdigest(), Path(f"{db}-wal").exists()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    with SQLiteStore(path) as store:
        store.append("c", "system", "you are terse")
        store.append("c", "user", "secret", protected=True, protection_reason="audit-evidence")
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(4)])
    return path


def _purge(db: Path, through: int, *extra: str) -> tuple[int, str, str]:
    result = run("purge", str(db), "c", "--through", str(through), "--reason", "r", *extra)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("through", [0, 1, 2], ids=["zero", "system", "protected"])
def test_nothing_to_purge_writes_nothing(db: Path, through: int) -> None:
    before = _state(db)
    code, out, err = _purge(db, through)
    assert code == 0, err
    assert err == ""
    assert out.startswith(f"nothing to purge in c through sequence {through}: ")
    assert out.rstrip().endswith("nothing was written") and len(out.splitlines()) == 1
    assert _state(db) == before
    with SQLiteStore(db, read_only=True) as store:
        assert store.history_boundary("c") is None


def test_nothing_to_purge_says_what_stays(db: Path) -> None:
    _, out, _ = _purge(db, 2)
    assert "1 system turn kept without --force" in out
    assert "1 protected turn kept without --force" in out


def test_a_purge_repeated_records_no_second_boundary(db: Path) -> None:
    code, _, err = _purge(db, 4)
    assert code == 0, err
    with SQLiteStore(db, read_only=True) as store:
        first = store.history_boundary("c")
        revision = store.load("c").revision
    assert first is not None and first.through_sequence == 4
    before = _state(db)
    code, out, err = _purge(db, 4)
    assert code == 0, err
    assert out.startswith("nothing to purge in c through sequence 4: ")
    # Why: the turns are gone already (not only the system prompt and protected turn kept).
    assert "turns through sequence 4 purged already; 1 protected turn kept" in out
    assert _state(db) == before
    with SQLiteStore(db, read_only=True) as store:
        assert store.history_boundary("c") == first
        assert store.load("c").revision == revision


def test_nothing_to_purge_as_json(db: Path) -> None:
    before = _state(db)
    code, out, err = _purge(db, 0, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["turns"] == 0 and report["dry_run"] is False
    assert report["boundary"] is None and report["purged_at"] is None
    assert _state(db) == before


def test_nothing_to_purge_seals_no_summary(tmp_path: Path) -> None:
    """With a current summary, a purge of nothing reports no sealed summary (`--dry-run`
    too): no purge runs, so none is sealed."""
    path = tmp_path / "summarised.db"
    with SQLiteStore(path) as store:
        store.append_many("c", [{"role": "user", "body": f"turn {n}"} for n in range(12)])
        policy = CompactionPolicy("v1", keep_tail=4, min_new_turns=1)
        assert Compactor(store, policy).compact("c").status == "accepted"
    for extra in ((), ("--dry-run",)):
        code, out, err = _purge(path, 0, "--json", *extra)
        assert code == 0, err
        report = json.loads(out)
        assert report["turns"] == 0 and report["sealed_summary"] is None
    code, out, _ = _purge(path, 4, "--json", "--dry-run")
    assert code == 0 and json.loads(out)["sealed_summary"] is not None
