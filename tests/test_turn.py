"""Turn and Conversation as values (SPEC §2): validation, equality, hashing, pickling, repr."""

from __future__ import annotations

import copy
import pickle
import time
from collections.abc import Callable
from typing import Any

import pytest

from ledgerfold import (
    Conversation,
    DuplicateId,
    InvalidInput,
    LedgerfoldError,
    Turn,
    TurnItem,
    assemble_context,
)

SECRET = "the launch code is 0000"


def turn(**changes: Any) -> Turn:
    fields: dict[str, Any] = {"id": "m1", "sequence": 1, "role": "user", "body": SECRET}
    fields.update(changes)
    return Turn(
        fields.pop("id"), fields.pop("sequence"), fields.pop("role"), fields.pop("body"), **fields
    )


BAD_INPUT = [
    # (changes, field, problem)
    ({"id": ""}, "id", "empty"),
    ({"id": 7}, "id", "wrong-type"),
    ({"id": None}, "id", "wrong-type"),
    ({"id": "a\ud800"}, "id", "not-utf8"),
    ({"sequence": -1}, "sequence", "out-of-range"),
    ({"sequence": 2**63}, "sequence", "out-of-range"),
    ({"sequence": -(2**70)}, "sequence", "out-of-range"),
    ({"sequence": True}, "sequence", "wrong-type"),
    ({"sequence": 1.0}, "sequence", "wrong-type"),
    ({"sequence": "1"}, "sequence", "wrong-type"),
    ({"role": "admin"}, "role", "unknown-value"),
    ({"role": "User"}, "role", "unknown-value"),
    ({"role": 2}, "role", "wrong-type"),
    ({"body": None}, "body", "wrong-type"),
    ({"body": b"bytes"}, "body", "wrong-type"),
    ({"body": SECRET + "\udcff"}, "body", "not-utf8"),
    ({"protected": 1}, "protected", "wrong-type"),
    ({"protected": "yes"}, "protected", "wrong-type"),
    ({"protection_reason": "pending-confirmation"}, "protection_reason", "not-allowed"),
    ({"protected": True, "protection_reason": "because"}, "protection_reason", "unknown-value"),
    ({"protected": True, "protection_reason": 1}, "protection_reason", "wrong-type"),
    ({"group": ""}, "group", "empty"),
    ({"group": 3}, "group", "wrong-type"),
    ({"meta": {"": "x"}}, "meta", "empty"),
    ({"meta": {"k": 1}}, "meta", "wrong-type"),
    ({"meta": {1: "v"}}, "meta", "wrong-type"),
    ({"meta": [("k", "v")]}, "meta", "wrong-type"),
    ({"meta": {"k": "\ud800"}}, "meta", "not-utf8"),
]


@pytest.mark.parametrize(("changes", "field", "problem"), BAD_INPUT)
def test_bad_input_raises_invalid_input_naming_the_field(
    changes: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        turn(**changes)
    error = caught.value
    assert isinstance(error, ValueError)
    assert isinstance(error, LedgerfoldError)
    assert error.code == "invalid-input"
    assert error.field == field
    assert error.problem == problem
    assert str(error).startswith(f"{field}:")
    assert SECRET not in str(error)
    assert "0000" not in repr(error)


def test_replace_validates_like_the_constructor() -> None:
    original = turn()
    for changes, field, _ in BAD_INPUT:
        with pytest.raises(InvalidInput) as caught:
            original.replace(**changes)
        assert caught.value.field == field
    with pytest.raises(InvalidInput) as caught:
        original.replace(colour="red")
    assert caught.value.field == "replace"
    # Found by the atheris harness: a keyword name that is not valid UTF-8.
    with pytest.raises(InvalidInput) as caught:
        original.replace(**{"\ud800": 1})
    assert caught.value.field == "replace"


def test_valid_edge_values_are_accepted() -> None:
    assert turn(sequence=0).sequence == 0
    assert turn(sequence=2**63 - 1).sequence == 2**63 - 1
    assert turn(body="").body == ""
    assert turn(protected=True).protection_reason is None
    for reason in (
        "pending-confirmation",
        "active-constraint",
        "audit-evidence",
        "unverified-provenance",
    ):
        assert turn(protected=True, protection_reason=reason).protection_reason == reason
    for role in ("system", "user", "assistant", "tool"):
        assert turn(role=role).role == role


def test_value_semantics() -> None:
    a = turn(meta={"b": "2", "a": "1"}, group="g")
    b = turn(meta={"a": "1", "b": "2"}, group="g")
    assert a == b and hash(a) == hash(b)
    assert a is not b
    assert len({a, b}) == 1
    for changes in (
        {"id": "m2"},
        {"sequence": 2},
        {"role": "assistant"},
        {"body": SECRET + "!"},
        {"protected": True},
        {"group": "h"},
        {"meta": {"a": "1"}},
    ):
        other = a.replace(**changes)
        assert other != a
        assert other.digest != a.digest
    assert a != "m1"
    assert (a == object()) is False


def test_fields_read_back_and_meta_is_a_copy() -> None:
    t = turn(protected=True, protection_reason="active-constraint", group="g", meta={"k": "v"})
    assert (t.id, t.sequence, t.role, t.body) == ("m1", 1, "user", SECRET)
    assert (t.protected, t.protection_reason, t.group) == (True, "active-constraint", "g")
    meta = t.meta
    assert meta == {"k": "v"} and type(meta) is dict
    assert meta is not None
    meta["k"] = "changed"
    assert t.meta == {"k": "v"}
    assert turn().meta is None
    with pytest.raises(AttributeError):
        t.body = "x"  # type: ignore[misc]


def test_str_subclass_body_is_stored_as_plain_str() -> None:
    class Sneaky(str):
        pass

    t = turn(body=Sneaky("abc"))
    assert type(t.body) is str
    assert t == turn(body="abc")


def test_digest_is_computed_once_and_is_32_bytes() -> None:
    t = turn()
    assert len(t.digest) == 32
    assert t.digest == t.digest
    assert t.replace().digest == t.digest


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_roundtrip(protocol: int) -> None:
    t = turn(protected=True, protection_reason="audit-evidence", group="g", meta={"k": "v"})
    back = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert back == t and back.digest == t.digest
    conversation = Conversation("c", 3, [t, turn(id="m2", sequence=5)])
    assert pickle.loads(pickle.dumps(conversation, protocol=protocol)) == conversation


def test_copy_returns_the_same_immutable_value() -> None:
    t = turn()
    assert copy.copy(t) is t
    assert copy.deepcopy(t) is t


def test_repr_hides_the_body() -> None:
    t = turn(meta={"tool_call_id": "c1"})
    text = repr(t)
    assert SECRET not in text and "0000" not in text
    assert f"<{len(SECRET)} chars>" in text
    assert "m1" in text
    conversation = Conversation("c", 0, [t])
    assert SECRET not in repr(conversation)


def test_conversation_normalises_order_and_looks_up_by_id() -> None:
    turns = [turn(id=f"t{n}", sequence=n * 10) for n in (3, 1, 2)]
    conversation = Conversation("c", 7, turns)
    assert [t.id for t in conversation.turns] == ["t1", "t2", "t3"]
    assert conversation.turn_ids == ("t1", "t2", "t3")
    assert [t.sequence for t in conversation] == [10, 20, 30]
    assert len(conversation) == 3
    assert "t2" in conversation and "t9" not in conversation and 5 not in conversation
    assert conversation.get("t3") == turns[0]
    assert conversation.get("nope") is None
    assert conversation.index_of("t2") == 1
    assert (conversation.id, conversation.revision) == ("c", 7)


def test_conversation_rejects_duplicates_and_bad_values() -> None:
    with pytest.raises(DuplicateId) as caught:
        Conversation("c", 0, [turn(), turn(sequence=2)])
    assert caught.value.id == "m1" and caught.value.code == "duplicate-id"
    assert isinstance(caught.value, InvalidInput)
    with pytest.raises(InvalidInput) as caught_seq:
        Conversation("c", 0, [turn(), turn(id="m2")])
    assert caught_seq.value.field == "sequence"
    assert not isinstance(caught_seq.value, DuplicateId)
    for args, field in (
        (("", 0, []), "id"),
        (("c", -1, []), "revision"),
        (("c", True, []), "revision"),
        (("c", 0, [SECRET]), "turns"),
        (("c", 0, SECRET), "turns"),
        (("c", 0, 5), "turns"),
    ):
        with pytest.raises(InvalidInput) as caught_bad:
            Conversation(*args)
        assert caught_bad.value.field == field
        assert SECRET not in str(caught_bad.value)


def test_invalid_input_pickles_with_its_fields() -> None:
    with pytest.raises(InvalidInput) as caught:
        turn(role="x")
    back = pickle.loads(pickle.dumps(caught.value))
    assert (back.field, back.problem, str(back)) == ("role", "unknown-value", str(caught.value))


def _best_seconds(build: Callable[[], object], rounds: int) -> float:
    """The least CPU time of this thread (which builds and hashes: the native constructors
    run on the caller's thread) that `build()` took in `rounds` runs: time the thread waited
    for a CPU, or the process was stopped, is not counted, as wall-clock time would."""
    times = []
    for _ in range(rounds):
        start = time.thread_time()
        build()
        times.append(time.thread_time() - start)
    return min(times)


def test_turn_item_does_not_hash_its_text() -> None:
    """A Turn hashes its 50 MB body (milliseconds of BLAKE3); a TurnItem of the same text only
    validates its fields (microseconds: an ASCII str is UTF-8 already). The margin is ~1000x,
    the bound 50x; CPU time of the thread, so a busy machine does not make this flaky."""
    body = "x" * 50_000_000
    item_s = _best_seconds(lambda: TurnItem("m1", "user", body, 1), rounds=5)
    turn_s = _best_seconds(lambda: Turn("m1", 1, "user", body), rounds=3)
    assert item_s * 50 < turn_s, (item_s, turn_s)


def test_turn_item_from_python_equals_the_item_of_a_ledger_turn() -> None:
    """Items built from Python carry no digest; equality, hashing and pickling never read one."""
    t = turn(protected=True, protection_reason="audit-evidence", group="g", meta={"k": "v"})
    (assembled,) = assemble_context(Conversation("c", 1, [t]), None, "p").items
    built = TurnItem("m1", "user", SECRET, 1, {"k": "v"})
    assert isinstance(assembled, TurnItem)
    assert built == assembled and assembled == built and hash(built) == hash(assembled)
    assert pickle.loads(pickle.dumps(built)) == assembled
    assert repr(built) == repr(assembled) and SECRET not in repr(built)
    assert built != TurnItem("m1", "user", SECRET, 1)
    assert built != TurnItem("m1", "user", SECRET + ".", 1, {"k": "v"})
    with pytest.raises(InvalidInput) as caught:
        TurnItem("m1", "user", SECRET + "\udcff", 1)
    assert caught.value.field == "body"
