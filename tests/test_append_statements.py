"""The statements an append runs (its CPU, which sessions in step pay about 19 times over:
docs/performance.md), and that what it writes and refuses is what it always was: the new
turns go in one INSERT, an existing ID is looked up only when that INSERT fails, and the
`DuplicateId` then names the ID the lookup always named, the database left as it was."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import ledgerfold as lf
from ledgerfold.integrations import _agents_append
from ledgerfold.store._ledger import noncharacter_field
from ledgerfold.store._rows import meta_json


@contextmanager
def _statements(store: lf.SQLiteStore) -> Iterator[list[str]]:
    """The SQL statements the store runs inside the block (its connection's trace)."""
    seen: list[str] = []
    conn = store._db.connection()
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _state(path: Path) -> tuple[object, ...]:
    with sqlite3.connect(path) as conn:
        return (
            conn.execute("SELECT * FROM conversations ORDER BY id").fetchall(),
            conn.execute("SELECT * FROM turns ORDER BY pk").fetchall(),
        )


def test_an_append_inserts_its_turns_in_one_statement_and_looks_no_id_up(
    store: lf.SQLiteStore,
) -> None:
    store.append_many("c", [{"role": "user", "body": "first"}])
    with _statements(store) as seen:
        turns = store.append_many(
            "c",
            [
                {"role": "user", "body": "hello", "meta": {"k": "v"}},
                {"role": "assistant", "body": "hi", "id": "mine"},
                {"role": "user", "body": "again", "protected": True, "group": "g"},
            ],
        )
    inserts = [s for s in seen if s.startswith("INSERT INTO turns")]
    assert len(inserts) == 1, seen
    assert not [s for s in seen if re.match(r"SELECT id FROM turns .* id IN", s)], seen
    assert [t.sequence for t in turns] == [2, 3, 4]
    assert store.get_turns("c", [t.id for t in turns]) == turns


@pytest.mark.parametrize("new", [2, 120], ids=["one-insert", "more-than-one-insert-holds"])
def test_an_existing_id_is_named_as_the_lookup_names_it_and_nothing_is_written(
    store: lf.SQLiteStore, db_path: Path, new: int
) -> None:
    store.append_many("c", [{"role": "user", "body": "x", "id": f"old-{n}"} for n in (7, 3)])
    before = _state(db_path)
    specs = [{"role": "user", "body": "y", "id": f"new-{n}"} for n in range(new)]
    # Two clashes, the later one first by ID order: the lookup (`IN`, by the unique index)
    # names old-3, however the new turns are ordered.
    specs[1:1] = [
        {"role": "user", "body": "y", "id": "old-7"},
        {"role": "user", "body": "y", "id": "old-3"},
    ]
    with pytest.raises(lf.DuplicateId) as caught:
        store.append_many("c", specs)
    assert str(caught.value) == "id: turn id 'old-3' already exists"
    assert caught.value.id == "old-3"
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert _state(db_path) == before
    # The store goes on: the same turns less the clashes append.
    assert len(store.append_many("c", [s for s in specs if s["id"].startswith("new")])) == new


def test_a_retracted_id_is_still_refused_in_one_insert(
    store: lf.SQLiteStore, db_path: Path
) -> None:
    store.append_many("c", [{"role": "user", "body": "x", "id": "gone"}])
    store.retract("c", "gone")
    before = _state(db_path)
    with pytest.raises(lf.DuplicateId, match="'gone' already exists"):
        store.append_many(
            "c", [{"role": "user", "body": "y"}, {"role": "user", "body": "z", "id": "gone"}]
        )
    assert _state(db_path) == before


@pytest.mark.parametrize(
    "meta",
    [
        {},
        {"a": "b"},
        {"z": "1", "a": '"quoted" \\ \n\t\x00\x1f\x7f é 😀 \u2028', "tool_call_id": "c"},
        {"tool_calls": json.dumps([{"id": "x", "function": {"arguments": "{}"}}])},
        {"lone": "\ud800"},
    ],
)
def test_the_meta_column_is_the_json_dumps_text(meta: dict[str, str]) -> None:
    assert meta_json(meta) == json.dumps(meta, sort_keys=True, ensure_ascii=False)
    assert meta_json(None) is None


def test_agents_turn_ids_are_uuid4_hex(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = bytes(range(48))
    monkeypatch.setattr(_agents_append.os, "urandom", lambda n: raw[:n])
    assert _agents_append._new_turn_ids(3) == [
        "t-" + uuid.UUID(bytes=raw[at : at + 16], version=4).hex for at in (0, 16, 32)
    ]
    assert _agents_append._new_turn_ids(0) == []


def _turn(turn_id: str = "t", body: str = "b", group: str = "g", meta: object = None) -> lf.Turn:
    meta = {"k": "v"} if meta is None else meta
    return lf.Turn(turn_id, 1, "user", body, group=group, meta=meta)  # type: ignore[arg-type]


@pytest.mark.parametrize("mark", ["\ufffe", "\uffff"])
def test_the_noncharacter_check_names_the_field_it_always_named(mark: str) -> None:
    clean = _turn()
    assert noncharacter_field("c", [clean, clean], "turns") is None
    assert noncharacter_field("c" + mark, [clean]) == "conversation_id"
    for marked, field in [
        (_turn(turn_id="t" + mark), "id"),
        (_turn(body=mark), "body"),
        (_turn(group=mark), "group"),
        (_turn(meta={mark: "v"}), "meta"),
        (_turn(meta={"k": "v" + mark}), "meta"),
    ]:
        assert noncharacter_field("c", [clean, marked], "turns") == f"turns[1].{field}"
        assert noncharacter_field("c", [marked]) == field
