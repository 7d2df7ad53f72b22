"""The JSONL transcript loader (tests/data/transcripts/README.md) on every real transcript and on
malformed files."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import Conversation, InvalidInput, Turn
from ledgerfold._transcripts import (
    Transcript,
    iter_transcripts,
    load_transcripts,
)

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA = SHARED / "transcripts"
FILES = sorted(DATA.glob("*.jsonl"))
SECRET = "the launch code is 0000"


def raw_records(path: Path) -> Iterator[dict[str, Any]]:
    # An independent reader: text mode, one JSON document per "\n"-terminated line.
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


@pytest.fixture(scope="module")
def transcripts() -> list[Transcript]:
    return load_transcripts(FILES)


@pytest.fixture(scope="module")
def stats() -> dict[str, Any]:
    with (DATA / "stats.json").open(encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


# --- the real data -------------------------------------------------------------------------


def test_all_files_load(transcripts: list[Transcript]) -> None:
    assert len(FILES) == 4
    assert len(transcripts) == 244
    assert len({t.conversation_id for t in transcripts}) == 244


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_counts_match_stats(path: Path, stats: dict[str, Any]) -> None:
    expected = stats[path.stem]
    loaded = list(iter_transcripts(path))
    turns = [turn for transcript in loaded for turn in transcript.turns]
    assert len(loaded) == expected["conversations"]
    assert len(turns) == expected["turns_total"]
    assert dict(Counter(turn.role for turn in turns)) == expected["roles"]
    assert sum(len(turn.body.encode("utf-8")) for turn in turns) == expected["body_bytes_total"]
    with_call_ids = sum(1 for turn in turns if turn.meta and "tool_call_id" in turn.meta)
    with_call_ids += sum(1 for turn in turns if turn.meta and "tool_call_ids" in turn.meta)
    assert with_call_ids == expected["turns_with_tool_call_ids"]


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_fields_as_given(path: Path) -> None:
    for transcript, record in zip(iter_transcripts(path), raw_records(path), strict=True):
        assert transcript.conversation_id == record["conversation_id"]
        assert transcript.source == record["source"]
        assert len(transcript.turns) == len(record["turns"])
        for turn, raw in zip(transcript.turns, record["turns"], strict=True):
            assert (turn.id, turn.sequence, turn.role, turn.body) == (
                raw["id"],
                raw["sequence"],
                raw["role"],
                raw["body"],
            )
            assert not turn.protected
            call_ids = raw["tool_call_ids"]
            meta = turn.meta or {}
            if raw["role"] == "assistant" and call_ids:
                assert json.loads(meta["tool_call_ids"]) == call_ids
                calls = json.loads(meta["tool_calls"])
                appended = [
                    json.loads(line)["tool_call"]
                    for line in raw["body"].split("\n")[-len(call_ids) :]
                ]
                assert [call["id"] for call in calls] == call_ids
                for call, source in zip(calls, appended, strict=True):
                    assert call["type"] == "function"
                    assert call["function"]["name"] == source["name"]
                    assert json.loads(call["function"]["arguments"]) == source["arguments"]
            elif raw["role"] == "tool":
                assert meta == {"tool_call_id": call_ids[0]}
            else:
                assert turn.meta is None
                assert turn.group is None


def test_groups_hold_a_call_and_all_its_results(transcripts: list[Transcript]) -> None:
    groups_seen = 0
    for transcript in transcripts:
        members: dict[str, list[Turn]] = {}
        for turn in transcript.turns:
            if turn.group is not None:
                members.setdefault(turn.group, []).append(turn)
        calls_by_id: dict[str, str] = {}
        for group, turns in members.items():
            callers = [t for t in turns if t.role == "assistant"]
            assert len(callers) == 1, group
            caller = callers[0]
            assert turns[0] is caller  # the call comes before its results
            call_ids = json.loads((caller.meta or {})["tool_call_ids"])
            assert group == "tools:" + call_ids[0]
            for call_id in call_ids:
                calls_by_id[call_id] = group
            for result in turns[1:]:
                assert result.role == "tool"
                assert (result.meta or {})["tool_call_id"] in call_ids
            groups_seen += 1
        # Every tool turn answering a known call is in its caller's group.
        for turn in transcript.turns:
            if turn.role == "tool":
                call_id = (turn.meta or {})["tool_call_id"]
                assert turn.group == calls_by_id.get(call_id)
                assert turn.group is not None  # the README: every tool turn answers a call
    assert groups_seen == 1471


def test_transcript_is_a_frozen_value_with_a_safe_repr(transcripts: list[Transcript]) -> None:
    transcript = transcripts[0]
    text = repr(transcript)
    assert transcript.conversation_id in text
    assert f"<{len(transcript.turns)} turns>" in text
    assert all(turn.body not in text for turn in transcript.turns if len(turn.body) > 3)
    with pytest.raises(AttributeError):
        transcript.source = "x"  # type: ignore[misc]
    assert isinstance(transcript.turns, tuple)
    conversation = transcript.conversation()
    assert isinstance(conversation, Conversation)
    assert conversation.id == transcript.conversation_id
    assert conversation.turns == transcript.turns
    assert transcript.conversation(revision=3).revision == 3


# --- line handling ---------------------------------------------------------------------------


def write_lines(tmp_path: Path, *records: Any, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    with path.open("w", encoding="utf-8", newline="") as handle:
        for record in records:
            text = record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)
            handle.write(text + "\n")
    return path


def record(*turns: dict[str, Any], conversation_id: str = "c") -> dict[str, Any]:
    return {"conversation_id": conversation_id, "source": "test", "turns": list(turns)}


def raw_turn(number: int, role: str, body: Any = SECRET, /, **extra: Any) -> dict[str, Any]:
    fields = {"id": f"c:{number}", "sequence": number, "role": role, "body": body}
    fields["tool_call_ids"] = []
    fields.update(extra)
    return fields


def call_line(call_id: str, name: str = "lookup", **arguments: Any) -> str:
    return json.dumps({"tool_call": {"id": call_id, "name": name, "arguments": arguments}})


def test_unicode_line_breaks_stay_inside_bodies(tmp_path: Path) -> None:
    body = "a\u2028b\u2029c\x85d\x0ce\rf"
    path = write_lines(tmp_path, record(raw_turn(1, "user", body)), record(raw_turn(1, "user")))
    loaded = list(iter_transcripts(path))
    assert len(loaded) == 2
    assert loaded[0].turns[0].body == body


def test_blank_lines_and_bom_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    line = json.dumps(record(raw_turn(1, "user")))
    path.write_bytes(b"\xef\xbb\xbf" + line.encode() + b"\n\n  \n" + line.encode())
    assert len(list(iter_transcripts(path))) == 2


def test_multiple_calls_and_unknown_results(tmp_path: Path) -> None:
    body = "checking\n" + call_line("c1", city="Paris") + "\n" + call_line("c2", "fetch")
    path = write_lines(
        tmp_path,
        record(
            raw_turn(1, "user"),
            raw_turn(2, "assistant", body, tool_call_ids=["c1", "c2"]),
            raw_turn(3, "tool", "sunny", tool_call_ids=["c2"]),
            raw_turn(4, "tool", "rain", tool_call_ids=["c1"]),
            raw_turn(5, "tool", "", tool_call_ids=["ghost"]),
        ),
    )
    (transcript,) = list(iter_transcripts(path))
    user, caller, first, second, orphan = transcript.turns
    assert caller.body == body  # the ledger keeps the body as given
    assert caller.group == first.group == second.group == "tools:c1"
    assert user.group is None
    assert orphan.group is None
    assert orphan.meta == {"tool_call_id": "ghost"}
    calls = json.loads((caller.meta or {})["tool_calls"])
    assert calls == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"city":"Paris"}'},
        },
        {"id": "c2", "type": "function", "function": {"name": "fetch", "arguments": "{}"}},
    ]


def test_the_library_does_not_look_for_data_beside_its_installation() -> None:
    """Where the real transcripts are is the tests' business: the library has
    no default data directory."""
    import ledgerfold._transcripts as transcripts

    assert not hasattr(transcripts, "default_data_dir")
    source = Path(transcripts.__file__).read_text(encoding="utf-8")
    assert "__file__" not in source and "LEDGERFOLD_DATA" not in source


def test_load_transcripts_accepts_one_path_a_list_or_a_directory(tmp_path: Path) -> None:
    first = write_lines(tmp_path, record(raw_turn(1, "user"), conversation_id="a"), name="1.jsonl")
    second = write_lines(tmp_path, record(raw_turn(1, "user"), conversation_id="b"), name="2.jsonl")
    assert [t.conversation_id for t in load_transcripts(str(first))] == ["a"]
    assert [t.conversation_id for t in load_transcripts([second, first])] == ["b", "a"]
    assert [t.conversation_id for t in load_transcripts(tmp_path)] == ["a", "b"]


# --- malformed lines -------------------------------------------------------------------------

GOOD = record(raw_turn(1, "user"))
CALLER = raw_turn(2, "assistant", SECRET + "\n" + call_line("c1"), tool_call_ids=["c1"])
# Deeper than Python's JSON parser can recurse: it raised RecursionError.
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_CALL_LINE = '{"tool_call": {"id": "c1", "name": "f", "arguments": ' + DEEP + "}}"
NAN_CALL_LINE = '{"tool_call": {"id": "c1", "name": "f", "arguments": {"x": NaN}}}'

MALFORMED: list[tuple[str, Any, str]] = [
    ("not-json", '{"conversation_id": "c", ' + SECRET, "JSON"),
    ("not-an-object", json.dumps([SECRET]), "object"),
    ("no-conversation-id", {"source": "s", "turns": []}, "conversation_id"),
    ("empty-conversation-id", record(conversation_id=""), "conversation_id"),
    ("source-not-str", {"conversation_id": "c", "source": 1, "turns": []}, "source"),
    ("turns-not-list", {"conversation_id": "c", "source": "s", "turns": SECRET}, "turns"),
    ("turn-not-object", {"conversation_id": "c", "source": "s", "turns": [SECRET]}, "turns[0]"),
    ("id-missing", record({"sequence": 1, "role": "user", "body": SECRET}), "id"),
    ("sequence-str", record(raw_turn(1, "user", sequence="1")), "sequence"),
    ("sequence-bool", record(raw_turn(1, "user", sequence=True)), "sequence"),
    ("sequence-negative", record(raw_turn(1, "user", sequence=-1)), "sequence"),
    ("role-unknown", record(raw_turn(1, "admin")), "role"),
    ("body-not-str", record(raw_turn(1, "user", 7)), "body"),
    ("body-lone-surrogate", json.dumps(record(raw_turn(1, "user", "\ud800"))), "body"),
    ("duplicate-id", record(raw_turn(1, "user"), raw_turn(2, "user", id="c:1")), "id"),
    ("duplicate-sequence", record(raw_turn(1, "user"), raw_turn(1, "user", id="x")), "sequence"),
    ("call-ids-not-list", record(raw_turn(1, "tool", tool_call_ids="c1")), "tool_call_ids"),
    ("call-ids-on-user", record(raw_turn(1, "user", tool_call_ids=["c1"])), "tool_call_ids"),
    (
        "tool-two-ids",
        record(CALLER, raw_turn(3, "tool", tool_call_ids=["c1", "c2"])),
        "tool_call_ids",
    ),
    ("call-line-missing", record(raw_turn(2, "assistant", tool_call_ids=["c1"])), "body"),
    (
        "call-line-other-id",
        record(raw_turn(2, "assistant", SECRET + "\n" + call_line("c9"), tool_call_ids=["c1"])),
        "body",
    ),
    ("call-made-twice", record(CALLER, {**CALLER, "id": "c:3", "sequence": 3}), "tool_call_ids"),
    (
        "nested-too-deeply",
        '{"conversation_id": "c", "source": "' + SECRET + '", "turns": ' + DEEP + "}",
        "nested too deeply",
    ),
    ("nan", '{"conversation_id": "c", "source": "s", "turns": [], "x": NaN}', "NaN is not JSON"),
    (
        "call-line-nested-too-deeply",
        record(raw_turn(2, "assistant", SECRET + "\n" + DEEP_CALL_LINE, tool_call_ids=["c1"])),
        "nested too deeply",
    ),
    (
        "call-line-nan",
        record(raw_turn(2, "assistant", SECRET + "\n" + NAN_CALL_LINE, tool_call_ids=["c1"])),
        "body",
    ),
]


@pytest.mark.parametrize(
    ("line", "field"), [(m[1], m[2]) for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_malformed_line_names_file_line_and_field(tmp_path: Path, line: Any, field: str) -> None:
    path = write_lines(tmp_path, GOOD, GOOD, line, name="broken.jsonl")
    loaded: list[Transcript] = []
    with pytest.raises(InvalidInput) as caught:
        loaded.extend(iter_transcripts(path))
    message = str(caught.value)
    assert message.startswith(f"{path}:3: ")
    assert field in message
    assert SECRET not in message
    assert "0000" not in message
    assert len(loaded) == 2  # lines before the bad one were yielded


@pytest.mark.parametrize("key", ["conversation_id", "source", "turns"])
def test_a_missing_key_is_called_missing(tmp_path: Path, key: str) -> None:
    """A line without a required key says the key is missing, not "got NoneType"."""
    line = {k: v for k, v in record(raw_turn(1, "user")).items() if k != key}
    path = write_lines(tmp_path, line, name="short.jsonl")
    with pytest.raises(InvalidInput) as caught:
        list(iter_transcripts(path))
    assert str(caught.value).startswith(f"{path}:1: {key}: missing (must be ")
    assert "NoneType" not in str(caught.value)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"conversation_id": "\xff"}\n')
    with pytest.raises(InvalidInput, match=r"bytes\.jsonl:2: not valid UTF-8"):
        list(iter_transcripts(path))


def test_one_helper_imports_optional_dependencies(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ledgerfold.dask` and the Parquet export share one helper, whose error says
    what to install."""
    import sys

    from ledgerfold import dask, export
    from ledgerfold._optional import require

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # an import of it now fails
    with pytest.raises(
        ImportError, match=r"Parquet export needs pyarrow: pip install 'ledgerfold\[parquet\]'"
    ):
        export._require_pyarrow()
    monkeypatch.setitem(sys.modules, "pyarrow.fs", None)
    with pytest.raises(
        ImportError, match=r"ledgerfold.dask needs pyarrow: pip install 'ledgerfold\[dask\]'"
    ):
        dask._require("pyarrow.fs")
    for module in (dask, export):
        assert "importlib" not in Path(module.__file__ or "").read_text(encoding="utf-8")
        assert "require" in vars(module) and vars(module)["require"] is require
