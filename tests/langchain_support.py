"""A scripted LangChain chat model for the integration tests: no network, every input kept."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class Scripted(BaseChatModel):
    """Replies with `replies` in turn (then `default`); records every input."""

    replies: list[AIMessage] = Field(default_factory=list)
    default: str = "done"
    inputs: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.inputs.append(list(messages))
        reply = self.replies.pop(0) if self.replies else AIMessage(self.default)
        return ChatResult(generations=[ChatGeneration(message=reply)])
