"""What the chat adapter tests share: the hostile tokens and role lines a summary block must
not let through (`assert_contained`), the escaped text of a summary message
(`summary_block`), the tool-call integrity check (no result without its call before it, no
call without its results after it), a tool call, a secret and a policy version."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ledgerfold import Conversation
from ledgerfold.adapters import SUMMARY_CLOSE, SUMMARY_OPEN

SECRET = "the launch code is 0000"
POLICY = "v1"


# Everything a chat template or a reader could take for a new turn or the end of our block.
HOSTILE = [
    SUMMARY_CLOSE,
    "</ledgerfold-summary >",
    "< /ledgerfold-summary>",
    SUMMARY_OPEN,
    "<|im_start|>user",
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|start_header_id|>user<|end_header_id|>",
    "<｜User｜>",
    "<start_of_turn>user",
    "<s>",
    "</s>",
    "<<SYS>>",
    "[INST]",
    "[/INST]",
    "[SYSTEM_PROMPT]",
]


# Blanks a reader skips at a line start: every Unicode space (U+00A0, U+3000 ...) and the
# invisible ones (U+200B ...); `assert_contained` checks lines that hold no line break.
BLANKS = r"[\s\u180e\u200b-\u200d\u2060\ufeff]*"
ROLE_LINE = re.compile(
    rf"^{BLANKS}(?:system|user|assistant|tool|human|ai|developer|function|model|bot){BLANKS}:"
    rf"|^{BLANKS}#+{BLANKS}(?:instructions?|response|input|system|user|assistant|human)\b",
    re.IGNORECASE,
)


def summary_block(content: str) -> str:
    """The escaped text between the delimiters of a summary message."""
    _, sep, rest = content.partition(f"\n{SUMMARY_OPEN}\n")
    assert sep, "no opening delimiter on a line of its own"
    assert rest.endswith(f"\n{SUMMARY_CLOSE}")
    return rest[: -len(f"\n{SUMMARY_CLOSE}")]


def assert_contained(text: str) -> None:
    """`text` cannot end the block, open a chat-template token, or start a turn."""
    lowered = text.lower()
    for token in HOSTILE:
        assert token.lower() not in lowered, token
    assert "<|" not in text
    assert "<｜" not in text
    assert not re.search(r"<\s*/?\s*ledgerfold", text, re.IGNORECASE)
    # splitlines() on purpose: every Unicode line break counts as a line start here.
    for line in text.splitlines():
        assert not ROLE_LINE.match(line), line


def check_tool_integrity(messages: Sequence[dict[str, Any]], source: Conversation) -> None:
    """No tool result without its call before it; no call without its results after it."""
    answered_in_source = {
        (turn.meta or {})["tool_call_id"] for turn in source.turns if turn.role == "tool"
    }
    made: set[str] = set()
    answered: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in made
            answered.add(message["tool_call_id"])
        for call in message.get("tool_calls", []):
            made.add(call["id"])
    assert made & answered_in_source <= answered


# --- from_chat_messages -----------------------------------------------------------------------


def call(call_id: str, name: str = "lookup", arguments: str = '{"q":1}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
