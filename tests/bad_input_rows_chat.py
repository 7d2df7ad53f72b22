"""Rows of the bad-input table (`bad_input_table.py`): chat messages
(`from_chat_messages`) and transcripts (`load_transcripts`, `ledgerfold import`)."""

from __future__ import annotations

import ledgerfold as lf
from bad_input_support import (
    DEEP_JSON,
    DUPLICATE,
    INVALID,
    SECRET_BODY,
    SURROGATE,
    BadInput,
    _deep_list,
    _tool_calls_with,
    on_store,
    on_transcript,
    row,
)

ROWS: tuple[BadInput, ...] = (
    # ---- from_chat_messages
    row(
        "from_chat_messages: not a list of messages",
        "from_chat_messages('hello')",
        lambda: lf.from_chat_messages(SECRET_BODY),  # type: ignore[arg-type]
        INVALID,
        "messages",
    ),
    row(
        "from_chat_messages: message not a mapping",
        "from_chat_messages(['hello'])",
        lambda: lf.from_chat_messages([SECRET_BODY]),  # type: ignore[list-item]
        INVALID,
        "messages[0]",
    ),
    row(
        "from_chat_messages: unknown role",
        "from_chat_messages([{'role': 'admin', ...}])",
        lambda: lf.from_chat_messages([{"role": "admin", "content": SECRET_BODY}]),
        INVALID,
        "messages[0].role",
    ),
    row(
        "from_chat_messages: content of the wrong type",
        "from_chat_messages([{'role': 'user', 'content': 5}])",
        lambda: lf.from_chat_messages([{"role": "user", "content": 5}]),
        INVALID,
        "messages[0].content",
    ),
    row(
        "from_chat_messages: an input_audio part without its format",
        "from_chat_messages([{'role': 'user', 'content': [{'type': 'input_audio',"
        " 'input_audio': {'data': body}}]}])",
        lambda: lf.from_chat_messages(
            [
                {
                    "role": "user",
                    "content": [{"type": "input_audio", "input_audio": {"data": SECRET_BODY}}],
                }
            ]
        ),
        INVALID,
        "messages[0].content[0].input_audio.format",
    ),
    row(
        "append_chat_messages: an input_audio part whose audio is not a mapping",
        "store.append_chat_messages('c', [{'role': 'user', 'content': [{'type':"
        " 'input_audio', 'input_audio': body}]}])",
        on_store(
            lambda store: store.append_chat_messages(
                "c",
                [
                    {
                        "role": "user",
                        "content": [{"type": "input_audio", "input_audio": SECRET_BODY}],
                    }
                ],
            )
        ),
        INVALID,
        "messages[0].content[0].input_audio",
    ),
    row(
        "from_chat_messages: lone surrogate in content",
        "from_chat_messages([{'role': 'user', 'content': '\\ud800'}])",
        lambda: lf.from_chat_messages([{"role": "user", "content": SECRET_BODY + SURROGATE}]),
        INVALID,
        "messages[0].content",
    ),
    row(
        "from_chat_messages: tool calls on a user message",
        "from_chat_messages([{'role': 'user', 'tool_calls': [...]}])",
        lambda: lf.from_chat_messages(
            [{"role": "user", "content": SECRET_BODY, "tool_calls": [{"id": "call-1"}]}]
        ),
        INVALID,
        "messages[0].tool_calls",
    ),
    row(
        "from_chat_messages: duplicate message id",
        "from_chat_messages([{'id': 'x', ...}, {'id': 'x', ...}])",
        lambda: lf.from_chat_messages(
            [
                {"id": "x", "role": "user", "content": SECRET_BODY},
                {"id": "x", "role": "user", "content": SECRET_BODY},
            ]
        ),
        DUPLICATE,
        "messages[1].id",
    ),
    row(
        "from_chat_messages: NaN or Infinity in tool_calls",
        "from_chat_messages([{'role': 'assistant', 'tool_calls': [{..., 'x': nan}]}])",
        lambda: _tool_calls_with(float("nan")),
        INVALID,
        "messages[0].tool_calls",
    ),
    row(
        "from_chat_messages: tool_calls nested too deeply",
        "from_chat_messages([{'role': 'assistant', 'tool_calls': [{..., 'x': [[[...]]]}]}])",
        lambda: _tool_calls_with(_deep_list()),
        INVALID,
        "messages[0].tool_calls",
    ),
    # ---- transcripts (`ledgerfold import`)
    row(
        "load_transcripts: JSON line nested too deeply",
        "load_transcripts('t.jsonl')  # a line of 100,000 nested arrays",
        on_transcript('{"conversation_id": "c", "source": "s", "turns": ' + DEEP_JSON + "}"),
        INVALID,
        "line",
    ),
    row(
        "load_transcripts: a body that does not encode as UTF-8",
        "load_transcripts('t.jsonl')  # a turn's body '...\\ud800'",
        on_transcript(
            '{"conversation_id": "c", "source": "s", "turns": [{"id": "t1", "sequence": 1,'
            ' "role": "user", "body": "' + SECRET_BODY + '\\ud800"}]}'
        ),
        INVALID,
        "body",
    ),
    row(
        "load_transcripts: NaN or Infinity in a line",
        "load_transcripts('t.jsonl')  # {..., 'x': NaN}",
        on_transcript('{"conversation_id": "c", "source": "s", "turns": [], "x": NaN}'),
        INVALID,
        "line",
    ),
)
