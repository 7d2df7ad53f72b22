"""`Conversation._from_rows` (private): a conversation from stored rows in one call, digests
trusted."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import Conversation, DuplicateId, InvalidInput, SQLiteStore, Turn, fingerprint_turns

SECRET = "the launch code is 0000"

TURNS = [
    Turn("m1", 1, "system", "be brief"),
    Turn("m2", 2, "user", SECRET),
    Turn(
        "m3",
        5,
        "assistant",
        "é 😀 \u2028",
        group="calls-3",
        meta={"tool_calls": '[{"id": "c1", "a": 1}]'},
    ),
    Turn("m4", 7, "tool", "ok", group="calls-3", meta={"tool_call_id": "c1", "name": 'x"\\\n'}),
    Turn("m5", 9, "user", "wait", protected=True, protection_reason="pending-confirmation"),
    Turn("m6", 10, "user", "", protected=True, meta={}),
]


def row(turn: Turn) -> tuple[Any, ...]:
    """A turn as the store writes it: protected as 0/1, meta as sorted JSON text."""
    meta = turn.meta
    return (
        turn.id,
        turn.sequence,
        turn.role,
        turn.body,
        int(turn.protected),
        turn.protection_reason,
        turn.group,
        None if meta is None else json.dumps(meta, sort_keys=True, ensure_ascii=False),
        turn.digest,
    )


def test_honest_rows_give_the_conversation_the_constructor_gives() -> None:
    rows = [row(t) for t in TURNS]
    random.Random(7).shuffle(rows)
    built = Conversation._from_rows("c", 4, rows)
    expected = Conversation("c", 4, TURNS)
    assert built == expected
    assert [t.digest for t in built] == [t.digest for t in expected]
    assert [t.meta for t in built] == [t.meta for t in expected]
    assert built.turn_ids == expected.turn_ids
    assert fingerprint_turns(built) == fingerprint_turns(expected)
    assert hash(built) == hash(expected)
    assert Conversation._from_rows("c", 0, iter([])) == Conversation("c", 0, [])


def test_rows_read_from_a_store_database(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteStore(path) as store:
        for t in TURNS:
            store.append(
                "c",
                t.role,
                t.body,
                id=t.id,
                protected=t.protected,
                protection_reason=t.protection_reason,
                group=t.group,
                meta=t.meta,
            )
        loaded = store.load("c")
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT id, sequence, role, body, protected, protection_reason, grp, meta, digest"
            " FROM turns WHERE conversation_id = 'c'"
        ).fetchall()
    conn.close()
    assert isinstance(rows[0][4], int) and isinstance(rows[0][8], bytes)
    built = Conversation._from_rows("c", loaded.revision, rows)
    assert built == loaded
    assert [t.digest for t in built] == [t.digest for t in loaded]


def test_the_stored_digest_is_trusted_not_recomputed() -> None:
    stored = bytes(range(32))
    rows = [(*row(TURNS[0])[:-1], stored), row(TURNS[1])]
    built = Conversation._from_rows("c", 1, rows)
    assert built.turns[0].digest == stored != TURNS[0].digest
    assert built.turns[1].digest == TURNS[1].digest
    # Equality and hashing compare digests, so the untrusted-looking turn differs.
    assert built.turns[0] != TURNS[0]


BAD_ROWS = [
    # (field position, value, field, problem)
    (0, "", "id", "empty"),
    (0, 7, "id", "wrong-type"),
    (1, -1, "sequence", "out-of-range"),
    (1, True, "sequence", "wrong-type"),
    (2, "admin", "role", "unknown-value"),
    (2, 2, "role", "wrong-type"),
    (3, None, "body", "wrong-type"),
    (3, SECRET + "\udcff", "body", "not-utf8"),
    (4, 2, "protected", "out-of-range"),
    (4, "1", "protected", "wrong-type"),
    (5, "pending-confirmation", "protection_reason", "not-allowed"),
    (6, "", "group", "empty"),
    (6, 3, "group", "wrong-type"),
    (7, "{", "meta", "wrong-type"),
    (7, '{"k": 1}', "meta", "wrong-type"),
    (7, '{"k": {"a": "b"}}', "meta", "wrong-type"),
    (7, '["k", "v"]', "meta", "wrong-type"),
    (7, {"k": "v"}, "meta", "wrong-type"),
    (7, '{"": "x"}', "meta", "empty"),
    (7, '{"k": "a", "k": "b"}', "meta", "duplicate"),
    (8, bytes(31), "digest", "out-of-range"),
    (8, bytes(33), "digest", "out-of-range"),
    (8, "00" * 32, "digest", "wrong-type"),
    (8, None, "digest", "wrong-type"),
]


@pytest.mark.parametrize(("position", "value", "field", "problem"), BAD_ROWS)
def test_a_bad_field_names_the_row_and_the_field(
    position: int, value: Any, field: str, problem: str
) -> None:
    bad = list(row(TURNS[1]))
    bad[position] = value
    rows = [row(TURNS[0]), tuple(bad), row(TURNS[2])]
    with pytest.raises(InvalidInput) as caught:
        Conversation._from_rows("c", 1, rows)
    assert (caught.value.field, caught.value.problem) == (field, problem)
    assert str(caught.value).startswith(f"rows[1].{field}: ")
    assert SECRET not in str(caught.value)


def test_an_unknown_reason_on_a_protected_row() -> None:
    bad = list(row(TURNS[4]))
    bad[5] = "because"
    with pytest.raises(InvalidInput) as caught:
        Conversation._from_rows("c", 1, [tuple(bad)])
    assert (caught.value.field, caught.value.problem) == ("protection_reason", "unknown-value")
    assert str(caught.value).startswith("rows[0].protection_reason: ")


@pytest.mark.parametrize(
    ("rows", "field"),
    [
        ([row(TURNS[0])[:-1]], "row"),
        ([(*row(TURNS[0]), None)], "row"),
        ([list(row(TURNS[0]))], "row"),
        ([SECRET], "row"),
        (SECRET, "rows"),
        (5, "rows"),
    ],
)
def test_rows_of_the_wrong_shape(rows: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Conversation._from_rows("c", 1, rows)
    assert caught.value.field == field and caught.value.problem == "wrong-type"
    assert SECRET not in str(caught.value)


def test_conversation_rules_still_hold() -> None:
    with pytest.raises(DuplicateId):
        Conversation._from_rows("c", 1, [row(TURNS[0]), row(TURNS[0].replace(sequence=3))])
    with pytest.raises(InvalidInput) as caught:
        Conversation._from_rows("c", 1, [row(TURNS[0]), row(TURNS[1].replace(sequence=1))])
    assert caught.value.field == "sequence"
    for args, field in ((("", 0, []), "id"), (("c", -1, []), "revision")):
        with pytest.raises(InvalidInput) as caught_bad:
            Conversation._from_rows(*args)
        assert caught_bad.value.field == field


def test_from_rows_is_private() -> None:
    """Trusting the given digests is the store's business only, so no
    public name builds a conversation that way (an edited body with its old digest would
    make a stale summary look current)."""
    import ledgerfold as lf

    assert not hasattr(lf.Conversation, "from_rows")
    assert not any("from_rows" in name for name in dir(lf.Conversation) if not name.startswith("_"))
