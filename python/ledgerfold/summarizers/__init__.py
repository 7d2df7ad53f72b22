"""Summarizers: callables `SummaryRequest -> str` (or async ones) for `Compactor`.

`ExtractiveSummarizer` is the deterministic, offline default; `OpenAICompatibleSummarizer`
asks a local model server (llama.cpp server, Ollama, vLLM) over the chat-completions
protocol, with the standard library only.
"""

from __future__ import annotations

from ledgerfold.summarizers.extractive import ExtractiveSummarizer
from ledgerfold.summarizers.openai_compat import (
    DEFAULT_SYSTEM_PROMPT,
    OpenAICompatibleSummarizer,
    SummarizerError,
    SummarizerTimeout,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "SummarizerError",
    "SummarizerTimeout",
]
