"""The extendable fingerprint (`_native.SourceDigests`) and the rolling commit path that
uses it: a compaction that extends a summary over N covered turns neither hashes the N stored
digests again nor compares the N covered IDs one by one (SPEC §15.2: store work follows the
new turns), and still produces byte-exact fingerprint v1 (SPEC §3), checked here against the
slow pure-Python reference."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import _native
from ledgerfold import _plan as plan
from ledgerfold._native import SourceDigests
from ledgerfold.store import _commit as commit
from ledgerfold.store import _compaction as compaction

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import reference as ref  # noqa: E402


def _digests(count: int, seed: int = 0) -> bytes:
    return b"".join(
        hashlib.blake2s(f"{seed}:{i}".encode(), digest_size=32).digest() for i in range(count)
    )


# -- the state against the reference -----------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(st.integers(0, 90), max_size=6),
    more=st.integers(0, 70),
    seed=st.integers(0, 2**16),
)
def test_any_chain_of_extensions_gives_the_reference_fingerprint(
    steps: list[int], more: int, seed: int
) -> None:
    # Chunk 0 holds the count and 31.75 digests; later chunks 32 each: the lengths drawn
    # cross and land on chunk boundaries (the count prefix changes with every extension).
    total = sum(steps) + more
    digests = _digests(total, seed)
    state = SourceDigests()
    held = 0
    for step in steps:
        before = state
        state = state.extended(digests[held * 32 : (held + step) * 32])
        held += step
        assert len(state) == held
        assert state.fingerprint() == ref.fingerprint_digests(digests[: held * 32])
        assert len(before) == held - step  # `extended` leaves the original as it was
    assert state.fingerprint(digests[held * 32 :]) == ref.fingerprint_digests(digests)
    fresh = SourceDigests(digests[: held * 32])
    assert fresh.fingerprint(digests[held * 32 :]) == ref.fingerprint_digests(digests)


@pytest.mark.parametrize("count", [0, 1, 31, 32, 33, 63, 64, 65, 1_023, 1_024, 1_025, 40_000])
def test_the_state_matches_the_plain_fingerprint_around_chunk_boundaries(count: int) -> None:
    digests = _digests(count + 8, count)
    state = SourceDigests(digests[: count * 32])
    expected = ref.fingerprint_digests(digests)
    assert state.fingerprint(digests[count * 32 :]) == expected
    assert state.extended(digests[count * 32 :]).fingerprint() == expected
    assert _native.fingerprint_digests(digests[: count * 32], digests[count * 32 :]) == expected


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: SourceDigests(b"x" * 31), "digests"),
        (lambda: SourceDigests(b"x" * 32).fingerprint(b"y" * 33), "more"),
        (lambda: SourceDigests(b"x" * 32).extended(b"y"), "more"),
    ],
)
def test_a_buffer_that_is_not_whole_digests_is_invalid_input(call: Any, field: str) -> None:
    with pytest.raises(lf.InvalidInput) as raised:
        call()
    assert raised.value.field == field


def test_the_repr_shows_a_count_not_digests() -> None:
    state = SourceDigests(_digests(3))
    assert repr(state) == "SourceDigests(count=3)"


def test_starts_with_ids_is_told_only_by_the_very_tuples_it_built() -> None:
    parent = tuple(f"t{i}" for i in range(50))
    built = plan.extend_ids(parent, ("n1", "n2"))
    assert built == (*parent, "n1", "n2") and plan.starts_with_ids(built, parent)
    # An equal tuple that is another object is compared, not assumed.
    other = tuple(f"t{i}" for i in range(50))
    assert plan.starts_with_ids(built, other)
    assert not plan.starts_with_ids((*other[:-1], "x", "n1"), other)
    assert not plan.starts_with_ids(built, (*parent[:-1], "x"))


# -- the rolling commit path -------------------------------------------------------------


class _Counting:
    """Counts the O(covered) passes a compaction may make."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.hashed: list[int] = []  # digests hashed by the plain (non-extendable) path
        self.built: list[int] = []  # digests read into a new state
        self.compared: list[int] = []  # IDs compared one by one
        real_digests = _native.fingerprint_digests
        real_state = commit.SourceDigests
        real_starts = _native.starts_with_ids

        def fingerprint_digests(digests: bytes, more: bytes | None = None) -> str:
            self.hashed.append(len(digests) // 32)
            return real_digests(digests, more)

        def source_digests(digests: bytes | None = None) -> SourceDigests:
            self.built.append(len(digests or b"") // 32)
            return real_state(digests)

        def starts_with_ids(ids: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
            self.compared.append(len(prefix))
            return real_starts(ids, prefix)

        monkeypatch.setattr(_native, "fingerprint_digests", fingerprint_digests)
        monkeypatch.setattr(commit, "SourceDigests", source_digests)  # a rebase's commit
        monkeypatch.setattr(compaction, "SourceDigests", source_digests)  # read from the index
        monkeypatch.setattr(_native, "starts_with_ids", starts_with_ids)

    def clear(self) -> None:
        self.hashed.clear()
        self.built.clear()
        self.compared.clear()


def _reference_fingerprint(store: lf.SQLiteStore, source_ids: tuple[str, ...]) -> str:
    turns = {turn.id: turn for turn in store.load("c").turns}
    return ref.fingerprint_turns(turns[turn_id] for turn_id in source_ids)


def _append(store: lf.SQLiteStore, start: int, count: int) -> None:
    store.append_many(
        "c",
        [
            {"role": "user" if i % 2 == 0 else "assistant", "body": f"turn {i}"}
            for i in range(start, start + count)
        ],
    )


def test_rolling_compactions_neither_rehash_nor_recompare_what_is_covered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = _Counting(monkeypatch)
    policy = lf.CompactionPolicy("v1", keep_tail=4, min_new_turns=8, max_input_tokens=10**9)
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _append(store, 0, 3_000)
        compactor = lf.Compactor(store, policy, lambda request: "summary")
        rebase = compactor.compact("c")  # over everything: O(ledger)
        assert rebase.accepted and rebase.summary is not None
        # The rebase's commit builds the state from the digests it has just checked.
        assert counting.built == [len(rebase.summary.source_ids)]
        counting.clear()
        statements: list[str] = []
        for round_ in range(5):
            if round_ == 1:  # the first extension reads the rebase's source IDs once
                store._connection().set_trace_callback(statements.append)
            _append(store, 3_000 + 8 * round_, 8)
            outcome = compactor.compact("c")
            assert outcome.accepted and outcome.summary is not None
            envelope = outcome.summary
            assert envelope.parent_id is not None and len(envelope.source_ids) > 2_900
            assert envelope.source_fingerprint == _reference_fingerprint(store, envelope.source_ids)
            assert store.context("c", "v1").fallback is None
        # Every rolling step extends the last state: nothing is read back or hashed again,
        # and after the first no version's source list is read from the index.
        assert counting.built == []
        assert not [s for s in statements if "ORDER BY position" in s]
        assert counting.hashed == []
        assert [n for n in counting.compared if n > 0] == []


def test_a_fresh_store_reads_the_digests_once_and_fingerprints_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = lf.CompactionPolicy("v1", keep_tail=4, min_new_turns=8, max_input_tokens=10**9)
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        _append(store, 0, 1_500)
        assert lf.Compactor(store, policy, lambda request: "one").compact("c").accepted
    counting = _Counting(monkeypatch)
    with lf.SQLiteStore(path) as store:  # an empty cache: the digests come from the index
        compactor = lf.Compactor(store, policy, lambda request: "two")
        for round_ in range(3):
            _append(store, 1_500 + 8 * round_, 8)
            outcome = compactor.compact("c")
            assert outcome.accepted and outcome.summary is not None
            envelope = outcome.summary
            assert envelope.source_fingerprint == _reference_fingerprint(store, envelope.source_ids)
        assert len(counting.built) == 1 and counting.hashed == []
        assert store.context("c", "v1").fallback is None


def test_an_edit_of_a_covered_turn_still_refuses_the_extension(tmp_path: Path) -> None:
    """The fast path keeps §15.1's soundness: the summary goes stale when an old source is
    edited, and the next compaction rebases instead of extending it."""
    policy = lf.CompactionPolicy("v1", keep_tail=4, min_new_turns=8, max_input_tokens=10**9)
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        _append(store, 0, 400)
        compactor = lf.Compactor(store, policy, lambda request: "s")
        assert compactor.compact("c").accepted
        _append(store, 400, 8)
        assert compactor.compact("c").accepted
        first = store.load("c").turns[0]
        store.edit("c", first.id, body="changed")
        assert store.context("c", "v1").fallback is not None
        _append(store, 408, 8)
        outcome = compactor.compact("c")
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is None  # a rebase, not an extension of a stale one
        assert outcome.summary.source_fingerprint == _reference_fingerprint(
            store, outcome.summary.source_ids
        )


def test_large_states_at_subtree_boundaries_extend_to_the_reference() -> None:
    """Counts whose material ends just before or just past 2^k chunks (the count shares
    chunk 0, so chunk c ends after 32c - 0.25 digests), up to 2^20 digests, each extended
    by chains of mixed sizes that cross the next boundary."""
    big = _digests(1 << 15, 99) * 32  # 2^20 digests (repeats do not matter to the tree)
    for count in [(1 << 20), (1 << 20) - 1, (1 << 17), (1 << 17) - 1, 1 << 14, (1 << 14) + 1]:
        held = big[: count * 32]
        state = SourceDigests(held)
        assert len(state) == count
        assert state.fingerprint() == ref.fingerprint_digests(held)
        for steps in ([1, 31, 32, 33], [1 << 10, 1], [(1 << 12) + 3]):
            chained, total = state, held
            for step in steps:
                more = _digests(step, step)
                assert chained.fingerprint(more) == ref.fingerprint_digests(total + more)
                chained, total = chained.extended(more), total + more
            assert chained.fingerprint() == ref.fingerprint_digests(total)
            assert _native.fingerprint_digests(held, total[len(held) :]) == chained.fingerprint()


def test_rolling_commits_know_their_prefix_per_store_not_by_a_module_memo() -> None:
    """SPEC §15.2's cost without a module-global memo. Two stores compacting
    in turn both commit rolling extensions without one O(covered) prefix comparison (each
    store knows the sequence it built for its plan; the compactor is told by the store), and
    the IDs are the native persistent `SourceIds` (issue 28 item 6), no tuple subclass."""
    import ledgerfold as lf

    stores = [lf.SQLiteStore(), lf.SQLiteStore()]
    policy = lf.CompactionPolicy("memo", keep_tail=2, min_new_turns=1)
    compactors = [lf.Compactor(store, policy, lambda request: "s") for store in stores]
    for store, compactor in zip(stores, compactors, strict=True):
        store.append_many("c", [{"role": "user", "body": f"t{i}"} for i in range(20)])
        assert compactor.compact("c").accepted
    calls: list[int] = []
    real = plan._native.starts_with_ids

    def counting(ids: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
        calls.append(len(prefix))
        return real(ids, prefix)

    plan._native.starts_with_ids = counting  # type: ignore[assignment]
    try:
        for round_ in range(3):
            for store, compactor in zip(stores, compactors, strict=True):
                store.append_many(
                    "c", [{"role": "user", "body": f"n{round_}.{i}"} for i in range(4)]
                )
                outcome = compactor.compact("c")
                assert outcome.accepted and outcome.summary is not None
                assert outcome.summary.parent_id is not None  # rolling
                assert type(outcome.summary.source_ids) is _native.SourceIds
    finally:
        plan._native.starts_with_ids = real  # type: ignore[assignment]
        for store in stores:
            store.close()
    assert calls == []  # every prefix told in O(1)
    assert not [name for name in vars(plan) if name.startswith("_last")]
