"""Checkpoints and rebuilding after an edit (SPEC §17.5, issue 28 item 5), on real SQLite
files: pruning keeps spaced ancestors of the current summary; an edit or retraction of a
covered turn is rebuilt from the newest checkpoint it left unchanged, never from a text that
saw the turn's old content; a purge keeps the sealed base and erases every other checkpoint
citing a purged turn; with no sealed base left, the loss is reported."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import SQLiteStore
from ledgerfold._checkpoints import Record, lineage, links, rebuild_from, spaced_checkpoints

CONV = "c"
PV = "v1"


class Recorder:
    """A summarizer whose texts are unique and that records, per text, the turn contents it
    was derived from (its request's turns plus everything its previous text was derived
    from): the lineage oracle."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.requests: list[lf.SummaryRequest] = []
        self.derived: dict[str, dict[str, str]] = {}  # text -> turn ID -> body it saw
        self.violations: list[str] = []  # turns whose old content a previous text saw

    def __call__(self, request: lf.SummaryRequest) -> str:
        self.requests.append(request)
        ledger = {turn.id: turn.body for turn in self.store.load(request.conversation_id).turns}
        derived: dict[str, str] = {}
        if request.previous_summary is not None:
            derived.update(self.derived[request.previous_summary])
            # SPEC §17.5: the previous text never saw content the ledger no longer holds.
            # (Recorded, not raised: the Compactor would take an exception for a failure.)
            self.violations.extend(
                turn_id for turn_id, body in derived.items() if ledger.get(turn_id, body) != body
            )
        derived.update((item.id, ledger[item.id]) for item in request.turns)
        text = f"S{len(self.requests)}: " + " ".join(item.id for item in request.turns)
        self.derived[text] = derived
        return text


def policy(**changes: object) -> lf.CompactionPolicy:
    settings_: dict[str, object] = {"keep_tail": 2, "min_new_turns": 4, "keep_versions": 2}
    settings_.update(changes)
    return lf.CompactionPolicy(PV, **settings_)  # type: ignore[arg-type]


def talk(store: SQLiteStore, start: int, count: int) -> None:
    for n in range(start, start + count):
        store.append(CONV, "user" if n % 2 else "assistant", f"turn {n} says {n * 7}", id=f"t{n}")


def session(store: SQLiteStore, compactor: lf.Compactor, rounds: int) -> None:
    for round_ in range(rounds):
        talk(store, 4 * round_, 4)
        compactor.compact(CONV)


def accepted(store: SQLiteStore) -> list[lf.SummaryEnvelope]:
    return [
        record.envelope
        for record in store.summary_history(CONV)
        if record.envelope is not None and record.status in ("current", "superseded", "stale")
    ]


# -- the pure rules -------------------------------------------------------------------------


def test_spaced_checkpoints_halve_back_from_the_head() -> None:
    ancestors = [Record(n, f"s{n}", f"s{n - 1}", 1, 8 * n) for n in range(1, 128)]
    chosen = spaced_checkpoints(1024, ancestors, 8)
    backs = sorted(1024 - 8 * pk for pk in chosen)
    # Coverage ends 1/2, 1/4 … 1/128 back, each on a power-of-two grid (between g and 2g
    # back), and the bridge at the finest grid line behind the head.
    assert backs == [8, 16, 32, 64, 128, 256, 512]  # here the bridge is the 8-back one
    # Off the grid: the bridge is the newest version at or behind the finest grid line.
    off = sorted(1020 - 8 * pk for pk in spaced_checkpoints(1020, ancestors[:-1], 8))
    assert off == [12, 28, 60, 124, 252, 508]  # versions 8 apart: the finest levels meet
    assert spaced_checkpoints(1024, ancestors, 0) == set()
    assert len(spaced_checkpoints(1024, ancestors, 1)) == 1


@settings(max_examples=60, deadline=None)
@given(
    per=st.integers(1, 16),
    steps=st.integers(2, 400),
    keep_versions=st.integers(0, 4),
    back=st.floats(0.0, 1.0),
)
def test_pruned_repeatedly_an_edit_d_back_rereads_about_2d(
    per: int, steps: int, keep_versions: int, back: float
) -> None:
    """The rule applied after every commit (as pruning does) keeps, for an edit d turns
    back (beyond the finest level), a checkpoint at most 3d + one step back, whatever
    `keep_versions`: it never collapses as the head grows."""
    records: list[Record] = []
    for n in range(1, steps + 1):
        records.append(Record(n, f"s{n}", f"s{n - 1}" if n > 1 else None, 1, per * n))
        head = records[-1]
        ancestors = lineage(records, head.pk)
        kept = {r.pk for r in ancestors[:keep_versions]} | {head.pk}
        kept |= spaced_checkpoints(head.count, ancestors, 8)
        records = [r for r in records if r.pk in kept]
    covered = per * steps
    d = max(1, int(back * covered))
    best = max((r.count for r in lineage(records, steps) if r.count <= covered - d), default=0)
    if d <= covered >> 7:
        return  # nearer than the finest checkpoint level: keep_versions' business
    assert covered - best <= 3 * d + per


def test_lineage_follows_parents_and_run_prefixes_and_links_keep_the_way() -> None:
    records = [
        Record(1, "a", None, 1, 8),
        Record(2, "b", "a", 1, 16),
        Record(3, "stale", "b", 1, 24),
        Record(4, "rebuilt", "b", 2, 20),  # a rebuild from b: a run of its own
        Record(5, "next", "rebuilt", 2, 28),
        Record(6, "other", None, 3, 12),  # a rebase elsewhere: no ancestor of anything here
    ]
    assert [r.id for r in lineage(records, 5)] == ["rebuilt", "b", "a"]
    assert [r.id for r in lineage(records, 3)] == ["b", "a"]
    assert lineage(records, 6) == () and lineage(records, 99) == ()
    # Keeping `a` needs the crossing from run 2 into run 1 kept: `rebuilt` and `b`.
    assert links(records, 5, {1}) == {4, 2}
    assert links(records, 5, set()) == set()
    # Without the link `rebuilt` the way to `a` is lost (its run holds only `next`).
    cut = [r for r in records if r.id not in ("rebuilt",)]
    assert [r.id for r in lineage(cut, 5)] == []
    assert rebuild_from([(9, False), (7, True), (5, True)]) == 7
    assert rebuild_from(iter([(9, False)])) is None


# -- pruning keeps checkpoints --------------------------------------------------------------


def test_pruning_keeps_spaced_ancestors_beyond_keep_versions(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy(), Recorder(store))
        session(store, compactor, 40)
        kept = accepted(store)
        current = store.current_summary(CONV)
        assert current is not None and kept[-1] == current
        covered = len(current.source_ids)
        older = [len(e.source_ids) for e in kept[:-3]]  # beyond keep_versions=2
        assert len(older) >= 4
        # Spread back to about half the covered turns, not only the newest few.
        assert min(older) <= covered // 2
        # keep_checkpoints=0: keep_versions exactly.
        assert store.prune_versions(CONV, keep=2, keep_checkpoints=0) == len(older)
        assert len(accepted(store)) == 3


# -- rebuilding after an edit ----------------------------------------------------------------


@pytest.mark.parametrize("change", ["edit", "retract"])
def test_an_edit_of_a_recent_covered_turn_rebuilds_from_the_newest_unchanged_checkpoint(
    tmp_path: Path, change: str
) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder(store)
        compactor = lf.Compactor(store, policy(), recorder)
        session(store, compactor, 30)
        stale = store.current_summary(CONV)
        assert stale is not None
        victim = stale.source_ids[-6]  # a recent turn of the current summary
        if change == "edit":
            store.edit(CONV, victim, body="corrected")
        else:
            store.retract(CONV, victim)
        kept = {e.id: e for e in accepted(store) if e.id != stale.id}
        unchanged = [e for e in kept.values() if victim not in e.source_ids]
        newest = max(unchanged, key=lambda e: len(e.source_ids))
        requests = len(recorder.requests)
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == newest.id  # not a rebase
        request = recorder.requests[requests]
        assert request.previous_summary == newest.text
        assert request.covered_count == len(newest.source_ids)
        assert request.previous_summary != stale.text
        # Only the turns after the checkpoint's coverage are read (the tail of 2 stays raw).
        live = [turn.id for turn in store.load(CONV).turns][:-2]
        after = [i for i in live if i not in newest.source_ids]
        assert [item.id for item in request.turns] == after
        assert (victim in after) == (change == "edit")
        assert outcome.summary.source_ids[: len(newest.source_ids)] == newest.source_ids
        assert store.context(CONV, PV).fallback is None
        assert recorder.violations == []


def test_an_edit_no_checkpoint_survives_is_a_rebase(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder(store)
        compactor = lf.Compactor(store, policy(), recorder)
        session(store, compactor, 12)
        first = store.current_summary(CONV)
        assert first is not None
        store.edit(CONV, first.source_ids[0], body="corrected")  # every version covers it
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is None
        assert recorder.requests[-1].previous_summary is None


def test_a_checkpoint_edited_after_planning_is_refused_at_commit(tmp_path: Path) -> None:
    """The commit checks the checkpoint on the ledger again (SPEC §15.4, §17.1)."""
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy(), Recorder(store))
        session(store, compactor, 20)
        stale = store.current_summary(CONV)
        assert stale is not None
        store.edit(CONV, stale.source_ids[-3], body="corrected")
        work = store.begin_compaction(CONV, 2, PV)
        assert work.plan is not None and work.parent is not None
        store.edit(CONV, work.parent.source_ids[-1], body="corrected again")
        envelope = lf.SummaryEnvelope(
            id="late",
            plan_id=work.plan.plan_id,
            conversation_id=CONV,
            source_revision=work.plan.source_revision,
            source_ids=work.plan.compacted_ids,
            source_fingerprint="0" * 64,
            policy_version=PV,
            text="late",
            parent_id=work.parent.id,
        )
        write = store.commit_summary(envelope)
        assert not write.accepted and write.reason == "stale-source"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    actions=st.lists(
        st.tuples(st.sampled_from(["talk", "edit", "retract", "compact"]), st.floats(0, 1)),
        min_size=10,
        max_size=60,
    ),
    max_input_tokens=st.sampled_from([10**6, 30]),
)
def test_lineage_stays_sound_under_edits(
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    actions: list[tuple[str, float]],
    max_input_tokens: int,
) -> None:
    """SPEC §15.1 under §17.5: whatever is edited or retracted, every summary in a context
    was derived only from turns as the ledger holds them now, and the summarizer never gets
    a previous text derived from an edited turn's old content (the Recorder asserts it)."""
    path = tmp_path_factory.mktemp("lineage") / "ledger.db"
    rng = random.Random(seed)
    with SQLiteStore(path) as store:
        recorder = Recorder(store)
        compactor = lf.Compactor(
            store, policy(min_new_turns=2, max_input_tokens=max_input_tokens), recorder
        )
        written = 0
        talk(store, 0, 8)
        written = 8
        for action, where in actions:
            turns = store.load(CONV).turns
            if action == "talk":
                talk(store, written, 3)
                written += 3
            elif action in ("edit", "retract") and len(turns) > 3:
                victim = turns[min(len(turns) - 1, int(where * len(turns)))]
                if action == "edit":
                    store.edit(CONV, victim.id, body=f"{victim.body} (v{rng.random():.6f})")
                else:
                    store.retract(CONV, victim.id)
            outcome = compactor.compact(CONV)
            assert outcome.status != "failed"
            assert recorder.violations == []
            if outcome.accepted and outcome.summary is not None:
                assert outcome.summary.text in recorder.derived
            context = store.context(CONV, PV)
            ledger = {turn.id: turn.body for turn in store.load(CONV).turns}
            if context.summary is not None:
                derived = recorder.derived[context.summary.text]
                assert set(derived) == set(context.summary.source_ids)
                for turn_id, body in derived.items():
                    assert ledger[turn_id] == body


# -- purge: the sealed base ------------------------------------------------------------------


def test_a_purge_keeps_the_sealed_base_and_an_edit_is_rebuilt_from_it(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder(store)
        compactor = lf.Compactor(store, policy(), recorder)
        session(store, compactor, 20)
        versions = accepted(store)
        current = versions[-1]
        # Purge through the end of an older version's coverage: it is wholly purged.
        base = versions[-3]
        through = max(int(i[1:]) for i in base.source_ids) + 1  # sequences start at 1
        store.purge_through(CONV, through, "retention")
        left = {e.id: e for e in accepted(store)}
        assert base.id in left and current.id in left  # the sealed summary and its base
        purged = set(base.source_ids)
        for envelope in left.values():  # every other version citing a purged turn is gone
            assert envelope.id in (base.id, current.id) or not purged & set(envelope.source_ids)
        # An edit of a live source of the sealed summary: rebuilt on the sealed base.
        live_source = next(i for i in current.source_ids if i not in purged)
        store.edit(CONV, live_source, body="corrected")
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id == base.id
        assert recorder.requests[-1].previous_summary == base.text
        assert set(purged) <= set(outcome.summary.source_ids)
        context = store.context(CONV, PV)
        assert context.fallback is None and context.summary is not None
        assert store.stats(CONV).sealed_lost == 0


def test_with_no_sealed_base_the_loss_of_the_purged_summary_is_reported(tmp_path: Path) -> None:
    events: list[lf.Event] = []
    with SQLiteStore(tmp_path / "ledger.db") as store:
        recorder = Recorder(store)
        compactor = lf.Compactor(store, policy(), recorder, on_event=events.append)
        session(store, compactor, 10)
        current = store.current_summary(CONV)
        assert current is not None
        # Purge part of the first version's coverage: no version is wholly purged.
        store.purge_through(CONV, 2, "retention")
        assert store.stats(CONV).sealed_lost == 0
        live_source = next(i for i in current.source_ids if i not in ("t0", "t1"))
        store.edit(CONV, live_source, body="corrected")
        outcome = compactor.compact(CONV)
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is None  # a rebase of the live turns
        lost = [e for e in events if e.name == "summary.sealed-lost"]
        assert len(lost) == 1 and lost[0].summary_ids == (outcome.summary.id,)
        assert store.stats(CONV).sealed_lost == 1
        assert store.stats().as_dict()["sealed_lost"] == 1


def test_erasure_removes_every_checkpoint_citing_the_erased_turn(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "ledger.db") as store:
        compactor = lf.Compactor(store, policy(), Recorder(store))
        session(store, compactor, 30)
        versions = accepted(store)
        assert len(versions) > 4
        victim = versions[1].source_ids[-1]  # cited by nearly every checkpoint
        store.retract(CONV, victim, erase=True)
        for envelope in accepted(store):
            assert victim not in envelope.source_ids
        for record in store.summary_history(CONV):
            assert record.envelope is None or victim not in record.envelope.source_ids


class V11Store:
    """A store of the v1.1 protocol: its `prune_versions` takes no `keep_checkpoints`."""

    def __init__(self, path: Path) -> None:
        self.inner = SQLiteStore(path)
        self.pruned: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def prune_versions(
        self, conversation_id: str | None = None, keep: int = 4, older_than: float | None = None
    ) -> int:
        self.pruned.append(keep)
        return self.inner.prune_versions(conversation_id, keep, older_than, keep_checkpoints=0)


def test_a_v11_store_is_pruned_without_checkpoints(tmp_path: Path) -> None:
    store = V11Store(tmp_path / "ledger.db")
    try:
        compactor = lf.Compactor(store, policy(), Recorder(store.inner))  # type: ignore[arg-type]
        session(store.inner, compactor, 12)
        assert store.pruned and set(store.pruned) == {2}
        assert len(accepted(store.inner)) == 3  # keep_versions + the current one
    finally:
        store.inner.close()
