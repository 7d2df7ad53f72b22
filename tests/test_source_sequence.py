"""The persistent source-ID sequence (issue 28 item 6): `_native.SourceIds`, a frozen
sequence of str sharing its parent's storage (`ledgerfold_core::shared_seq`), so a rolling
summary's `source_ids` (every covered turn, SPEC §15.1) costs O(new turns) per version.

The oracle is the tuple of the same IDs: whatever a tuple answers, the sequence answers
the same, under any chain or branching of extensions (a sibling extension of the same
parent must neither see nor overwrite the other's IDs)."""

# The `+` operator is what is under test here, not a style choice.
# ruff: noqa: RUF005

from __future__ import annotations

import itertools
import pickle
import threading
import tracemalloc
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import _native
from ledgerfold._native import SourceDigests, SourceIds
from ledgerfold._plan import extend_ids

ALPHABET = ["a", "b", "t1", "é", "", "u-2"]
ids_lists = st.lists(st.sampled_from(ALPHABET), max_size=80)


def ref_starts_with(ids: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    """Slow reference: position by position."""
    return len(prefix) <= len(ids) and all(ids[i] == prefix[i] for i in range(len(prefix)))


def assert_same(seq: SourceIds, ref: tuple[str, ...]) -> None:
    """`seq` answers as the tuple `ref` does."""
    assert len(seq) == len(ref)
    assert bool(seq) == bool(ref)
    assert list(seq) == list(ref)
    assert tuple(seq) == ref
    assert seq == ref and ref == seq
    assert (seq != ref) is False
    assert hash(seq) == hash(ref)
    for index in range(-len(ref) - 2, len(ref) + 2):
        if -len(ref) <= index < len(ref):
            assert seq[index] == ref[index]
        else:
            with pytest.raises(IndexError):
                seq[index]
    for value in [*ALPHABET, "zz"]:
        assert (value in seq) == (value in ref)
        assert seq.count(value) == ref.count(value)
        if value in ref:
            assert seq.index(value) == ref.index(value)
            if value in ref[1:-1]:
                assert seq.index(value, 1, -1) == ref.index(value, 1, -1)
        else:
            with pytest.raises(ValueError, match="not in sequence"):
                seq.index(value)
    assert pickle.loads(pickle.dumps(seq)) == ref
    assert type(pickle.loads(pickle.dumps(seq))) is SourceIds
    assert seq + ("x",) == (*ref, "x")
    assert ("x",) + seq == ("x", *ref)


@settings(max_examples=60, deadline=None)
@given(
    start=ids_lists,
    steps=st.lists(st.tuples(st.integers(0, 1000), ids_lists), max_size=10),
    cuts=st.lists(
        st.tuples(
            st.none() | st.integers(-90, 90),
            st.none() | st.integers(-90, 90),
            st.none() | st.integers(-5, 5).filter(bool),
        ),
        max_size=6,
    ),
)
def test_any_chain_or_branch_of_extensions_answers_as_its_tuple(
    start: list[str], steps: list[tuple[int, list[str]]], cuts: list[tuple[int | None, ...]]
) -> None:
    versions = [(SourceIds(start), tuple(start))]
    for from_, added in steps:
        seq, ref = versions[from_ % len(versions)]
        # Both ways of extending: the method and `+` with a tuple.
        grown = seq.extended(added) if from_ % 2 else seq + tuple(added)
        versions.append((grown, ref + tuple(added)))
    for seq, ref in versions:
        assert_same(seq, ref)
        for cut in cuts:
            piece = slice(*cut)
            assert seq[piece] == ref[piece]
            assert type(seq[piece]) is tuple
    for a, ref_a in versions:
        for b, ref_b in versions:
            assert (a == b) == (ref_a == ref_b)
            assert (a != b) == (ref_a != ref_b)
            assert (a < b) == (ref_a < ref_b) and (a <= ref_b) == (ref_a <= ref_b)
            assert (a > b) == (ref_a > ref_b) and (a >= ref_b) == (ref_a >= ref_b)
            expected = ref_starts_with(ref_a, ref_b)
            assert a.starts_with(b) == expected
            assert a.starts_with(ref_b) == expected
            assert _native.starts_with_ids(a, b) == expected
            assert _native.starts_with_ids(ref_a, b) == expected
            assert _native.starts_with_ids(a, ref_b) == expected
            assert a + b == ref_a + ref_b


def test_it_is_an_immutable_sequence_usable_where_tuples_were() -> None:
    ids = SourceIds(["t1", "t2"])
    assert isinstance(ids, Sequence)
    assert {ids: 1}[("t1", "t2")] == 1  # equal to its tuple, so the same dict key
    assert ids != ["t1", "t2"]  # a tuple is not equal to a list either
    assert list(reversed(ids)) == ["t2", "t1"]
    assert SourceIds() == () and SourceIds(ids) == ids
    with pytest.raises(AttributeError):
        ids.anything = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        ids[0] = "x"  # type: ignore[index]
    assert repr(ids) == "SourceIds(['t1', 't2'])"
    many = SourceIds(f"t{i}" for i in range(100))
    assert repr(many) == "SourceIds(['t0', 't1', 't2', ..., 't98', 't99'], len=100)"


@pytest.mark.parametrize(
    ("build", "field", "problem"),
    [
        (lambda: SourceIds("ab"), "ids", "wrong-type"),
        (lambda: SourceIds(5), "ids", "wrong-type"),
        (lambda: SourceIds(["a", 1]), "ids", "wrong-type"),
        (lambda: SourceIds(["a", "\ud800"]), "ids", "not-utf8"),
        (lambda: SourceIds(["a"]).extended([None]), "ids", "wrong-type"),
        (lambda: SourceIds(["a"]).extended("ab"), "ids", "wrong-type"),
        (lambda: SourceIds(["a"]).extended(["\udfff"]), "ids", "not-utf8"),
        (lambda: SourceIds(["a"]) + ("\ud800",), "ids", "not-utf8"),
        (lambda: ("\ud800",) + SourceIds(["a"]), "other", "not-utf8"),
        (lambda: SourceIds(["a"]).starts_with(["a"]), "prefix", "wrong-type"),
        (lambda: _native.starts_with_ids(["a"], ("a",)), "ids", "wrong-type"),
        (lambda: _native.starts_with_ids(("a",), ["a"]), "prefix", "wrong-type"),
        (lambda: SourceDigests("digests"), "digests", "wrong-type"),
        (lambda: SourceDigests(bytearray(32)), "digests", "wrong-type"),
        (lambda: SourceDigests().fingerprint(32), "more", "wrong-type"),
        (lambda: SourceDigests().extended(None), "more", "wrong-type"),
    ],
)
def test_bad_arguments_are_invalid_input_naming_the_field(
    build: object, field: str, problem: str
) -> None:
    """Private as they are, the native types take bad input as the rest of the library
    does (docs/bad-input.md): `InvalidInput` naming the field, never a plain `TypeError`,
    and never an ID that does not encode as UTF-8 (a lone surrogate), which no turn has."""
    with pytest.raises(lf.InvalidInput) as raised:
        build()  # type: ignore[operator]
    assert (raised.value.field, raised.value.problem) == (field, problem)


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: SourceIds(["a"])[1], IndexError),
        (lambda: SourceIds(["a"])[-2], IndexError),
        (lambda: SourceIds(["a"])[2**80], IndexError),
        (lambda: SourceIds(["a"])["0"], TypeError),
        (lambda: SourceIds(["a"])[1.0], TypeError),
        (lambda: SourceIds(["a"]) + ["b"], TypeError),
        (lambda: ["b"] + SourceIds(["a"]), TypeError),
        (lambda: SourceIds(["a"]) < ["b"], TypeError),
        (lambda: SourceIds(["a"]).index("b"), ValueError),
    ],
)
def test_misuse_as_a_sequence_raises_what_a_tuple_would(build: object, error: type) -> None:
    with pytest.raises(error):
        build()  # type: ignore[operator]


class CountingStr(str):
    """An ID whose comparisons are counted (every one goes through `__eq__`)."""

    __slots__ = ()  # no `__dict__`: a `SourceIds` holds it as it is

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountingStr.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_an_extension_shares_its_parents_ids_so_its_prefix_is_known_without_comparing() -> None:
    parent = SourceIds(CountingStr(f"t{i}") for i in range(1000))
    child = parent + ("n1", "n2")
    grandchild = extend_ids(child, ["n3"])
    CountingStr.compared = 0
    assert grandchild.starts_with(parent) and child.starts_with(parent)
    assert _native.starts_with_ids(grandchild, child)
    assert CountingStr.compared == 0
    # The same IDs in other storage (equal strings, other objects) are compared one by one.
    copy = SourceIds(CountingStr(f"t{i}") for i in range(1000)) + ("n1", "n2", "n3")
    assert copy.starts_with(parent) and copy == grandchild
    assert CountingStr.compared >= 1000


def test_a_sibling_extension_leaves_the_first_ones_ids_alone() -> None:
    parent = SourceIds(["a"]) + ("b",)
    first = parent + ("c",)
    second = parent + ("d", "e")
    assert (parent, first, second) == (("a", "b"), ("a", "b", "c"), ("a", "b", "d", "e"))
    assert not second.starts_with(first)


def test_a_rolling_compaction_allocates_no_python_object_over_the_covered_ids(
    tmp_path: Path,
) -> None:
    """The store's rolling plan and envelope extend the parent's `SourceIds`: no tuple of
    the covered IDs is built per compaction (before: one 8-byte slot per covered turn)."""
    covered = 20_000
    store = lf.SQLiteStore(tmp_path / "big.db", durability="normal")
    store.append_many(
        "c", [{"role": "user", "body": f"b{i}", "id": f"t{i}"} for i in range(covered + 8)]
    )
    policy = lf.CompactionPolicy("seq", keep_tail=8, max_input_tokens=10**9)
    compactor = lf.Compactor(store, policy, lambda request: "summary")
    assert compactor.compact("c", force=True).accepted
    peaks = []
    for round_ in range(3):
        store.append_many("c", [{"role": "user", "body": f"n{round_}.{i}"} for i in range(8)])
        tracemalloc.start()
        outcome = compactor.compact("c")
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert outcome.accepted and outcome.summary is not None
        assert outcome.summary.parent_id is not None
        assert type(outcome.summary.source_ids) is SourceIds
        assert len(outcome.summary.source_ids) == covered + 8 * (round_ + 1)
    store.close()
    # A tuple of the covered IDs alone would be 8 bytes per ID.
    assert min(peaks) < covered * 8 // 2, peaks


def test_threads_extending_one_parent_each_get_their_own_ids() -> None:
    """Extensions write into shared segments under a lock: siblings built at the same time
    neither lose nor mix IDs."""
    parent = SourceIds(f"p{i}" for i in range(100)) + ("q",)
    barrier = threading.Barrier(8)

    def grow(n: int) -> list[SourceIds]:
        barrier.wait()
        built = [parent]
        for step in range(50):
            built.append(built[-1] + tuple(f"w{n}.{step}.{i}" for i in range(n % 3 + 1)))
        return built

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(grow, range(8)))
    base = tuple(parent)
    for n, built in enumerate(results):
        expected = base + tuple(f"w{n}.{step}.{i}" for step in range(50) for i in range(n % 3 + 1))
        assert built[-1] == expected
        assert all(later.starts_with(earlier) for earlier, later in itertools.pairwise(built))
    assert parent == base


def test_a_summarys_source_ids_pickle_copy_and_iterate_as_a_tuples_do(tmp_path: Path) -> None:
    """What a user does with `record.source_ids`: pickle or deep-copy the record, pickle or
    copy an iterator part-way through (as a tuple's iterator pickles: the IDs not yet
    given), and write JSON from `list(ids)` (json writes only real lists and tuples)."""
    import copy
    import json

    with lf.SQLiteStore(tmp_path / "f.db") as store:
        store.append_many("c", [{"id": f"t{n}", "role": "user", "body": "x"} for n in range(9)])
        policy = lf.CompactionPolicy("v", keep_tail=2, min_new_turns=1)
        assert lf.Compactor(store, policy).compact("c", force=True).status == "accepted"
        record = store.current_summary("c")
    assert record is not None
    ids = record.source_ids
    expected = tuple(f"t{n}" for n in range(7))
    assert pickle.loads(pickle.dumps(record)) == record == copy.deepcopy(record)
    iterator = iter(ids)
    assert next(iterator) == "t0"
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert tuple(pickle.loads(pickle.dumps(iterator, protocol))) == expected[1:]
    assert tuple(copy.deepcopy(iterator)) == tuple(copy.copy(iterator)) == expected[1:]
    assert tuple(iterator) == expected[1:]  # the copies did not advance it
    assert pickle.loads(pickle.dumps(iterator)) is not iterator
    assert tuple(pickle.loads(pickle.dumps(iterator))) == ()
    assert json.loads(json.dumps(list(ids))) == list(expected)
