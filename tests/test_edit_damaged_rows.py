"""`SQLiteStore.edit` of a turn row damaged in storage (SPEC §12 `edit`, §15.5's error rule),
on a real SQLite file: an edit gives whole new fields, so one that gives every damaged field
a new value repairs the row (the turn reads back, its earlier version kept in the history,
its search passages and the summaries citing it follow as for any edit); one that leaves a
damaged field as it is raises `StoreError` naming the turn and the column, never the value,
and writes nothing. (Both failed: text that is not UTF-8 gave "cannot read column 'body' of
table turn_history or turns", naming no turn, and no edit could repair any damaged row.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import ledgerfold as lf
from cli_support import table_contents
from ledgerfold.revalidate import revalidate_database

CID = "c"
SECRET = "SECRETDAMAGE"

#: Damage another tool wrote into a turn row (`?` is its ID), and the field it is in.
DAMAGE = {
    "body-not-utf8": (
        "body",
        f"UPDATE turns SET body = CAST(X'ff' AS TEXT) || '{SECRET}' WHERE id = ?",
    ),
    "meta-not-utf8": (
        "meta",
        f"UPDATE turns SET meta = CAST(X'7bff' AS TEXT) || '{SECRET}' WHERE id = ?",
    ),
    "meta-not-json": ("meta", f"UPDATE turns SET meta = '{SECRET} not json' WHERE id = ?"),
    "role-not-utf8": ("role", "UPDATE turns SET role = CAST(X'ff' AS TEXT) WHERE id = ?"),
    "role-not-a-role": ("role", "UPDATE turns SET role = 'narrator' WHERE id = ?"),
    "group-not-utf8": ("group", "UPDATE turns SET grp = CAST(X'ff' AS TEXT) WHERE id = ?"),
}

#: The new value an edit gives each damaged field.
NEW = {"body": "mended zebra", "meta": {"source": "edit"}, "role": "user", "group": "g1"}


def _sql(path: Path, statement: str, *params: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(statement, params)
    conn.close()


def _compacted(path: Path) -> Path:
    """12 turns of bodies 'turn n' (t5's says 'walrus' too); a current summary covers t0..t7
    (t5 among them)."""
    with lf.SQLiteStore(path) as store:
        store.append_many(
            CID,
            [
                {
                    "id": f"t{n}",
                    "role": "user" if n % 2 else "assistant",
                    "body": f"turn {n}" + (" walrus" if n == 5 else ""),
                }
                for n in range(12)
            ],
        )
        policy = lf.CompactionPolicy("v1", keep_tail=4, min_new_turns=1)
        assert lf.Compactor(store, policy).compact(CID).accepted
        assert "t5" in store.current_summary(CID).source_ids  # type: ignore[union-attr]
    return path


def _history(path: Path, turn_id: str) -> int:
    with sqlite3.connect(path) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM turn_history WHERE turn_pk ="
            " (SELECT pk FROM turns WHERE conversation_id = ? AND id = ?)",
            (CID, turn_id),
        ).fetchone()
    conn.close()
    return int(count)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_an_edit_giving_the_damaged_field_repairs_the_row(tmp_path: Path, damage: str) -> None:
    path = _compacted(tmp_path / "r.db")
    field, statement = DAMAGE[damage]
    _sql(path, statement, "t5")
    changes = {field: NEW[field], "body": NEW["body"]}
    with lf.SQLiteStore(path) as store:
        with pytest.raises(lf.StoreError, match="damaged row in table turns"):
            store.load(CID)  # the damaged row: load() refuses it
        # A search passes over a row whose body or role cannot be read or is no role.
        if damage not in ("body-not-utf8", "role-not-utf8", "role-not-a-role"):
            assert [hit.turn_id for hit in store.search(CID, "walrus", scope="all")] == ["t5"]
        edited = store.edit(CID, "t5", **changes)
        assert (edited.id, edited.sequence, edited.body) == ("t5", 6, NEW["body"])
        assert getattr(edited, field) == NEW[field]
        conversation = store.load(CID)  # reads back
        assert conversation.turns[5] == edited
        # The new body is found, the old one's passages went with it.
        assert [hit.turn_id for hit in store.search(CID, "zebra", scope="all")] == ["t5"]
        assert store.search(CID, "walrus", scope="all") == []
        record = next(r for r in store.summary_history(CID) if r.status == "stale")
        assert record.reason == "source-modified"
        # A later edit is an ordinary one.
        assert store.edit(CID, "t5", body="mended again").body == "mended again"
    assert _history(path, "t5") == 2  # the damaged version is kept, as any earlier one
    report = revalidate_database(path, workers=1, mark_stale=False)
    assert (report.turns_damaged, report.digests_wrong) == (0, 0)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_an_edit_leaving_the_damaged_field_names_it_and_writes_nothing(
    tmp_path: Path, damage: str
) -> None:
    path = _compacted(tmp_path / "n.db")
    field, statement = DAMAGE[damage]
    _sql(path, statement, "t5")
    other = "protected" if field == "body" else "body"
    changes: dict[str, Any] = {"protected": True} if other == "protected" else {"body": "x"}
    before = table_contents(path)
    with lf.SQLiteStore(path) as store, pytest.raises(lf.StoreError) as caught:
        store.edit(CID, "t5", **changes)
    message = str(caught.value)
    column = {"group": "grp"}.get(field, field)
    assert message.startswith(
        f"damaged row in table turns, column {column}: turn 't5' (sequence 6);"
    ), message
    assert message.endswith(f"; an edit giving {field} a new value replaces it"), message
    assert SECRET not in message and SECRET not in repr(caught.value)
    assert table_contents(path) == before


def test_a_damaged_sequence_is_named_and_nothing_written(tmp_path: Path) -> None:
    """No edit gives a sequence: the row cannot be repaired by one."""
    path = _compacted(tmp_path / "s.db")
    _sql(path, "UPDATE turns SET sequence = 'six' WHERE id = ?", "t5")
    before = table_contents(path)
    with lf.SQLiteStore(path) as store, pytest.raises(lf.StoreError) as caught:
        store.edit(CID, "t5", body="x")
    assert str(caught.value).startswith("damaged row in table turns, column sequence: turn 't5'")
    assert "replaces it" not in str(caught.value)
    assert table_contents(path) == before


def test_bad_new_values_are_still_invalid_input(tmp_path: Path) -> None:
    path = _compacted(tmp_path / "b.db")
    _sql(path, DAMAGE["meta-not-json"][1], "t5")
    before = table_contents(path)
    with lf.SQLiteStore(path) as store:
        with pytest.raises(lf.InvalidInput) as caught:
            store.edit(CID, "t5", meta={"k": 1})
        assert caught.value.field == "meta"
        with pytest.raises(lf.InvalidInput) as caught:
            store.edit(CID, "t5", meta={}, body="\ud800")
        assert caught.value.field == "body"
    assert table_contents(path) == before


def test_a_failed_repair_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    path = _compacted(tmp_path / "f.db")
    _sql(path, DAMAGE["body-not-utf8"][1], "t5")
    _sql(
        path,
        "CREATE TRIGGER fail BEFORE UPDATE OF digest ON turns"
        " BEGIN SELECT RAISE(ABORT, 'disk says no'); END",
    )
    before = table_contents(path)
    with lf.SQLiteStore(path) as store, pytest.raises(lf.StoreError, match="disk says no"):
        store.edit(CID, "t5", body="mended")
    assert table_contents(path) == before


def test_a_repaired_row_is_erased_whole(tmp_path: Path) -> None:
    """The damaged version the history keeps goes with an erasure, as any earlier one."""
    path = _compacted(tmp_path / "e.db")
    _sql(path, DAMAGE["body-not-utf8"][1], "t5")
    with lf.SQLiteStore(path) as store:
        store.edit(CID, "t5", body="mended")
        store.retract(CID, "t5", erase=True)
    assert _history(path, "t5") == 0
    data = path.read_bytes() + (
        Path(f"{path}-wal").read_bytes() if Path(f"{path}-wal").exists() else b""
    )
    assert SECRET.encode() not in data


def test_a_repaired_call_pairs_with_its_result_again(tmp_path: Path) -> None:
    """A call whose meta was damaged answered nothing (SPEC §17.2); the edit giving it its
    `tool_calls` again pairs its result with it: a retraction of the call takes the result."""
    path = tmp_path / "k.db"
    call = '[{"id": "k1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]'
    with lf.SQLiteStore(path) as store:
        store.append(CID, "user", "hello", id="u0")
        store.append(CID, "assistant", "calling", id="a1", meta={"tool_calls": call})
        store.append(CID, "tool", "result", id="r1", meta={"tool_call_id": "k1"})
        store.append(CID, "user", "more", id="m0")
    _sql(path, DAMAGE["meta-not-json"][1], "a1")
    with lf.SQLiteStore(path) as store:
        assert store.edit(CID, "a1", meta={"tool_calls": call}).meta == {"tool_calls": call}
        store.retract(CID, "a1")
        assert store.load(CID).turn_ids == ("u0", "m0")


def test_a_repaired_result_lets_an_unforced_purge_take_its_call(tmp_path: Path) -> None:
    """A result whose meta was damaged answers no call, so an unforced purge stops before
    the call, as before one whose result is missing or retracted (docs/retention.md); the
    edit repairing the result's meta lets it take both, and the damaged version with them."""
    path = tmp_path / "p.db"
    call = '[{"id": "k1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]'
    with lf.SQLiteStore(path) as store:
        store.append(CID, "user", "hello", id="u0")
        store.append(CID, "assistant", "calling", id="a1", meta={"tool_calls": call})
        store.append(CID, "tool", "result", id="r1", meta={"tool_call_id": "k1"})
        for n in range(4):
            store.append(CID, "user", f"more {n}", id=f"m{n}")
    _sql(path, DAMAGE["meta-not-json"][1], "r1")
    with lf.SQLiteStore(path) as store:
        assert store.purge_through(CID, 5, "retention").through_sequence == 1
        store.edit(CID, "r1", meta={"tool_call_id": "k1"})
        assert store.purge_through(CID, 5, "retention").through_sequence == 5
        assert store.load(CID).turn_ids == ("m2", "m3")
    assert _history(path, "r1") == 0
    data = path.read_bytes() + (
        Path(f"{path}-wal").read_bytes() if Path(f"{path}-wal").exists() else b""
    )
    assert SECRET.encode() not in data
