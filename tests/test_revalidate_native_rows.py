"""The native revalidation of rows handed over directly (`_native.revalidate_flat`): its
input is validated, a stored field of the wrong type makes an invalid turn (a verdict, not
an error), text may come as UTF-8 bytes, rows in any order give per-summary totals, and the
stored `meta` JSON reads as Python's json module reads it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold import InvalidInput, Turn, _native, fingerprint_turns

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))


from revalidate_support import ROW, SUMMARY  # noqa: E402


def test_native_batch_input_is_validated() -> None:
    verdicts, turns, size = _native.revalidate_flat([ROW], [(1, "a")], [SUMMARY], 1)
    assert verdicts == [("c", "s", "source-modified", None)] and (turns, size) == (1, 2)
    for rows, sources, summaries in (
        (5, [], []),
        ([ROW[:8]], [], []),
        ([(1, *ROW[1:])], [], []),
        ([("c", 1, *ROW[2:])], [], []),
        ([ROW], [(1,)], [SUMMARY]),
        ([ROW], [("1", "a")], [SUMMARY]),
        ([ROW], [(1, "a")], [("c", 1, "s")]),
        ([ROW], [(1, "a")], [("c", 1, "s", 5)]),
    ):
        with pytest.raises(InvalidInput):
            _native.revalidate_flat(rows, sources, summaries, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        _native.revalidate_flat([ROW], [(1, "a")], [SUMMARY], 0)


def test_ids_that_are_not_utf8_are_damage_not_errors() -> None:
    """A stored turn ID or source ID that is not UTF-8 reads as an ID no valid turn has: the
    row is an invalid turn, and such a source cites none of the valid ones."""
    damaged_row = ("c", b"\xff", *ROW[2:])
    assert _native.revalidate_flat([damaged_row], [(1, "a")], [SUMMARY], 1)[0] == [
        ("c", "s", "source-missing", "a")
    ]
    assert _native.revalidate_flat([ROW], [(1, b"\xff")], [SUMMARY], 1)[0] == [
        ("c", "s", "source-missing", "")
    ]
    # A row whose conversation key is not UTF-8 belongs to no summary (their keys are text).
    assert _native.revalidate_flat([(b"\xff", *ROW[1:])], [(1, "a")], [SUMMARY], 1)[0] == [
        ("c", "s", "source-missing", "a")
    ]


@pytest.mark.parametrize(
    ("position", "value"),
    [
        (2, "1"),
        (2, 1.0),
        (3, 5),
        (3, b"\xff"),
        (4, 7),
        (5, "yes"),
        (5, None),
        (6, 3),
        (7, 3),
        (8, {"k": "v"}),
        (8, b"{\xff"),
        (7, b"\xff"),
        (4, "\ud800"),
    ],
)
def test_a_stored_field_of_the_wrong_type_is_an_invalid_turn(position: int, value: object) -> None:
    """Storage damage is a verdict: the row is no longer a turn, its summary is stale and
    the row is named; only the keys (conversation and turn ID) must be well-typed."""
    good = Turn("a", 1, "user", "hi")
    summary = ("c", 1, "s", _native.fingerprint_turns([good]))
    row = ("c", "a", 1, "user", b"hi", 0, None, None, None)
    assert _native.revalidate_flat([row], [(1, "a")], [summary], 1)[0] == [("c", "s", None, None)]
    damaged = (*row[:position], value, *row[position + 1 :])
    verdicts, turns, _ = _native.revalidate_flat([damaged], [(1, "a")], [summary], 1)
    assert verdicts == [("c", "s", "source-modified", "a")] and turns == 1


def test_text_fields_as_utf8_bytes_read_like_str() -> None:
    """What a row read with every text column cast to a blob gives."""
    good = Turn("a", 1, "user", "hi", meta={"k": "v"}, group="g")
    summary = ("c", 1, "s", _native.fingerprint_turns([good]))
    row = (b"c", b"a", 1, b"user", b"hi", 0, None, b"g", b'{"k": "v"}')
    assert _native.revalidate_flat([row], [(1, b"a")], [summary], 1)[0] == [("c", "s", None, None)]


def test_flat_rows_in_any_order_with_per_summary_totals() -> None:
    turns = {
        "c1": [Turn("a", 1, "user", "one"), Turn("b", 2, "user", "two!")],
        "c2": [Turn("x", 5, "assistant", "hello", meta={"k": "v"})],
    }
    rows = [
        (conversation, t.id, t.sequence, t.role, t.body.encode(), 0, None, None, None)
        for conversation, items in turns.items()
        for t in items
    ]
    rows[-1] = (*rows[-1][:8], json.dumps(turns["c2"][0].meta))
    rows.reverse()  # grouping must not depend on row order
    from ledgerfold import fingerprint_turns

    summaries = [
        ("c1", 10, "s1", fingerprint_turns(turns["c1"])),
        ("c2", 20, "s2", fingerprint_turns(turns["c2"])),
    ]
    sources = [(20, "x"), (10, "a"), (10, "b")]
    verdicts, total_turns, total_bytes = _native.revalidate_flat(
        rows, sources, summaries, 1, per_summary=True
    )
    assert verdicts == [("c1", "s1", None, None, 2, 7), ("c2", "s2", None, None, 1, 5)]
    assert (total_turns, total_bytes) == (3, 12)
    plain, _, _ = _native.revalidate_flat(rows, sources, summaries, 1)
    assert plain == [verdict[:4] for verdict in verdicts]
    # A source that lost its row is missing; a sources list in the wrong order is reordered.
    without_a = [row for row in rows if row[1] != "a"]
    missing, _, _ = _native.revalidate_flat(without_a, sources, summaries, 1)
    assert missing[0][2:] == ("source-missing", "a")
    swapped, _, _ = _native.revalidate_flat(rows, [(20, "x"), (10, "b"), (10, "a")], summaries, 1)
    assert swapped[0][2:] == ("source-reordered", "b")


_META_TEXT = st.text(
    st.characters(codec="utf-8")  # every code point but lone surrogates
    | st.sampled_from(['"', "\\", "/", "\n", "\t", "\x00", "\x1f", "\u2028", "é", "😀"]),
    max_size=24,
).map(lambda text: json.dumps([text]) if len(text) % 3 == 0 else text)  # JSON inside JSON


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(_META_TEXT.filter(bool), _META_TEXT, max_size=4),
    st.sampled_from([{}, {"ensure_ascii": False}, {"indent": 1}, {"separators": (",", ":")}]),
)
def test_stored_meta_json_reads_as_pythons_json_reads_it(
    meta: dict[str, str], options: dict[str, object]
) -> None:
    """The native reader of the stored `meta` column against the json module: whatever way
    Python wrote the object (escaped or raw non-ASCII, surrogate pairs, nested escapes),
    the row re-hashes to the digest of the Turn with that meta."""
    turn = Turn("t", 1, "tool", "body", meta=meta)
    stored = json.dumps(meta, **options)  # type: ignore[arg-type]
    row = ("c", "t", 1, "tool", b"body", 0, None, None, stored)
    summary = ("c", 1, "s", fingerprint_turns([turn]))
    assert _native.revalidate_flat([row], [(1, "t")], [summary], 1)[0] == [("c", "s", None, None)]
