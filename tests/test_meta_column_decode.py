"""The meta column read back (`store._rows.meta_dict`): short texts are decoded once and
kept, so a turn read costs a lookup, not a JSON decode. Checked against the plain decode it
replaced (`_reference`, kept here), over the metas of the real transcripts' turns as the
store writes them and over hypothesis texts: the same dict (a fresh one each call), or the
same damaged-row error naming the row, on the first read and on the kept one."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledgerfold._errors import StoreError
from ledgerfold.store import _rows as rows
from ledgerfold.store._rows import damaged_turn, meta_dict, meta_json
from loop_support import DATA, transcripts


def _reference(text: Any, turn_id: object = None, sequence: object = None) -> dict[str, str] | None:
    """`meta_dict` as it was before short texts were kept: a JSON decode each call."""
    if text is None:
        return None
    try:
        meta = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        meta = None
    if not isinstance(meta, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in meta.items()
    ):
        raise damaged_turn("meta", turn_id, sequence) from None
    return meta


def _outcome(read: Any, text: object) -> tuple[str, object]:
    try:
        return "value", read(text, "t-1", 7)
    except StoreError as error:
        return "error", str(error)


def _same_as_reference(text: object) -> None:
    expected = _outcome(_reference, text)
    for _ in range(2):  # the first read decodes, the second finds it kept
        got = _outcome(meta_dict, text)
        assert got == expected
        if got[0] == "value" and got[1] is not None:
            assert type(got[1]) is dict
            assert list(got[1].items()) == list(expected[1].items())  # type: ignore[union-attr]
            got[1]["mutated"] = "by a caller"  # a caller's own dict: the next read is not
    assert _outcome(meta_dict, text) == expected


def _transcript_metas() -> list[str]:
    texts: list[str] = []
    for path in sorted(DATA.glob("*.jsonl")):
        for transcript in transcripts(path.name):
            for turn in transcript.turns:
                texts.append(meta_json(turn.meta) or "{}")
                texts.append(meta_json({"agents_item": json.dumps({"role": turn.role})}) or "")
    return texts


def test_the_real_transcripts_metas_read_back_as_the_plain_decode_reads_them() -> None:
    texts = _transcript_metas()
    assert sum(text != "{}" for text in texts) > 100  # metas with call links among them
    for text in texts:
        _same_as_reference(text)


_keys = st.text(max_size=12)
_metas = st.dictionaries(_keys, st.text(max_size=40), max_size=5)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        _metas.map(meta_json),
        _metas.map(json.dumps),
        _metas.map(lambda meta: json.dumps(meta) + " "),
        _json_values.map(json.dumps),
        st.text(max_size=40),
        st.binary(max_size=40),
        _metas.map(lambda meta: json.dumps(meta).encode()),
        st.integers(),
        st.text(min_size=rows.SHORT_META - 2, max_size=rows.SHORT_META + 2).map(
            lambda body: json.dumps({"k": body[: rows.SHORT_META]})
        ),
        st.just("[" * 200 + "]" * 200),
        st.just("{" * 3000),
    )
)
def test_any_stored_meta_reads_back_as_the_plain_decode_reads_it(text: object) -> None:
    _same_as_reference(text)
