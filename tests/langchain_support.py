"""Scripted LangChain chat models for the integration tests: no network, every input kept.

`Scripted` replies with its script; `LookingUp` calls the `lookup` tool for each user
message, then answers with what it found. A test needing other behaviour subclasses
`Scripted` and overrides `reply`."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field


class Scripted(BaseChatModel):
    """Replies with `replies` in turn (then `default`); records every input, and the names
    of the tools each `bind_tools` gave it."""

    replies: list[AIMessage] = Field(default_factory=list)
    default: str = "done"
    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:  # type: ignore[override]
        self.bound.append([_tool_name(t) for t in tools])
        return self

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        """The next reply (`messages` is the input, already in `inputs`)."""
        return self.replies.pop(0) if self.replies else AIMessage(self.default)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.inputs.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])


class LookingUp(Scripted):
    """Calls `lookup` for each user message (`R<n>`, call ID `call-<n>`, n the number of
    this model call, counting the `inputs` it was made with), then answers `Found: ...`."""

    def reply(self, messages: list[BaseMessage]) -> AIMessage:
        count = len(self.inputs)
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"Found: {messages[-1].content}")
        call = {"name": "lookup", "args": {"code": f"R{count}"}, "id": f"call-{count}"}
        return AIMessage(content="", tool_calls=[call])


@tool
def lookup(code: str) -> str:
    """Look a reservation up."""
    return f"reservation {code}: economy"


def _tool_name(tool: Any) -> Any:
    """A bound tool's name: a LangChain tool's, or an OpenAI-style tool dict's."""
    name = getattr(tool, "name", None)
    if name is None and isinstance(tool, dict):
        name = (tool.get("function") or {}).get("name") or tool.get("name")
    return name
