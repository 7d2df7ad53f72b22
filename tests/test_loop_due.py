"""The agent loop (SPEC §15), checked black-box through the public API on real transcripts and a
real SQLite file. When a compaction is due (SPEC §15.2): `min_new_turns`, the default policy's
hysteresis, the trigger over the assembled context, the back-off across a restart, and what
`force` bypasses."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, create_summary_envelope

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from loop_support import CONV, Recorder, real_bodies, talk, words  # noqa: E402

# -- §15.2 bounded cost ---------------------------------------------------------------------


def test_min_new_turns_and_a_not_due_call_registers_nothing(store: SQLiteStore) -> None:
    bodies = real_bodies(30)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1", keep_tail=2, min_new_turns=8), recorder)
    talk(store, bodies, 0, 9)  # 7 compactable
    assert compactor.compact(CONV).reason == "not-due"
    assert recorder.requests == [] and store.summary_history(CONV) == []
    talk(store, bodies, 9, 1)  # 8 compactable
    assert compactor.compact(CONV).accepted
    talk(store, bodies, 10, 7)
    assert compactor.compact(CONV).reason == "not-due"
    talk(store, bodies, 17, 1)
    assert compactor.compact(CONV).accepted
    assert [len(request.turns) for request in recorder.requests] == [8, 8]
    assert [record.status for record in store.summary_history(CONV)] == ["superseded", "current"]


def test_the_default_policy_does_not_compact_on_every_turn(store: SQLiteStore) -> None:
    """Regression: with `trigger_tokens=None` the summarizer ran 26 times in 30 exchanges."""
    bodies = real_bodies(60)
    recorder = Recorder()
    compactor = Compactor(store, CompactionPolicy("v1"), recorder)
    for index in range(60):
        talk(store, bodies, index, 1)
        compactor.compact(CONV)
    assert 1 <= len(recorder.requests) <= 60 // 8
    assert all(len(request.turns) >= 8 for request in recorder.requests)


def test_only_a_due_compaction_abandons_an_unfinished_plan(store: SQLiteStore) -> None:
    """§15.8: due-ness is decided before a plan is registered; the plan left without a
    record gets failed/abandoned when the next one registers, and its late result is
    still refused as superseded-plan."""
    talk(store, real_bodies(10), 0, 6)
    unfinished = store.start_plan(CONV, 2, "v1")
    for policy in (
        CompactionPolicy("v1", keep_tail=2, min_new_turns=8),
        CompactionPolicy("v1", keep_tail=2, min_new_turns=1, trigger_tokens=1_000_000),
    ):
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
        assert store.summary_history(CONV) == []
    due = CompactionPolicy("v1", keep_tail=2, min_new_turns=1)
    assert Compactor(store, due, Recorder()).compact(CONV).accepted
    records = [(record.status, record.reason) for record in store.summary_history(CONV)]
    assert records == [("failed", "abandoned"), ("current", None)]
    late = create_summary_envelope(unfinished, store.load(CONV), "late", "v1", "late text")
    assert store.commit_summary(late).detail == "superseded-plan"


def test_trigger_counts_the_assembled_context(store: SQLiteStore) -> None:
    long_body = " ".join(["word"] * 200)
    for index in range(12):
        store.append(CONV, "user", f"{long_body} {index}", id=f"t{index}")
    policy = CompactionPolicy(
        "v1", keep_tail=2, trigger_tokens=600, min_new_turns=2, token_counter=words
    )
    compactor = Compactor(store, policy, lambda request: "short")
    assert compactor.compact(CONV).accepted  # 12 x 200 words raw: over the trigger
    # The raw ledger is far over the trigger, the assembled context is not.
    for index in range(12, 16):
        store.append(CONV, "user", f"tiny {index}", id=f"t{index}")
    assert compactor.compact(CONV).reason == "not-due"
    # A summary that alone is over the trigger makes it due, but only with new turns enough.
    wordy = Compactor(store, policy, lambda request: " ".join(["fact"] * 900))
    assert wordy.compact(CONV, force=True).accepted
    store.append(CONV, "user", "one more", id="t16")
    assert wordy.compact(CONV).reason == "not-due"  # 1 new < min_new_turns
    store.append(CONV, "user", "and another", id="t17")
    assert wordy.compact(CONV).accepted


def test_backoff_doubles_per_failure_caps_at_64x_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    bodies = real_bodies(200)
    policy = CompactionPolicy("v1", keep_tail=1, min_new_turns=2)
    with SQLiteStore(path) as store:
        talk(store, bodies, 0, 3)  # 2 new
        assert Compactor(store, policy, Recorder(fail=True)).compact(CONV).status == "failed"
        talk(store, bodies, 3, 1)  # 3 new: 4 needed after one failure
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
    with SQLiteStore(path) as store:  # a restart: the streak is read from the store
        assert store.consecutive_failures(CONV) == 1
        talk(store, bodies, 4, 1)  # 4 new
        assert Compactor(store, policy, Recorder(fail=True)).compact(CONV).status == "failed"
        talk(store, bodies, 5, 3)  # 7 new: 8 needed after two
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
        # force bypasses the back-off; forced failures count all the same.
        for _ in range(6):
            outcome = Compactor(store, policy, Recorder(fail=True)).compact(CONV, force=True)
            assert outcome.status == "failed"
    with SQLiteStore(path) as store:
        assert store.consecutive_failures(CONV) == 8
        talk(store, bodies, 8, 120)  # 127 new: the cap is 2 x 2**6 = 128
        assert Compactor(store, policy, Recorder()).compact(CONV).reason == "not-due"
        talk(store, bodies, 128, 1)
        assert Compactor(store, policy, Recorder()).compact(CONV).accepted
        assert store.consecutive_failures(CONV) == 0
        talk(store, bodies, 129, 2)  # back to min_new_turns after a success
        assert Compactor(store, policy, Recorder()).compact(CONV).accepted


def test_force_bypasses_trigger_min_new_turns_and_backoff_but_not_emptiness(
    store: SQLiteStore,
) -> None:
    bodies = real_bodies(20)
    policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=100_000, min_new_turns=8)
    talk(store, bodies, 0, 3)  # one compactable turn, far under the trigger
    assert Compactor(store, policy, Recorder(fail=True)).compact(CONV, force=True).reason == (
        "summarizer-error"
    )
    recorder = Recorder()
    outcome = Compactor(store, policy, recorder).compact(CONV, force=True)
    assert outcome.accepted and [turn.id for turn in recorder.requests[0].turns] == ["t0"]
    history = len(store.summary_history(CONV))
    outcome = Compactor(store, policy, recorder).compact(CONV, force=True)
    assert (outcome.status, outcome.reason) == ("skipped", "nothing-to-compact")
    assert len(recorder.requests) == 1 and len(store.summary_history(CONV)) == history


# -- §15.8 below the trigger: only what is due at once --------------------------------------


class AskingStore:
    """A store that keeps what every `begin_compaction` call asked."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.asked: list[dict[str, object]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def begin_compaction(
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        *,
        preserve_roles: Iterable[str] = (),
        min_new_turns: int = 1,
        only_due_at_once: bool = False,
    ) -> Any:
        self.asked.append({"min_new_turns": min_new_turns, "only_due_at_once": only_due_at_once})
        return self.inner.begin_compaction(
            conversation_id,
            keep_tail,
            policy_version,
            preserve_roles=preserve_roles,
            min_new_turns=min_new_turns,
            only_due_at_once=only_due_at_once,
        )


class V11Store(AskingStore):
    """A store of v1.1's protocol: its `begin_compaction` takes no `only_due_at_once`."""

    def begin_compaction(  # type: ignore[override]
        self,
        conversation_id: str,
        keep_tail: int,
        policy_version: str,
        *,
        preserve_roles: Iterable[str] = (),
        min_new_turns: int = 1,
    ) -> Any:
        self.asked.append({"min_new_turns": min_new_turns})
        return self.inner.begin_compaction(
            conversation_id,
            keep_tail,
            policy_version,
            preserve_roles=preserve_roles,
            min_new_turns=min_new_turns,
        )


def _policy(trigger_tokens: int) -> CompactionPolicy:
    return CompactionPolicy("v1", keep_tail=2, trigger_tokens=trigger_tokens, min_new_turns=2)


def test_below_the_trigger_the_store_is_asked_only_what_is_due_at_once(
    store: SQLiteStore,
) -> None:
    """A flag, not a turn count no ledger reaches; over the trigger, the count (back-off
    included)."""
    asking = AskingStore(store)
    talk(store, real_bodies(10), 0, 6)  # 4 new: enough for min_new_turns
    below = Compactor(asking, _policy(100_000), Recorder())  # type: ignore[arg-type]
    assert below.compact(CONV).reason == "not-due"
    assert asking.asked == [{"min_new_turns": 1, "only_due_at_once": True}]
    over = Compactor(asking, _policy(10), Recorder())  # type: ignore[arg-type]
    assert over.compact(CONV).accepted
    assert asking.asked[1:] == [{"min_new_turns": 2, "only_due_at_once": False}]


def test_a_v11_store_is_not_asked_below_the_trigger(store: SQLiteStore) -> None:
    """Its `begin_compaction` cannot be asked for only what is due at once: below the
    trigger the compaction is not due (v1.1's behaviour); over it, the store is asked."""
    old = V11Store(store)
    talk(store, real_bodies(10), 0, 6)
    below = Compactor(old, _policy(100_000), Recorder())  # type: ignore[arg-type]
    assert below.compact(CONV).reason == "not-due"
    assert old.asked == [] and store.summary_history(CONV) == []
    over = Compactor(old, _policy(10), Recorder())  # type: ignore[arg-type]
    assert over.compact(CONV).accepted
    assert old.asked == [{"min_new_turns": 2}]


class Forwarding:
    """A proxy of one's own that forwards every call as ``*args, **kwargs`` (no
    `functools.wraps`): the Compactor cannot tell from its signatures which keywords the
    store behind it takes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            return target(*args, **kwargs)

        return call


def test_a_v11_store_behind_a_kwargs_proxy_is_asked_as_v11(store: SQLiteStore) -> None:
    """Below the trigger the proxy is asked `only_due_at_once` once; the v1.1 store behind it
    refuses the keyword, so the compaction is not due (as for v1.1) and it is not asked so
    again; over the trigger, compaction and pruning (which a v1.1 store does without
    `keep_checkpoints`) work: nothing escapes `compact()` after its summary was saved."""
    from test_checkpoints import V11Store as PrunesAsV11

    old = V11Store(store)
    proxy = Forwarding(old)
    talk(store, real_bodies(10), 0, 6)
    below = Compactor(proxy, _policy(100_000), Recorder())  # type: ignore[arg-type]
    assert below.compact(CONV).reason == "not-due"
    assert below.compact(CONV).reason == "not-due"
    assert old.asked == [] and store.summary_history(CONV) == []

    pruning = PrunesAsV11.__new__(PrunesAsV11)
    pruning.inner, pruning.pruned = store, []
    keep = CompactionPolicy("v1", keep_tail=2, trigger_tokens=10, min_new_turns=2, keep_versions=1)
    over = Compactor(Forwarding(pruning), keep, Recorder())  # type: ignore[arg-type]
    for round_ in range(3):
        talk(store, real_bodies(10), 6 + 4 * round_, 4)
        assert over.compact(CONV).accepted
    assert pruning.pruned == [1, 1, 1]
