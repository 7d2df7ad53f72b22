"""`ledgerfold import` (`load_transcripts`) of a line whose text does not encode as UTF-8 (a
lone surrogate, `"\\ud800"` in the JSON). The conversation ID was refused with the one
validator's message (`conversation_id: must encode as UTF-8 (lone surrogates are
invalid)`), but a body or a turn ID with `turn 't1': body rejected (not-utf8)`, a call ID
with `turn 't1': meta rejected (not-utf8)`, a fine-tuning line's content without the reason,
and a source not at all (refused later by the store). Every field now says it alike, naming
the field where it is in the line, never its text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_support import run
from ledgerfold import InvalidInput
from ledgerfold._transcripts import load_transcripts

SECRET = "BODY-SECRET-7f3a"
BAD = SECRET + "\ud800"
REASON = "must encode as UTF-8 (lone surrogates are invalid)"


def _line(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "conversation_id": "c",
        "source": "s",
        "turns": [{"id": "t1", "sequence": 1, "role": "user", "body": "hello"}],
    }
    change(record)
    return record


def _turn(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record["turns"][0].update(fields)


#: Each field given a text that does not encode as UTF-8: the line, the name the message
#: gives it, and `.field`.
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "body": (_line(_turn(body=BAD)), "turns[0].body", "body"),
    "turn-id": (_line(_turn(id=BAD)), "turns[0].id", "id"),
    "call-id": (
        _line(_turn(role="tool", tool_call_ids=[BAD])),
        "turns[0].tool_call_ids[0]",
        "tool_call_ids",
    ),
    "source": (_line(lambda record: record.update(source=BAD)), "source", "source"),
    "conversation-id": (
        _line(lambda record: record.update(conversation_id=BAD)),
        "conversation_id",
        "conversation_id",
    ),
    "chat-content": (
        {"messages": [{"role": "user", "content": BAD}]},
        "messages[0].content",
        "messages[0].content",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_field_says_it_alike(tmp_path: Path, case: str) -> None:
    record, name, field = CASES[case]
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        load_transcripts(path)
    assert str(caught.value) == f"{path}:1: {name}: {REASON}"
    assert (caught.value.field, caught.value.problem) == (field, "not-utf8")
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)
    result = run("import", str(tmp_path / "agent.db"), str(path))
    assert result.exit_code != 0
    assert f"{name}: {REASON}" in result.output and SECRET not in result.output
    assert not (tmp_path / "agent.db").exists()
