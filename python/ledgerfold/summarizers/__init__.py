"""Summarizers: callables `SummaryRequest -> str` (or async ones) for `Compactor`.

`ExtractiveSummarizer`, the deterministic, offline default, is imported from `ledgerfold`
(SPEC §11, its one import path). `ChatCompletionsSummarizer`
asks a model through an `openai.OpenAI` / `AsyncOpenAI` client (the `openai` extra; a
local server through `base_url` too); `ChatModelSummarizer` asks any LangChain chat model.
"""

from __future__ import annotations

from ledgerfold._errors import SummarizerError, SummarizerTimeout
from ledgerfold.summarizers._chat_completions import (
    DEFAULT_SYSTEM_PROMPT,
    AsyncChatCompletionsSummarizer,
    ChatCompletionsSummarizer,
)
from ledgerfold.summarizers._chat_model import AsyncChatModelSummarizer, ChatModelSummarizer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AsyncChatCompletionsSummarizer",
    "AsyncChatModelSummarizer",
    "ChatCompletionsSummarizer",
    "ChatModelSummarizer",
    "SummarizerError",
    "SummarizerTimeout",
]
