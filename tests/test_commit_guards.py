"""Guards around a summary's commit (SPEC §15.4, §15.8): the version cache across a failed
COMMIT, a forged envelope under the active plan, and the error types of odd arguments."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf

PV = "v1"
CID = "c"


def _ledger(store: lf.SQLiteStore) -> None:
    """t1..t8; t2 is protected, so a summary of t1..t6 keeps it below its slot."""
    store.append_many(
        CID,
        [
            {
                "id": f"t{i}",
                "role": "user" if i % 2 else "assistant",
                "body": f"body {i}",
                "protected": i == 2,
            }
            for i in range(1, 9)
        ],
    )


class _InterruptAtCommit:
    """A connection whose `COMMIT` is interrupted (Ctrl-C at that very point): what the
    transaction did before is rolled back."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            raise KeyboardInterrupt
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _commit_interrupted(store: lf.SQLiteStore, envelope: lf.SummaryEnvelope) -> None:
    conn = store._db._conn
    store._db._conn = _InterruptAtCommit(conn)  # type: ignore[assignment]
    try:
        with pytest.raises(KeyboardInterrupt):
            store.commit_summary(envelope)
    finally:
        store._db._conn = conn


def _truth(path: Path) -> tuple[lf.AssembledContext, list[lf.SummaryRecord]]:
    with lf.SQLiteStore(path) as fresh:
        return fresh.context(CID, PV), fresh.summary_history(CID)


@pytest.mark.parametrize("retry", [True, False], ids=["same-envelope", "other-envelope"])
def test_a_commit_that_fails_at_commit_leaves_no_phantom_in_the_cache(
    tmp_path: Path, retry: bool
) -> None:
    """Handle A's COMMIT fails; handle B then commits the same envelope (a retry, after a
    failure record took A's row number) or another envelope under the same ID. A must serve
    B's committed truth: the protected turn kept below the summary, B's text, B's history;
    a failure A records afterwards is a new record."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as a, lf.SQLiteStore(path) as b:
        _ledger(a)
        plan = a.start_plan(CID, 2, PV)
        mine = lf.create_summary_envelope(plan, a.load(CID), "s1", PV, "text A never committed")
        assert mine is not None
        _commit_interrupted(a, mine)
        if retry:
            b.record_failure(plan.plan_id, "summarizer-error")  # takes A's row number
            committed = mine
        else:
            other = b.start_plan(CID, 2, PV)  # plan 1 is abandoned: a record takes the row
            made = lf.create_summary_envelope(other, b.load(CID), "s1", PV, "text B committed")
            assert made is not None
            committed = made
        assert b.commit_summary(committed).accepted
        context, history = _truth(path)
        assert [item.id for item in context.items] == ["t2", "s1", "t7", "t8"]
        seen = a.context(CID, PV)
        assert seen == context
        assert seen.summary is not None and seen.summary.text == committed.text
        assert a.summary_history(CID) == history
        assert a.current_summary(CID) == committed
        later = a.start_plan(CID, 2, PV)
        a.record_failure(later.plan_id, "summarizer-error")
        assert a.summary_history(CID) == _truth(path)[1]
        assert [r.status for r in a.summary_history(CID)][-1] == "failed"
        assert a.context(CID, PV) == context


def test_a_forged_envelope_over_every_turn_is_refused(tmp_path: Path) -> None:
    """An envelope under the active plan ID whose sources are every turn (the protected
    turn and the tail included), with a correct fingerprint: refused `invalid-summary` /
    `protected-source` (SPEC §17.1: that rule comes before the plan's); the context is
    unchanged (SPEC §15.4)."""
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _ledger(store)
        before = store.context(CID, PV)
        plan = store.start_plan(CID, 2, PV)
        every = store.load(CID).turns
        forged = lf.SummaryEnvelope(
            id="s-forged",
            plan_id=plan.plan_id,
            conversation_id=CID,
            source_revision=plan.source_revision,
            source_ids=tuple(turn.id for turn in every),
            source_fingerprint=lf.fingerprint_turns(every),
            policy_version=PV,
            text="only this",
        )
        write = store.commit_summary(forged)
        assert (write.accepted, write.reason, write.detail) == (
            False,
            "invalid-summary",
            "protected-source",
        )
        assert store.context(CID, PV) == before
        assert store.current_summary(CID) is None


def test_sqlitestore_path_with_nul_is_invalid_input() -> None:
    with pytest.raises(lf.InvalidInput) as caught:
        lf.SQLiteStore("a\x00b.db")
    assert caught.value.field == "path"


def test_edit_of_an_unencodable_key_names_a_printable_field() -> None:
    with lf.SQLiteStore() as store:
        _ledger(store)
        with pytest.raises(lf.InvalidInput) as caught:
            store.edit(CID, "t1", **{"\ud800": 1})
    field = caught.value.field
    assert field is not None and field.isprintable()
    field.encode("utf-8")  # loggable on any stream
    assert field == ascii("\ud800")


@pytest.mark.parametrize(
    "verdicts",
    [[("c",)], [("c", "s1", "r", "x")], [5], 5],
    ids=["short", "long", "int", "not-iterable"],
)
def test_mark_stale_with_malformed_verdicts_is_invalid_input(verdicts: Any) -> None:
    with lf.SQLiteStore() as store, pytest.raises(lf.InvalidInput) as caught:
        store.mark_stale(verdicts)
    assert caught.value.field in ("verdicts", "verdicts[0]")


def test_a_reused_summary_id_makes_compact_fail_not_raise() -> None:
    """The second compaction reuses the first one's summary ID: `failed`, and the plan does
    not stay active (a later compaction with a fresh ID is accepted)."""
    with lf.SQLiteStore() as store:
        _ledger(store)
        ids = iter(["s-same", "s-same", "s-fresh"])
        compactor = lf.Compactor(
            store,
            lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1),
            summary_id_factory=lambda: next(ids),
        )
        assert compactor.compact(CID, force=True).status == "accepted"
        store.append_many(CID, [{"role": "user", "body": f"more {i}"} for i in range(4)])
        assert compactor.compact(CID, force=True).status == "failed"
        assert compactor.compact(CID, force=True).status == "accepted"


class _Interrupted(Exception):
    pass


def test_an_interrupt_while_a_worker_starts_still_waits_for_that_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C handled while the main thread is starting a worker (the signal arrives just
    after the thread started): `revalidate_database` raises only after every worker it
    started has finished, none left running."""
    import signal
    import threading
    import time

    from ledgerfold import _revalidate_runs as revalidate_runs
    from ledgerfold import revalidate

    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        for cid in ("a", "b", "c", "d"):
            store.append_many(cid, [{"role": "user", "body": f"{cid} {i}"} for i in range(6)])
            policy = lf.CompactionPolicy(PV, keep_tail=2, min_new_turns=1)
            assert lf.Compactor(store, policy).compact(cid, force=True).status == "accepted"
    started: list[str] = []
    finished: list[str] = []
    real_check = revalidate_runs.check_jobs

    def slow_check(*args: Any, **kwargs: Any) -> Any:
        started.append(threading.current_thread().name)
        time.sleep(0.5)
        try:
            return real_check(*args, **kwargs)
        finally:
            finished.append(threading.current_thread().name)

    real_start = threading.Thread.start
    fired: list[bool] = []

    def start(thread: threading.Thread) -> None:
        real_start(thread)
        if thread.name.startswith("ledgerfold-worker") and not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)  # handled at the main thread's next step

    def interrupted(signum: int, frame: object) -> None:
        raise _Interrupted

    monkeypatch.setattr(revalidate_runs, "check_jobs", slow_check)
    monkeypatch.setattr(threading.Thread, "start", start)
    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        with pytest.raises(_Interrupted):
            revalidate.revalidate_database(path, workers=2, batch_turns=1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert fired and started
    assert sorted(finished) == sorted(started)
    assert not [t for t in threading.enumerate() if t.name.startswith("ledgerfold-worker")]
