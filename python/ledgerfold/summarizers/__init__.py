"""Summarizers: callables `SummaryRequest -> str` (or async ones) for `Compactor`.

`ExtractiveSummarizer` is the deterministic, offline default. `ChatCompletionsSummarizer`
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
from ledgerfold.summarizers._extractive import ExtractiveSummarizer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AsyncChatCompletionsSummarizer",
    "AsyncChatModelSummarizer",
    "ChatCompletionsSummarizer",
    "ChatModelSummarizer",
    "ExtractiveSummarizer",
    "SummarizerError",
    "SummarizerTimeout",
]
