"""`ChatModelSummarizer`: summaries from any LangChain chat model (`invoke`/`ainvoke`).

The same framed request as `ChatCompletionsSummarizer` goes as a system and a user
message. LangChain models take no common token-limit argument, so `max_summary_tokens` is
asked for in the request text (set the model's own `max_tokens` for a hard cap); a reply
whose `response_metadata` says it stopped at the limit (`finish_reason="length"`,
`stop_reason="max_tokens"`) is a `SummarizerError`.
"""

from __future__ import annotations

import logging
from typing import Any

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput, SummarizerError
from ledgerfold.summarizers._base import SummaryRequest
from ledgerfold.summarizers._chat_completions import (
    DEFAULT_SYSTEM_PROMPT,
    strip_think_block,
    summary_messages,
)

__all__ = ["AsyncChatModelSummarizer", "ChatModelSummarizer"]

_log = logging.getLogger("ledgerfold.summarizers")

_TRUNCATED = {("finish_reason", "length"), ("stop_reason", "max_tokens")}


class ChatModelSummarizer:
    """A summarizer over a LangChain chat model's `invoke` (sync). For `ainvoke`, use
    `AsyncChatModelSummarizer` (awaited by `Compactor.acompact`)."""

    def __init__(self, llm: Any, *, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> None:
        if not callable(getattr(llm, "invoke", None)):
            raise InvalidInput(
                "llm: must be a LangChain chat model (with invoke/ainvoke)",
                field="llm",
                problem="wrong-type",
            )
        self.llm = llm
        self.system_prompt = _validate.text("system_prompt", system_prompt)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(llm={type(self.llm).__name__})"

    def __call__(self, request: SummaryRequest) -> str:
        return _text(request, self.llm.invoke(summary_messages(request, self.system_prompt)))


class AsyncChatModelSummarizer(ChatModelSummarizer):
    """`ChatModelSummarizer` awaiting the model's `ainvoke`."""

    async def __call__(self, request: SummaryRequest) -> str:  # type: ignore[override]
        reply = await self.llm.ainvoke(summary_messages(request, self.system_prompt))
        return _text(request, reply)


def _text(request: SummaryRequest, reply: Any) -> str:
    metadata = getattr(reply, "response_metadata", None) or {}
    for key, value in _TRUNCATED:
        if metadata.get(key) == value:
            raise SummarizerError(
                f"chat model failed: the summary was truncated at the token limit ({key}={value})"
            )
    content = getattr(reply, "content", reply)
    if isinstance(content, list):  # content blocks: keep the text ones
        content = "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
        )
    if not isinstance(content, str):
        raise SummarizerError("chat model failed: the reply has no text content")
    text = strip_think_block(content)
    _log.debug("chat model replied plan_id=%s summary_chars=%d", request.plan_id, len(text))
    return text
