"""Threads: the native functions hammered by a thread pool on shared objects give
exactly the single-threaded results, and one `SQLiteStore` (or one per thread, on the same
file) shared by threads appending, assembling and compacting stays consistent.
The threading model these tests pin down is written up in `docs/threading.md`."""

from __future__ import annotations

import contextlib
import gc
import pickle
import random
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from ledgerfold import SummaryItem, TurnItem

WORKERS = 8
POLICY = "policy-1"
ROLES = ("system", "user", "assistant", "tool")
REASONS = ("pending-confirmation", "active-constraint", "audit-evidence", "unverified-provenance")


def turn_fields(n: int) -> list[dict[str, Any]]:
    """Varied turns: unicode and long bodies (long enough for the native code to detach
    from the interpreter), protection, groups, meta."""
    rng = random.Random(7)
    fields = []
    for i in range(1, n + 1):
        protected = rng.random() < 0.15
        fields.append(
            {
                "id": f"t{i}-\u00e9\u4e2d",
                "sequence": i * 3,
                "role": ROLES[i % 4],
                "body": f"body {i} \u2028 \U0001f600 " + "x" * rng.randrange(0, 5000),
                "protected": protected,
                "protection_reason": rng.choice(REASONS) if protected else None,
                "group": f"g{i // 5}" if i % 3 == 0 else None,
                "meta": {"name": f"tool-{i}"} if i % 2 else None,
            }
        )
    return fields


def make_turn(fields: dict[str, Any]) -> lf.Turn:
    return lf.Turn(
        fields["id"],
        fields["sequence"],
        fields["role"],
        fields["body"],
        protected=fields["protected"],
        protection_reason=fields["protection_reason"],
        group=fields["group"],
        meta=fields["meta"],
    )


def run_in_pool(tasks: list[Callable[[], object]]) -> list[object]:
    """Run every task on a pool of `WORKERS` threads released together; results in order."""
    barrier = threading.Barrier(WORKERS)

    def start_together(task: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            # Fewer tasks than workers left at the end: run anyway.
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=30)
            return task()

        return run

    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(start_together(task)) for task in tasks]
        return [future.result() for future in futures]


# ---------------------------------------------------------------- native functions


def test_native_functions_on_shared_objects_match_single_threaded_results() -> None:
    fields = turn_fields(300)
    turns = [make_turn(f) for f in fields]
    conversation = lf.Conversation("c", 9, reversed(turns))
    plan = lf.plan_compaction(conversation, 20, "plan-1")
    envelope = lf.create_summary_envelope(plan, conversation, "s-1", POLICY, "summary text")
    assert envelope is not None
    edited = lf.Conversation(
        "c",
        10,
        [t.replace(body=t.body + "!") if t.id == plan.compacted_ids[3] else t for t in turns],
    )
    shuffled = turns[:]
    random.Random(3).shuffle(shuffled)

    def everything() -> tuple[object, ...]:
        """Every native entry point, on the shared objects (and fresh ones from them)."""
        rebuilt = [make_turn(f) for f in fields]
        return (
            [t.digest for t in rebuilt],
            rebuilt == turns,
            lf.Conversation("c", 9, shuffled).turn_ids,
            lf.Conversation("c", 9, shuffled) == conversation,
            lf.fingerprint_turns(conversation.turns),
            lf.fingerprint_turns(turns[::2]),
            lf.same_ordered_ids(conversation.turn_ids, [t.id for t in turns]),
            lf.plan_compaction(conversation, 20, "plan-1"),
            lf.plan_compaction(conversation, 7, "plan-2"),
            lf.create_summary_envelope(plan, conversation, "s-1", POLICY, "summary text"),
            lf.check_summary(envelope, conversation, POLICY),
            lf.check_summary(envelope, edited, POLICY),
            lf.check_summary(envelope, conversation, "policy-2"),
            lf.assemble_context(conversation, envelope, POLICY),
            lf.assemble_context(edited, envelope, POLICY),
            lf.assemble_context(conversation, None, POLICY),
            conversation.get(turns[17].id),
            pickle.loads(pickle.dumps(conversation)) == conversation,
            [hash(t) for t in turns[:50]],
            turns[5].replace(protected=True, protection_reason="audit-evidence").digest,
        )

    expected = everything()
    # Sanity: the results are not trivial (a summary is used, the edit is detected).
    assert expected[10] == lf.SummaryCheck(True)
    assert expected[11].current is False  # type: ignore[attr-defined]
    assert expected[13].fallback is None  # type: ignore[attr-defined]
    results = run_in_pool([everything for _ in range(WORKERS * 6)])
    for result in results:
        assert result == expected
    # assemble_context pauses the cyclic collector while it builds items: never for good.
    assert gc.isenabled()


def test_building_turns_and_conversations_concurrently() -> None:
    """Each worker builds its own conversation from its own turns while others do too."""
    fields = turn_fields(200)

    def build(offset: int) -> tuple[str, str]:
        turns = [make_turn({**f, "id": f"{offset}-{f['id']}"}) for f in fields]
        conversation = lf.Conversation(f"c{offset}", 0, turns)
        return conversation.id, lf.fingerprint_turns(conversation.turns)

    expected = [build(offset) for offset in range(WORKERS * 4)]
    assert len({fingerprint for _, fingerprint in expected}) == len(expected)
    assert run_in_pool([lambda offset=offset: build(offset) for offset in range(WORKERS * 4)]) == (
        expected
    )


def test_bad_input_in_threads_raises_invalid_input_only() -> None:
    def bad(index: int) -> str:
        try:
            lf.Turn(f"t{index}", -index - 1, "user", "body")
        except lf.InvalidInput as error:
            return f"{error.code}:{error.field}"
        return "accepted"

    assert run_in_pool([lambda i=i: bad(i) for i in range(WORKERS * 8)]) == (
        ["invalid-input:sequence"] * (WORKERS * 8)
    )


# ---------------------------------------------------------------- a shared store


class Workload:
    """Threads appending, assembling and compacting; what each did, for the final check."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.appended: dict[str, list[str]] = {}  # conversation -> appended IDs
        self.appends: Counter[str] = Counter()  # conversation -> append calls
        self.outcomes: dict[str, list[lf.CompactionOutcome]] = {}
        self.errors: list[BaseException] = []

    def note_append(self, conversation: str, turn: lf.Turn) -> None:
        with self.lock:
            self.appended.setdefault(conversation, []).append(turn.id)
            self.appends[conversation] += 1

    def note_outcome(self, conversation: str, outcome: lf.CompactionOutcome) -> None:
        with self.lock:
            self.outcomes.setdefault(conversation, []).append(outcome)


def hammer(
    store_for: Callable[[int], lf.SQLiteStore], workload: Workload, worker: int, rounds: int
) -> None:
    """One worker: appends to its own and to the shared conversation, assembles contexts,
    compacts both (through a Compactor of its own and through a shared one)."""
    rng = random.Random(worker)
    store = store_for(worker)
    own = f"own-{worker}"
    policy = lf.CompactionPolicy(POLICY, min_new_turns=1, keep_tail=3, keep_versions=None)
    compactor = lf.Compactor(store, policy)
    previous_sequence: dict[str, int] = {}
    try:
        for round_ in range(rounds):
            for conversation in (own, "shared"):
                protected = rng.random() < 0.2
                turn = store.append(
                    conversation,
                    rng.choice(ROLES),
                    f"worker {worker} round {round_} \u2028 secret body",
                    id=f"w{worker}-r{round_}-{conversation}",
                    protected=protected,
                    protection_reason="active-constraint" if protected else None,
                )
                # This worker's own turns come in the order it appended them.
                assert turn.sequence > previous_sequence.get(conversation, 0)
                previous_sequence[conversation] = turn.sequence
                workload.note_append(conversation, turn)
            for conversation in (own, "shared"):
                context = store.context(conversation, POLICY)
                assert len(context.ids) == len(set(context.ids))
                if rng.random() < 0.5:
                    outcome = compactor.compact(conversation, force=rng.random() < 0.3)
                    workload.note_outcome(conversation, outcome)
    except BaseException as error:  # collected, asserted on by the test
        with workload.lock:
            workload.errors.append(error)


def check_consistent(path: Path, workload: Workload, keep_tail: int) -> None:
    assert workload.errors == [], workload.errors  # nothing here is bad input
    with lf.SQLiteStore(path) as store:
        assert store.conversation_ids() == sorted(workload.appended)
        for conversation, ids in workload.appended.items():
            ledger = store.load(conversation)
            sequences = [turn.sequence for turn in ledger.turns]
            assert sequences == sorted(set(sequences))  # unique and increasing
            assert sequences == list(range(1, len(ids) + 1))  # none lost, none reused
            assert sorted(ledger.turn_ids) == sorted(ids)  # counts add up
            assert ledger.revision == workload.appends[conversation]  # one per append
            outcomes = workload.outcomes.get(conversation, [])
            history = store.summary_history(conversation)
            assert sum(record.status == "current" for record in history) <= 1
            # Every attempt that got past planning left exactly one record, besides the
            # `failed`/`abandoned` record of a plan superseded before it ended (SPEC §15.8).
            abandoned = sum(r.status == "failed" and r.reason == "abandoned" for r in history)
            attempts = sum(outcome.status != "skipped" for outcome in outcomes)
            assert len(history) - abandoned == attempts
            assert {o.status for o in outcomes} <= {"accepted", "skipped", "stale"}
            accepted = {o.summary.id for o in outcomes if o.summary is not None}
            assert accepted == {
                record.envelope.id
                for record in history
                if record.status in ("current", "superseded") and record.envelope is not None
            }
            context = store.context(conversation, POLICY)
            raw = {item.id for item in context.items if isinstance(item, TurnItem)}
            summaries = [item for item in context.items if isinstance(item, SummaryItem)]
            sources = set(summaries[0].source_ids) if summaries else set()
            assert not raw & sources
            assert raw | sources == set(ledger.turn_ids)
            for turn in ledger.turns:
                if turn.protected:
                    assert turn.id in raw
            for turn in ledger.turns[-keep_tail:]:
                assert turn.id in raw
            current = store.current_summary(conversation)
            if summaries:
                assert current is not None
                assert lf.check_summary(current, ledger, POLICY).current
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


@pytest.mark.parametrize("sharing", ["one-shared-store", "one-store-per-thread"])
def test_store_shared_by_threads_stays_consistent(tmp_path: Path, sharing: str) -> None:
    path = tmp_path / "ledger.db"
    shared = lf.SQLiteStore(path)
    per_thread: dict[int, lf.SQLiteStore] = {}

    def store_for(worker: int) -> lf.SQLiteStore:
        if sharing == "one-shared-store":
            return shared
        per_thread[worker] = lf.SQLiteStore(path)
        return per_thread[worker]

    workload = Workload()
    try:
        run_in_pool([lambda w=w: hammer(store_for, workload, w, 12) for w in range(WORKERS)])
    finally:
        shared.close()
        for store in per_thread.values():
            store.close()
    check_consistent(path, workload, keep_tail=3)
    assert workload.appends["shared"] == WORKERS * 12
    # The shared conversation really was compacted concurrently, by several threads.
    assert len(workload.outcomes["shared"]) > 1


def test_one_compactor_shared_by_threads(tmp_path: Path) -> None:
    """A `Compactor` keeps no per-call state: one instance may serve several threads."""
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        compactor = lf.Compactor(
            store, lf.CompactionPolicy(POLICY, min_new_turns=1, keep_tail=2, keep_versions=None)
        )
        workload = Workload()

        def work(worker: int) -> None:
            conversation = f"c{worker % 3}"
            try:
                for round_ in range(10):
                    turn = store.append(conversation, "user", f"w{worker} r{round_}")
                    workload.note_append(conversation, turn)
                    workload.note_outcome(conversation, compactor.compact(conversation))
                    compactor.context(conversation)
            except BaseException as error:
                with workload.lock:
                    workload.errors.append(error)

        run_in_pool([lambda w=w: work(w) for w in range(WORKERS)])
    check_consistent(path, workload, keep_tail=2)
