"""One validator per kind of value (issue 26 item 4): every entry point that takes a value
of a kind accepts and refuses exactly what `ledgerfold._validate` does for that kind, with
the same message naming the field. A kind checked with two limits (`retain_days=1e10`
accepted by the store and refused by the policy, as it was) fails here."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledgerfold as lf
from ledgerfold import _validate, to_chat_messages

CID = "c"

#: Values probing every edge of a number's checks: type, sign, zero, size, finiteness.
PROBES: list[object] = [
    None,
    0,
    0.0,
    0.5,
    1,
    86_400,
    1e9,
    1e10,
    1e12,
    1e300,
    10**400,
    math.inf,
    -math.inf,
    math.nan,
    -1,
    -0.5,
    True,
    False,
    "1",
    [1],
]


def _verdict(call: Callable[[], object]) -> str | None:
    """None when `call` accepts the value, else the `InvalidInput` message (any other
    exception is a failure of the test: bad input must not crash)."""
    try:
        call()
    except lf.InvalidInput as error:
        return str(error)
    return None


@pytest.fixture
def store(tmp_path: Path) -> lf.SQLiteStore:
    opened = lf.SQLiteStore(tmp_path / "kinds.db")
    opened.append(CID, "user", "hello")
    return opened


def _days_entry_points(store: lf.SQLiteStore) -> dict[str, Callable[[object], object]]:
    return {
        "CompactionPolicy(retain_days=)": lambda v: lf.CompactionPolicy("p", retain_days=v),  # type: ignore[arg-type]
        "store.apply_retention(retain_days=)": lambda v: store.apply_retention(
            CID,
            retain_days=v,  # type: ignore[arg-type]
        ),
    }


@pytest.mark.parametrize("value", PROBES, ids=repr)
def test_retain_days_has_one_limit(store: lf.SQLiteStore, value: object) -> None:
    expected = _verdict(lambda: _validate.duration("retain_days", value, unit="days"))
    for name, entry in _days_entry_points(store).items():
        assert _verdict(partial(entry, value)) == expected, name


@pytest.mark.parametrize("value", PROBES, ids=repr)
def test_older_than_is_a_duration(store: lf.SQLiteStore, value: object) -> None:
    expected = _verdict(lambda: _validate.duration("older_than", value, unit="seconds"))
    assert _verdict(lambda: store.prune_versions(CID, older_than=value)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", PROBES, ids=repr)
def test_timeout_is_a_positive_duration(store: lf.SQLiteStore, value: object) -> None:
    expected = _verdict(lambda: _validate.duration("timeout", value, unit="seconds", positive=True))
    policy = lf.CompactionPolicy("p")
    assert _verdict(lambda: lf.Compactor(store, policy, timeout=value)) == expected  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
    )
)
def test_policy_and_store_agree_on_any_number_of_days(value: object) -> None:
    with lf.SQLiteStore(":memory:") as store:
        verdicts = {
            name: _verdict(lambda entry=entry: entry(value))  # type: ignore[misc]
            for name, entry in _days_entry_points(store).items()
        }
    assert len(set(verdicts.values())) == 1, verdicts


def test_a_duration_is_refused_with_one_message_naming_the_field(store: lf.SQLiteStore) -> None:
    messages = {
        _verdict(lambda: lf.CompactionPolicy("p", retain_days=-1)),
        _verdict(lambda: store.apply_retention(CID, retain_days=-1)),
    }
    assert messages == {"retain_days: must be None or a finite number of days >= 0"}
    assert _verdict(lambda: store.prune_versions(older_than=math.nan)) == (
        "older_than: must be None or a finite number of seconds >= 0"
    )
    assert _verdict(lambda: lf.Compactor(store, lf.CompactionPolicy("p"), timeout=0)) == (
        "timeout: must be None or a finite number of seconds > 0"
    )


def test_a_duration_beyond_the_calendar_matches_nothing(store: lf.SQLiteStore) -> None:
    """A valid duration reaching before year 1 is no error: no row is that old."""
    compactor = lf.Compactor(store, lf.CompactionPolicy("p", keep_tail=1, min_new_turns=1))
    store.append(CID, "assistant", "hi")
    store.append(CID, "user", "more")
    assert compactor.compact(CID).status == "accepted"
    store.append(CID, "assistant", "again")
    store.append(CID, "user", "and more")
    assert compactor.compact(CID, force=True).status == "accepted"
    before = [record.status for record in store.summary_history(CID)]
    assert store.prune_versions(CID, keep=0, older_than=1e300) == 0
    assert store.apply_retention(CID, retain_days=1e300) is None
    assert [record.status for record in store.summary_history(CID)] == before


def test_a_timeout_beyond_the_platform_limit_means_no_limit(store: lf.SQLiteStore) -> None:
    policy = lf.CompactionPolicy("p", keep_tail=1, min_new_turns=1)
    compactor = lf.Compactor(store, policy, summarizer=lambda request: "summary", timeout=1e300)
    store.append(CID, "assistant", "hi")
    assert compactor.compact(CID).status == "accepted"


@pytest.mark.parametrize(
    ("field", "call"),
    [
        ("erase", lambda s: s.retract(CID, "x", erase=1)),
        ("force", lambda s: s.purge_through(CID, 1, "r", force="yes")),
        ("force", lambda s: s.preview_purge(CID, 1, force=0)),
        (
            "turns[0].protected",
            lambda s: s.append_many(CID, [{"role": "user", "body": "b", "protected": 1}]),
        ),
        ("protected", lambda s: s.append(CID, "user", "b", protected=None)),
        ("recall", lambda s: to_chat_messages(s.context(CID, "p"), recall=1)),
        ("read_only", lambda s: lf.SQLiteStore(":memory:", read_only=1)),
    ],
)
def test_a_flag_is_refused_with_one_message(
    store: lf.SQLiteStore, field: str, call: Callable[[lf.SQLiteStore], object]
) -> None:
    message = _verdict(lambda: call(store))
    assert message is not None
    assert message.startswith(f"{field}: must be bool, got ")


@pytest.mark.parametrize(
    ("field", "call", "allowed"),
    [
        ("scope", lambda s: s.search(CID, "q", scope="raw"), ("covered", "all")),
        ("durability", lambda s: lf.SQLiteStore(":memory:", durability="fast"), ("full", "normal")),
    ],
)
def test_a_name_from_a_fixed_set_is_refused_with_one_message(
    store: lf.SQLiteStore,
    field: str,
    call: Callable[[lf.SQLiteStore], object],
    allowed: tuple[str, ...],
) -> None:
    assert _verdict(lambda: call(store)) == _verdict(
        lambda: _validate.choice(field, "not-one", allowed)
    )


@pytest.mark.parametrize("value", [0, 1, 100, 101, -1, True, 2**63, "5"], ids=repr)
def test_search_limit_is_an_integer_in_range(store: lf.SQLiteStore, value: object) -> None:
    expected = _verdict(lambda: _validate.integer("limit", value, minimum=1, maximum=100))
    assert _verdict(lambda: store.search(CID, "q", limit=value)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, 1, 2**63 - 1, 2**63, -1, True, 1.0], ids=repr)
def test_keep_tail_has_one_limit(store: lf.SQLiteStore, value: object) -> None:
    expected = _verdict(lambda: _validate.integer("keep_tail", value, minimum=1))
    conversation = store.load(CID)
    entry_points = {
        "CompactionPolicy": lambda: lf.CompactionPolicy("p", keep_tail=value),  # type: ignore[arg-type]
        "plan_compaction": lambda: lf.plan_compaction(conversation, value, "plan"),  # type: ignore[arg-type]
        "store.start_plan": lambda: store.start_plan(CID, value, "p"),  # type: ignore[arg-type]
    }
    for name, entry in entry_points.items():
        verdict = _verdict(entry)
        # The Rust core names the field as the Python layer does.
        assert (verdict is None) == (expected is None), name
        if expected is not None:
            assert verdict is not None and verdict.startswith("keep_tail: "), name


@pytest.mark.parametrize("value", [0, 1, -1, True, 2**63, None], ids=repr)
def test_retain_turns_has_one_limit(store: lf.SQLiteStore, value: object) -> None:
    expected = (
        None
        if value is None
        else _verdict(lambda: _validate.integer("retain_turns", value, minimum=0))
    )
    assert _verdict(lambda: lf.CompactionPolicy("p", retain_turns=value)) == expected  # type: ignore[arg-type]
    assert _verdict(lambda: store.apply_retention(CID, retain_turns=value)) == expected  # type: ignore[arg-type]


def test_a_callback_is_refused_with_one_message_per_signature(store: lf.SQLiteStore) -> None:
    from ledgerfold import ExtractiveSummarizer

    policy = lf.CompactionPolicy("p")
    on_event = {
        _verdict(lambda: lf.SQLiteStore(":memory:", on_event="hook")),  # type: ignore[arg-type]
        _verdict(lambda: lf.Compactor(store, policy, on_event="hook")),  # type: ignore[arg-type]
    }
    assert on_event == {"on_event: must be None or a callable Event -> None"}
    token_counter = {
        _verdict(lambda: lf.CompactionPolicy("p", token_counter=1)),  # type: ignore[arg-type]
        _verdict(lambda: ExtractiveSummarizer(token_counter=1)),  # type: ignore[arg-type]
    }
    assert token_counter == {"token_counter: must be None or a callable str -> int"}
