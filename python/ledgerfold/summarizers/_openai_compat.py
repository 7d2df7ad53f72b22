"""`OpenAICompatibleSummarizer`: deprecated; use `ChatCompletionsSummarizer` (SPEC §13).

Kept as a thin alias so existing code keeps working: it builds an `openai.OpenAI` client
for ``{base_url}/v1`` (the `openai` extra) and summarizes through
`ChatCompletionsSummarizer`, so retries, `Retry-After` and timeouts are the SDK's.
"""

from __future__ import annotations

import warnings
from typing import Any
from urllib.parse import urlsplit

from ledgerfold import _validate
from ledgerfold._errors import InvalidInput, SummarizerError, SummarizerTimeout
from ledgerfold.summarizers._base import SummaryRequest
from ledgerfold.summarizers._chat_completions import (
    DEFAULT_SYSTEM_PROMPT,
    ChatCompletionsSummarizer,
    frame_request,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "OpenAICompatibleSummarizer",
    "SummarizerError",
    "SummarizerTimeout",
    "frame_request",
]


class OpenAICompatibleSummarizer(ChatCompletionsSummarizer):
    """Deprecated: `ChatCompletionsSummarizer(openai.OpenAI(base_url=...), model)`.

    `base_url` is the server root, e.g. ``http://127.0.0.1:8080`` (a trailing ``/v1`` is
    accepted too); `timeout` and `max_retries` go to the client; `max_tokens` caps the
    summary (with the request's `max_summary_tokens`, the smaller wins).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> OpenAICompatibleSummarizer:
        return object.__new__(cls)

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_tokens: int = 512,
        max_retries: int = 2,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    ) -> None:
        warnings.warn(
            "OpenAICompatibleSummarizer is deprecated; use "
            "ChatCompletionsSummarizer(openai.OpenAI(base_url=...), model)",
            DeprecationWarning,
            stacklevel=2,
        )
        base_url = _validate.text("base_url", base_url).strip().rstrip("/")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInput(
                "base_url: must be an http:// or https:// URL",
                field="base_url",
                problem="unknown-value",
            )
        if base_url.endswith("/v1"):
            base_url = base_url[: -len("/v1")]
        self.base_url = base_url
        if api_key is not None:
            _validate.text("api_key", api_key)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidInput(
                "timeout: must be a number > 0", field="timeout", problem="out-of-range"
            )
        self.timeout = float(timeout)
        self.max_tokens = _validate.integer("max_tokens", max_tokens, minimum=1)
        max_retries = _validate.integer("max_retries", max_retries, minimum=0)
        try:
            import openai
        except ImportError:
            raise ImportError(
                "OpenAICompatibleSummarizer needs the openai package: "
                "pip install 'ledgerfold[openai]'"
            ) from None
        client = openai.OpenAI(
            base_url=f"{base_url}/v1",
            # Local servers need no key; the SDK insists on one.
            api_key=api_key if api_key is not None else "not-needed",
            timeout=self.timeout,
            max_retries=max_retries,
        )
        super().__init__(client, model, system_prompt=system_prompt)

    def __repr__(self) -> str:  # never shows the API key
        return (
            f"OpenAICompatibleSummarizer(base_url={self.base_url!r}, model={self.model!r}, "
            f"timeout={self.timeout}, max_tokens={self.max_tokens})"
        )

    def arguments(self, request: SummaryRequest) -> dict[str, Any]:
        arguments = super().arguments(request)
        limit = request.max_summary_tokens
        arguments["max_tokens"] = self.max_tokens if limit is None else min(limit, self.max_tokens)
        return arguments
