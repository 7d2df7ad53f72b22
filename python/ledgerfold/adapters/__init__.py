"""Adapters between ledgerfold and chat-message formats.

`to_chat_messages` and `from_chat_messages` (OpenAI-style dicts, or an SDK's message
objects for `from_chat_messages`; no dependencies) are
imported from `ledgerfold` (SPEC §11, their one import path); this package adds the summary
slot's framing and escape, and the LangChain converters, which need the optional extra
`ledgerfold[langchain]` and import `langchain_core` only when called.
"""

from __future__ import annotations

from ledgerfold.adapters._chat import (
    SUMMARY_CLOSE,
    SUMMARY_OPEN,
    summary_framing,
)
from ledgerfold.adapters._langchain import from_langchain_messages, to_langchain_messages
from ledgerfold.adapters._summary_escape import escape_summary_text, unescape_summary_text

__all__ = [
    "SUMMARY_CLOSE",
    "SUMMARY_OPEN",
    "escape_summary_text",
    "from_langchain_messages",
    "summary_framing",
    "to_langchain_messages",
    "unescape_summary_text",
]
