"""Terminal colours in tool output (SPEC §16.1, §16.5): an ANSI/ECMA-48 control sequence
(`ESC [` or U+009B, parameter bytes, intermediate bytes, a final byte) is a separator, so
`\\x1b[38;21mHEX\\x1b[0m` gives the token `hex` (not `38`, `21`, `mhex`) and a colored word
in a command's output is found by the word. The real transcripts hold such output
(SWE-agent's colored log lines)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

import ledgerfold as lf
from ledgerfold import _segment as seg

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

import segment_reference as ref  # noqa: E402

TRANSCRIPTS = _HERE / "data" / "transcripts"
IMPLEMENTATIONS = [pytest.param(seg, id="rust"), pytest.param(ref, id="reference")]


def tokens_of(impl: ModuleType, text: str) -> list[str]:
    return [token for _, _, joined in impl.index_passages(text) for token in joined.split(" ")]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("\x1b[38;21mHEX\x1b[0m", "HEX"),
        ("\x1b[31mFAILED\x1b[0m tests/test_io.py", "FAILED tests/test_io.py"),
        ("\x1b[1;33;40mwarning\x1b[mdeprecated", "warning deprecated"),
        ("\x1b[Kdone", "done"),
        ("\x1b[2 qcursor", "cursor"),  # an intermediate byte (space) before the final one
        ("\x9b32mgreen\x9b0m", "green"),  # the one-character CSI
        ("数据\x1b[0m库", "数据 库"),
        ("a\x1b[", "a"),  # cut before its final byte: what there is of it separates
    ],
)
def test_a_control_sequence_is_a_separator(impl: ModuleType, text: str, plain: str) -> None:
    assert tokens_of(impl, text) == tokens_of(impl, plain)
    assert impl.query_terms(text) == impl.query_terms(plain)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_text_that_is_no_control_sequence_is_unchanged(impl: ModuleType) -> None:
    assert tokens_of(impl, "[31mFAILED") == ["31", "mfail"]  # no ESC: plain text
    assert tokens_of(impl, "press \x1b to quit") == tokens_of(impl, "press to quit")


def _real_colored_turn() -> tuple[str, str]:
    """A real tool output's conversation ID and a body with a colored word."""
    with (TRANSCRIPTS / "swe_agent.jsonl").open(encoding="utf-8") as handle:
        for line in handle:  # never str.splitlines(): bodies contain U+2028
            for turn in json.loads(line)["turns"]:
                if "\x1b[38;21mHEX" in turn["body"]:
                    return turn["id"], turn["body"]
    raise AssertionError("the transcripts hold no colored HEX")


def test_a_colored_word_of_a_real_tool_output_is_found(tmp_path: Path) -> None:
    turn_id, body = _real_colored_turn()
    with lf.SQLiteStore(tmp_path / "ledger.db") as store:
        store.append("c", "user", "which integer types are there?", id="q")
        store.append("c", "tool", body, id=turn_id)
        hits = store.search("c", "HEX", scope="all")
        assert [hit.turn_id for hit in hits] == [turn_id]
        assert "HEX" in hits[0].text
