"""`SourceIds` raises what the tuple of its IDs raises (issue 28 item 6: it stands for that
tuple everywhere). An exception raised while comparing an ID (a value's `__eq__`, a
`KeyboardInterrupt` arriving in one) propagates out of `in`, `count`, `index`, `==`, `!=` and
`starts_with`, instead of reading as "not equal"; index arguments are taken as tuple takes
them (`__index__`, integers beyond the machine range)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from ledgerfold import _native
from ledgerfold._native import SourceIds

IDS = ("a", "b", "c")


class Raising:
    """A value whose comparison raises."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("compare")

    __hash__ = object.__hash__


class Interrupting:
    """A value whose comparison is interrupted (Ctrl-C while user code runs)."""

    def __eq__(self, other: object) -> bool:
        raise KeyboardInterrupt

    __hash__ = object.__hash__


class RaisingStr(str):
    """An ID (a str, so a `SourceIds` holds it) whose comparison raises."""

    __slots__ = ()  # no `__dict__`: a `SourceIds` holds it as it is

    def __eq__(self, other: object) -> bool:
        raise ValueError("compare")

    __hash__ = str.__hash__


class BadIndex:
    """An index whose `__index__` raises."""

    def __index__(self) -> int:
        raise ValueError("index")


class Index:
    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def outcome(action: Callable[[], object]) -> tuple[str, str]:
    try:
        return "value", repr(action())
    except (Exception, KeyboardInterrupt) as error:
        return type(error).__name__, str(error)


CASES: dict[str, Callable[[tuple[str, ...] | SourceIds], object]] = {
    "in": lambda ids: Raising() in ids,
    "in-interrupted": lambda ids: Interrupting() in ids,
    "count": lambda ids: ids.count(Raising()),
    "index": lambda ids: ids.index(Raising()),
    "eq": lambda ids: ids == ("a", Raising(), "c"),
    "eq-reflected": lambda ids: ("a", Raising(), "c") == ids,
    "ne": lambda ids: ids != ("a", Raising(), "c"),
    "eq-interrupted": lambda ids: ids == ("a", "b", Interrupting()),
    "index-past-the-machine-range": lambda ids: ids.index("c", 0, 10**30),
    "index-before-the-machine-range": lambda ids: ids.index("a", -(10**30)),
    "index-with-__index__": lambda ids: ids.index("c", Index(1), Index(3)),
    "index-with-raising-__index__": lambda ids: ids.index("c", BadIndex()),
    "index-with-float": lambda ids: ids.index("c", 1.0),
    "index-with-None": lambda ids: ids.index("c", None),
    "item-with-__index__": lambda ids: ids[Index(-1)],
    "item-with-raising-__index__": lambda ids: ids[BadIndex()],
    "item-past-the-machine-range": lambda ids: ids[10**30],
}


@pytest.mark.parametrize("case", CASES)
def test_answers_or_raises_as_the_tuple_of_its_ids(case: str) -> None:
    action = CASES[case]
    expected = outcome(lambda: action(IDS))
    assert outcome(lambda: action(SourceIds(IDS))) == expected
    # An extension (IDs in two segments) answers the same.
    assert outcome(lambda: action(SourceIds(IDS[:1]).extended(IDS[1:]))) == expected


def test_a_raising_comparison_between_two_sequences_propagates() -> None:
    raising = SourceIds(["a", RaisingStr("b")])
    plain = SourceIds(["a", "x"])
    for compare in (
        lambda: plain == raising,
        lambda: plain != raising,
        lambda: plain.starts_with(raising),
        lambda: plain.starts_with(("a", RaisingStr("b"))),
        lambda: _native.starts_with_ids(plain, raising),
        lambda: _native.starts_with_ids(("a", "x"), ("a", RaisingStr("b"))),
    ):
        with pytest.raises(ValueError, match="compare"):
            compare()
    # IDs held in shared storage are not compared at all.
    assert raising.extended(["c"]).starts_with(raising)


@pytest.mark.parametrize(
    "piece",
    [
        slice(1, None, sys.maxsize),
        slice(-1, None, sys.maxsize),
        slice(0, 3, sys.maxsize - 1),
        slice(None, None, -sys.maxsize),
        slice(sys.maxsize, -sys.maxsize - 5, -sys.maxsize),
    ],
)
def test_a_slice_whose_next_position_passes_the_machine_range_is_the_tuples(piece: slice) -> None:
    """The position after the last item taken may not fit the machine's index: it is not
    computed (a debug build panicked: `PanicException: attempt to add with overflow`)."""
    assert SourceIds(IDS)[piece] == IDS[piece]
    assert SourceIds(IDS[:1]).extended(IDS[1:])[piece] == IDS[piece]
