"""`SourceIds` and the cyclic garbage collector: the IDs a sequence holds live in storage that
sequences share (`ledgerfold_core::shared_seq`), which the collector cannot see into, so the
sequence never holds an object that could refer back to it. An ID of a `str` subclass whose
instances have a `__dict__` is held as the plain `str` of its text; a cycle through such an
ID (a tuple's would be freed) was leaked."""

# The `+` operator is what is under test here, not a style choice.
# ruff: noqa: RUF005

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import pytest

from ledgerfold._native import SourceIds


class Tagged(str):
    """An ID with attributes (so it can refer to anything)."""


class Slotted(str):
    """An ID of a subclass without a `__dict__`: it can refer to nothing."""

    __slots__ = ()


def cycle_freed(build: Callable[[Tagged], object]) -> bool:
    """Whether an ID referring to what `build` made from it is freed once unreachable."""

    def make() -> weakref.ref[Tagged]:
        tag = Tagged("t1")
        tag.back = build(tag)  # type: ignore[attr-defined]
        return weakref.ref(tag)

    ref = make()
    gc.collect()
    return ref() is None


@pytest.mark.parametrize(
    "build",
    [
        lambda tag: SourceIds([tag]),
        lambda tag: SourceIds(["t0"]).extended([tag]),
        lambda tag: SourceIds(["t0"]) + (tag,),
        lambda tag: (tag,) + SourceIds(["t0"]),
        lambda tag: iter(SourceIds([tag])),
        # A sibling wrote the tagged ID into the parent's segment: only the parent remains.
        lambda tag: (lambda parent: (parent.extended([tag]), parent)[1])(
            SourceIds(["t0"]).extended(["t1"])
        ),
    ],
    ids=["new", "extended", "add", "radd", "iterator", "sibling"],
)
def test_an_id_referring_back_to_its_sequence_is_freed(build: Callable[[Tagged], object]) -> None:
    assert cycle_freed(lambda tag: (tag,))  # the oracle: a tuple's cycle is freed
    assert cycle_freed(build)


def test_an_id_with_attributes_is_held_as_its_text_and_answers_as_before() -> None:
    tag = Tagged("t\U0001f600")  # text beyond the BMP survives the copy
    ids = SourceIds([tag, "t2"])
    assert type(ids[0]) is str and ids[0] == tag and hash(ids[0]) == hash(tag)
    assert ids == (tag, "t2") and hash(ids) == hash((tag, "t2")) and tag in ids


def test_an_id_of_a_subclass_without_attributes_is_held_itself() -> None:
    slotted = Slotted("t1")
    ids = SourceIds([slotted]).extended([slotted])
    assert ids[0] is slotted and ids[1] is slotted
