"""Reliability of `SQLiteStore` on real files with real processes (SPEC §1 invariants 7, 8).

- A child SIGKILLed at random moments while committing summaries: after reopening, the file
  is intact, the ledger unchanged, and the current summary is the old one or a new one,
  complete and current — never partial.
- Disk full (`RLIMIT_FSIZE` in a child) during a commit: `StoreError`, nothing changed.
- Two processes racing `start_plan` / `commit_summary`: a late result of a superseded plan is
  never accepted; the current summary is always valid.
- A source edited by another process while its summary was being generated: rejected stale.

This file is also the children's program: `python test_store_reliability.py <role> ...`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import ledgerfold as lf

PV = "policy-1"
CONVERSATION = "tau-bench"
KILL_TRIALS = 100
RACE_ROUNDS = 150  # per process


def shared_dir() -> Path:
    """The repository's copy of the real transcripts and golden vectors."""
    return Path(__file__).resolve().parents[1] / "tests" / "data"


def real_turns(limit: int) -> list[dict[str, Any]]:
    """Turns of real transcripts (tau-bench), as `append_many` mappings."""
    specs: list[dict[str, Any]] = []
    with open(shared_dir() / "transcripts" / "tau_bench.jsonl", encoding="utf-8") as lines:
        for line in lines:
            for turn in json.loads(line)["turns"]:
                specs.append({"role": turn["role"], "body": turn["body"], "id": turn["id"]})
                if len(specs) == limit:
                    return specs
    return specs


def new_store(path: Path, turns: int = 40) -> lf.SummaryEnvelope:
    """A file with one conversation of real turns and one current summary."""
    with lf.SQLiteStore(path) as store:
        store.append_many(CONVERSATION, real_turns(turns))
        store.append(
            CONVERSATION,
            "user",
            "yes, book it",
            protected=True,
            protection_reason="pending-confirmation",
        )
        return commit_once(store, "s-initial", keep_tail=4)


def commit_once(store: lf.SQLiteStore, summary_id: str, keep_tail: int) -> lf.SummaryEnvelope:
    plan = store.start_plan(CONVERSATION, keep_tail, PV)
    envelope = lf.create_summary_envelope(
        plan, store.load(CONVERSATION), summary_id, PV, f"summary {summary_id}"
    )
    assert envelope is not None
    assert store.commit_summary(envelope).accepted
    return envelope


def child(role: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, role, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def assert_sound(path: Path, ledger: lf.Conversation) -> lf.SummaryEnvelope:
    """The file is intact, the ledger as given, and the current summary complete and valid."""
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    with lf.SQLiteStore(path) as store:
        loaded = store.load(CONVERSATION)
        assert loaded == ledger and loaded.turns == ledger.turns
        current = store.current_summary(CONVERSATION)
        assert current is not None
        assert lf.check_summary(current, loaded, PV).current
        statuses = [r.status for r in store.summary_history(CONVERSATION)]
        assert statuses.count("current") == 1
        with sqlite3.connect(path) as raw:
            rows = raw.execute(
                "SELECT ss.turn_id, ss.turn_digest FROM summary_sources ss"
                " JOIN summaries s ON s.pk = ss.summary_pk WHERE s.id = ? ORDER BY ss.position",
                (current.id,),
            ).fetchall()
        assert [r[0] for r in rows] == list(current.source_ids)
        assert [bytes(r[1]) for r in rows] == [loaded.get(i).digest for i in current.source_ids]
        assert store.context(CONVERSATION, PV).summary is not None
        return current


# ---------------------------------------------------------------- tests


def test_sigkill_while_committing_never_leaves_a_partial_summary(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    new_store(path)
    with lf.SQLiteStore(path) as store:
        ledger = store.load(CONVERSATION)
    rng = random.Random(20261202)
    seen: set[str] = set()
    for trial in range(KILL_TRIALS):
        process = child("commit-loop", str(path), str(trial))
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.04))
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.returncode == -signal.SIGKILL
        seen.add(assert_sound(path, ledger).id)
    # Commits really happened while the children were being killed.
    assert len(seen) > 1


def test_disk_full_during_commit_raises_store_error_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    old = new_store(path)
    with lf.SQLiteStore(path) as store:
        ledger = store.load(CONVERSATION)
    process = child("disk-full", str(path))
    out, _ = process.communicate(timeout=60)
    report = json.loads(out)
    assert report == {
        "error": "StoreError",
        "cause_is_sqlite": True,
        "current": old.id,
        "ledger_unchanged": True,
        "no_new_record": True,
    }
    assert assert_sound(path, ledger) == old
    with lf.SQLiteStore(path) as store:  # with room again, the same plan still commits
        plan_id = report_plan_id(path)
        envelope = lf.create_summary_envelope(
            active_plan(store, plan_id), store.load(CONVERSATION), "s-after", PV, "fits now"
        )
        assert store.commit_summary(envelope).accepted


def report_plan_id(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        plan_id: str = raw.execute(
            "SELECT p.id FROM active_plans a JOIN plans p ON p.pk = a.plan_pk"
        ).fetchone()[0]
    return plan_id


def active_plan(store: lf.SQLiteStore, plan_id: str) -> lf.CompactionPlan:
    plan = lf.plan_compaction(store.load(CONVERSATION), 4, plan_id)
    return plan


def test_racing_processes_never_accept_a_superseded_plan(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    new_store(path, turns=30)
    racers = [child("race", str(path), name, str(RACE_ROUNDS)) for name in ("a", "b")]
    for racer in racers:
        assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    events: list[dict[str, Any]] = []
    for racer in racers:
        out, _ = racer.communicate(timeout=120)
        assert racer.returncode == 0
        events.extend(json.loads(line) for line in out.splitlines())
    plans = [e for e in events if e["op"] == "plan"]
    commits = [e for e in events if e["op"] == "commit"]
    assert len(commits) == 2 * RACE_ROUNDS
    assert all(e["current_valid"] for e in commits)
    by_plan = {e["plan_id"]: e for e in plans}
    for commit in commits:
        own = by_plan[commit["plan_id"]]
        # Plans certainly started (committed) between this commit's plan and the commit.
        between = [
            p
            for p in plans
            if p["plan_id"] != own["plan_id"] and p["t0"] > own["t1"] and p["t1"] < commit["t0"]
        ]
        if commit["accepted"]:
            assert not between, (commit, between)
        else:
            assert commit["detail"] == "superseded-plan"
    accepted = sum(e["accepted"] for e in commits)
    assert 0 < accepted < len(commits)
    with lf.SQLiteStore(path) as store:
        ledger = store.load(CONVERSATION)
    assert_sound(path, ledger)


def test_source_edited_by_another_process_during_generation_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    old = new_store(path)
    with lf.SQLiteStore(path) as store:
        fresh = store.append_many(CONVERSATION, real_turns(60)[40:])
        plan = store.start_plan(CONVERSATION, 4, PV)
        envelope = lf.create_summary_envelope(plan, store.load(CONVERSATION), "s-new", PV, "new")
        editor = child("edit", str(path), fresh[0].id)
        editor.communicate(timeout=60)
        assert editor.returncode == 0
        write = store.commit_summary(envelope)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "stale-source",
            "source-modified",
        )
        assert store.current_summary(CONVERSATION) == old
        assert store.summary_history(CONVERSATION)[-1].status == "rejected"


# ---------------------------------------------------------------- children


def _commit_loop(path: str, trial: str) -> None:
    rng = random.Random(int(trial))
    store = lf.SQLiteStore(path)
    print("ready", flush=True)
    for attempt in range(10**6):
        commit_once(store, f"s-{trial}-{attempt}", keep_tail=rng.randint(2, 12))


def _disk_full(path: str) -> None:
    import resource

    store = lf.SQLiteStore(path)
    before = store.load(CONVERSATION)
    history = len(store.summary_history(CONVERSATION))
    plan = store.start_plan(CONVERSATION, 4, PV)
    envelope = lf.create_summary_envelope(plan, before, "s-huge", PV, "x" * 4_000_000)
    store._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # Writes past the limit fail with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = os.path.getsize(path) + 64 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    report: dict[str, Any] = {}
    try:
        store.commit_summary(envelope)
        report["error"] = None
    except lf.LedgerfoldError as err:
        report["error"] = type(err).__name__
        report["cause_is_sqlite"] = isinstance(err.__cause__, sqlite3.Error)
    current = store.current_summary(CONVERSATION)
    report["current"] = current.id if current else None
    report["ledger_unchanged"] = store.load(CONVERSATION).turns == before.turns
    report["no_new_record"] = len(store.summary_history(CONVERSATION)) == history
    print(json.dumps(report), flush=True)


def _race(path: str, name: str, rounds: str) -> None:
    rng = random.Random(name)
    store = lf.SQLiteStore(path)
    print("ready", flush=True)
    sys.stdin.readline()
    for round_ in range(int(rounds)):
        if name == "a" and round_ % 10 == 0:
            store.append(CONVERSATION, "user", f"more {round_}")
        t0 = time.monotonic_ns()
        plan = store.start_plan(CONVERSATION, rng.randint(2, 8), PV)
        t1 = time.monotonic_ns()
        print(json.dumps({"op": "plan", "plan_id": plan.plan_id, "t0": t0, "t1": t1}))
        envelope = lf.create_summary_envelope(
            plan, store.load(CONVERSATION), f"s-{name}-{round_}", PV, "text"
        )
        time.sleep(rng.uniform(0, 0.002))  # "generation"
        t0 = time.monotonic_ns()
        write = store.commit_summary(envelope)
        t1 = time.monotonic_ns()
        current = store.current_summary(CONVERSATION)
        valid = current is not None and lf.is_summary_current(current, store.load(CONVERSATION), PV)
        print(
            json.dumps(
                {
                    "op": "commit",
                    "plan_id": plan.plan_id,
                    "accepted": write.accepted,
                    "detail": write.detail,
                    "t0": t0,
                    "t1": t1,
                    "current_valid": valid,
                }
            )
        )
    sys.stdout.flush()


def _edit(path: str, turn_id: str) -> None:
    with lf.SQLiteStore(path) as store:
        store.edit(CONVERSATION, turn_id, body="corrected by another process")


if __name__ == "__main__":
    roles = {"commit-loop": _commit_loop, "disk-full": _disk_full, "race": _race, "edit": _edit}
    roles[sys.argv[1]](*sys.argv[2:])
