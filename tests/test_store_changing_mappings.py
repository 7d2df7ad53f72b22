"""A mapping handed to the store that gives other values each time it is read (a `meta`
whose `tool_calls` changes, a turn spec whose `meta` changes): SPEC §15.8's write rules
hold for what is stored, which is what a check must read. The store checks the `Turn` it
built (its own copy), so a value that passed a check is never replaced by one that did not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf

BAD_CALLS = "[1]"  # a JSON array, but of no call objects


class Changing(Mapping[str, Any]):
    """`first` at the first read of `key`, `later` at every read after it."""

    def __init__(self, fixed: dict[str, Any], key: str, first: Any, later: Any) -> None:
        self._fixed, self._key, self._first, self._later = fixed, key, first, later
        self._reads = 0

    def __getitem__(self, key: str) -> Any:
        if key != self._key:
            return self._fixed[key]
        self._reads += 1
        return self._first if self._reads == 1 else self._later

    def __iter__(self) -> Iterator[str]:
        return iter([*self._fixed, self._key])

    def __len__(self) -> int:
        return len(self._fixed) + 1


def _changing_meta() -> Changing:
    return Changing({}, "tool_calls", '[{"id": "call-1"}]', BAD_CALLS)


def _stored_meta(path: Path) -> list[dict[str, str] | None]:
    with lf.SQLiteStore(path) as store:
        return [turn.meta for turn in store.load("c").turns]


def _check_refused(error: lf.InvalidInput, field: str) -> None:
    assert error.field is not None and error.field.startswith(field), error.field


def test_append_checks_the_meta_it_stores(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        try:
            turn = store.append("c", "assistant", "calling", meta=_changing_meta())
        except lf.InvalidInput as error:
            _check_refused(error, "meta.tool_calls")
        else:
            assert turn.meta == {"tool_calls": '[{"id": "call-1"}]'}
    assert {"tool_calls": BAD_CALLS} not in _stored_meta(path)


@pytest.mark.parametrize("changing", ["meta", "spec"])
def test_append_many_checks_the_meta_it_stores(tmp_path: Path, changing: str) -> None:
    path = tmp_path / "ledger.db"
    fixed = {"role": "assistant", "body": "calling"}
    spec: Mapping[str, Any] = (
        {**fixed, "meta": _changing_meta()}
        if changing == "meta"
        else Changing(fixed, "meta", None, {"tool_calls": BAD_CALLS})
    )
    with lf.SQLiteStore(path) as store:
        try:
            store.append_many("c", [spec])
        except lf.InvalidInput as error:
            _check_refused(error, "turns[0].meta")
    assert {"tool_calls": BAD_CALLS} not in _stored_meta(path)


def test_edit_checks_the_meta_it_stores(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with lf.SQLiteStore(path) as store:
        turn = store.append("c", "assistant", "calling")
        try:
            store.edit("c", turn.id, meta=_changing_meta())
        except lf.InvalidInput as error:
            _check_refused(error, "meta.tool_calls")
    assert {"tool_calls": BAD_CALLS} not in _stored_meta(path)
