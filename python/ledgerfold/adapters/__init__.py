"""Adapters between ledgerfold and chat-message formats.

`chat` (OpenAI-style dicts) has no dependencies; `langchain` needs the optional extra
`ledgerfold[langchain]` and imports `langchain_core` only when called.
"""

from __future__ import annotations

from ledgerfold.adapters._chat import (
    SUMMARY_CLOSE,
    SUMMARY_OPEN,
    from_chat_messages,
    summary_framing,
    to_chat_messages,
)
from ledgerfold.adapters._langchain import from_langchain_messages, to_langchain_messages
from ledgerfold.adapters._summary_escape import escape_summary_text, unescape_summary_text

__all__ = [
    "SUMMARY_CLOSE",
    "SUMMARY_OPEN",
    "escape_summary_text",
    "from_chat_messages",
    "from_langchain_messages",
    "summary_framing",
    "to_chat_messages",
    "to_langchain_messages",
    "unescape_summary_text",
]
