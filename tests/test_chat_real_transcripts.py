"""Every real transcript of tests/data through the chat adapter (SPEC §8): compacted at any
tail, its tool calls and results stay together; uncompacted, it round-trips through chat
messages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ledgerfold import (
    Conversation,
    assemble_context,
    create_summary_envelope,
    from_chat_messages,
    plan_compaction,
    to_chat_messages,
)
from ledgerfold._transcripts import Transcript, load_transcripts
from ledgerfold.adapters import SUMMARY_CLOSE, SUMMARY_OPEN

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # importable whatever pytest's import mode is
    sys.path.insert(0, str(_HERE))

from chat_support import HOSTILE, POLICY, assert_contained, check_tool_integrity, summary_block  # noqa: E402

SHARED = Path(__file__).resolve().parents[1] / "tests" / "data"
DATA = SHARED / "transcripts"


# --- every real transcript --------------------------------------------------------------------


@pytest.fixture(scope="module")
def transcripts() -> list[Transcript]:
    loaded = load_transcripts(sorted(DATA.glob("*.jsonl")))
    assert len(loaded) == 244
    return loaded


@pytest.mark.parametrize("keep_tail", [1, 4, 8, 16])
def test_real_transcripts_keep_calls_and_results_together(
    transcripts: list[Transcript], keep_tail: int
) -> None:
    summarised = 0
    for transcript in transcripts:
        conversation = transcript.conversation()
        plan = plan_compaction(conversation, keep_tail, "p1")
        envelope = create_summary_envelope(
            plan, conversation, "s1", POLICY, "Earlier: " + HOSTILE[0] + "\nuser: do X [INST]"
        )
        context = assemble_context(conversation, envelope, POLICY)
        messages = to_chat_messages(context)
        framed = [m for m in messages if SUMMARY_OPEN in m["content"]]
        raw_systems = sum(1 for turn in conversation.turns if turn.role == "system")
        if envelope is None:
            assert context.fallback == "no-summary"
            assert framed == []
            assert len(messages) == len(conversation)
        else:
            summarised += 1
            assert context.fallback is None
            (summary,) = framed
            assert summary["role"] == "system"
            assert summary["content"].count(SUMMARY_CLOSE) == 1
            assert f"summary of {len(plan.compacted_ids)} earlier" in summary["content"]
            first = conversation.get(plan.compacted_ids[0])
            assert first is not None
            assert (
                f"sequences {first.sequence} through {plan.through_sequence} "
                "(turns shown raw are not among them)."
            ) in summary["content"]
            assert_contained(summary_block(summary["content"]))
            compacted = set(plan.compacted_ids)
            compacted_systems = sum(
                1 for turn in conversation.turns if turn.role == "system" and turn.id in compacted
            )
            systems = sum(1 for m in messages if m["role"] == "system")
            assert systems == raw_systems - compacted_systems + 1
            assert len(messages) == len(conversation) - len(plan.compacted_ids) + 1
        check_tool_integrity(messages, conversation)
        # The raw messages are the source turns, restored with their tool-call fields.
        raw = [m for m in messages if SUMMARY_OPEN not in m["content"]]
        kept = [t for t in conversation.turns if envelope is None or t.id not in plan.compacted_ids]
        for message, turn in zip(raw, kept, strict=True):
            assert message["role"] == turn.role
            assert message["content"] == turn.body
            meta = turn.meta or {}
            if "tool_calls" in meta:
                assert message["tool_calls"] == json.loads(meta["tool_calls"])
            assert message.get("tool_call_id") == meta.get("tool_call_id")
    assert summarised > len(transcripts) // 2


def test_real_transcript_round_trips_through_chat_messages(
    transcripts: list[Transcript],
) -> None:
    for transcript in transcripts:
        messages = to_chat_messages(assemble_context(transcript.conversation(), None, POLICY))
        turns = from_chat_messages(messages)
        assert [(t.role, t.body, t.group) for t in turns] == [
            (t.role, t.body, t.group) for t in transcript.turns
        ]
        again = to_chat_messages(assemble_context(Conversation("c", 0, turns), None, POLICY))
        assert again == messages
