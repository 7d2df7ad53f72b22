"""`SourceIds` against a model: random sequences of operations (chains, branches from any
version, extensions by itself, by another sequence, by a generator that fails half-way,
concatenation on either side, pickling) on `SourceIds` and on the tuples they stand for;
every version must answer as its tuple after every step (issue 28 item 6). Branches from
old versions and siblings exercise the shared segments' free slots and the moves of small
parts into a new segment (`ledgerfold_core::shared_seq`)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ledgerfold._native import SourceIds

IDS = st.sampled_from(["a", "b", "t1", "", "é", "\U0001f600", "t" * 300])  # no lone surrogate
ADDED = st.lists(IDS, max_size=12) | st.lists(IDS, min_size=60, max_size=140)


class Failing(Exception):
    pass


def failing_after(items: list[str]) -> Iterator[str]:
    yield from items
    raise Failing


class SourceIdsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.versions: list[tuple[SourceIds, tuple[str, ...]]] = [(SourceIds(), ())]

    def add(self, seq: SourceIds, ref: tuple[str, ...]) -> None:
        assert type(seq) is SourceIds
        self.versions.append((seq, ref))

    @rule(added=ADDED)
    def new(self, added: list[str]) -> None:
        self.add(SourceIds(iter(added)), tuple(added))

    @rule(at=st.integers(0), added=ADDED)
    def extend(self, at: int, added: list[str]) -> None:
        seq, ref = self.versions[at % len(self.versions)]
        self.add(seq.extended(added), ref + tuple(added))

    @rule(at=st.integers(0), added=ADDED)
    def add_a_tuple(self, at: int, added: list[str]) -> None:
        seq, ref = self.versions[at % len(self.versions)]
        self.add(seq + tuple(added), ref + tuple(added))
        self.add(tuple(added) + seq, tuple(added) + ref)

    @precondition(lambda self: len(self.versions) < 60)
    @rule(at=st.integers(0), other=st.integers(0))
    def extend_by_a_sequence(self, at: int, other: int) -> None:
        seq, ref = self.versions[at % len(self.versions)]
        more, more_ref = self.versions[other % len(self.versions)]
        if len(ref) + len(more_ref) <= 5_000:
            self.add(seq.extended(more), ref + more_ref)
            self.add(seq + seq, ref + ref)

    @rule(at=st.integers(0), added=ADDED)
    def extend_by_a_failing_generator(self, at: int, added: list[str]) -> None:
        seq, ref = self.versions[at % len(self.versions)]
        with pytest.raises(Failing):
            seq.extended(failing_after(added))
        # Nothing changed: the next extension of the same version is unaffected.
        self.add(seq.extended(added[:1]), ref + tuple(added[:1]))

    @rule(at=st.integers(0))
    def pickle_round_trip(self, at: int) -> None:
        seq, ref = self.versions[at % len(self.versions)]
        self.add(pickle.loads(pickle.dumps(seq)), ref)

    @rule(at=st.integers(0), index=st.integers(), cut=st.tuples(st.integers(), st.integers()))
    def read(self, at: int, index: int, cut: tuple[int, int]) -> None:
        seq, ref = self.versions[at % len(self.versions)]
        if ref:
            assert seq[index % len(ref)] == ref[index % len(ref)]
            assert seq[-(index % len(ref)) - 1] == ref[-(index % len(ref)) - 1]
        step = cut[1] % 7 - 3 or 1
        assert seq[cut[0] % 300 - 150 :: step] == ref[cut[0] % 300 - 150 :: step]
        for value in ("a", "é", "zz"):
            assert (value in seq) == (value in ref)
            assert seq.count(value) == ref.count(value)

    @invariant()
    def every_version_answers_as_its_tuple(self) -> None:
        last, last_ref = self.versions[-1]
        for seq, ref in self.versions:
            assert len(seq) == len(ref) and tuple(seq) == ref and list(iter(seq)) == list(ref)
            assert seq == ref and hash(seq) == hash(ref)
            assert (seq == last) == (ref == last_ref)
            assert (seq < last) == (ref < last_ref)
            assert seq.starts_with(last) == (ref[: len(last_ref)] == last_ref)
            assert last.starts_with(seq) == (last_ref[: len(ref)] == ref)


SourceIdsModel.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_source_ids_model = SourceIdsModel.TestCase
