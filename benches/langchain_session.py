"""LangChain v1's `SummarizationMiddleware` over the agent session of `bench_agent_loop.py`:
the anchor the agent loop is measured against, driven the way an agent drives it.

`create_agent` with a scripted fake chat model (its replies are the session's assistant
bodies; it records what it is sent) and the real middleware, invoked once per exchange with
the messages the previous call returned (no checkpointer: what the agent carries forward is
what the middleware left). The middleware decides when to summarise and what; the summary
text comes from `ExtractiveSummarizer` through the middleware's `summarizer=` hook, with the
same `max_summary_tokens` as ledgerfold's policy, so both sides differ in policy only:

- the middleware's summary message becomes the request's `previous_summary` (LangChain's
  framing line removed), every other message a turn (sequence from its message ID);
- its trigger and its trimming count tokens as ledgerfold's context does (`approx_tokens`
  of each message's text plus `MESSAGE_OVERHEAD_TOKENS`);
- what the summarizer receives is counted with `approx_tokens`, the previous summary
  included, as `CountingSummarizer` counts ledgerfold's requests. LangChain's instruction
  prompt is not counted (the `summarizer=` hook receives no prompt; ledgerfold's would
  carry one too).
"""

from __future__ import annotations

import inspect
from typing import Any

import ledgerfold as lf
from ledgerfold import ExtractiveSummarizer
from ledgerfold.tokens import MESSAGE_OVERHEAD_TOKENS, approx_tokens

#: The framing LangChain's middleware puts before the summary text
#: (`SummarizationMiddleware._build_new_messages`).
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"


def unavailable() -> str | None:
    """Why the anchor cannot run here, or None when it can."""
    try:
        from langchain.agents import create_agent  # noqa: F401
        from langchain.agents.middleware import SummarizationMiddleware
    except ImportError as error:
        return f"langchain v1 is not installed ({error}): pip install -e '.[langgraph]'"
    if "summarizer" not in inspect.signature(SummarizationMiddleware).parameters:
        return "this langchain's SummarizationMiddleware has no summarizer= hook (newer v1 has)"
    return None


def text_of(message: Any) -> str:
    content = message.content
    return content if isinstance(content, str) else str(message.text)


def count_tokens(messages: Any) -> int:
    """The middleware's token counter: ledgerfold's context count, message by message."""
    return sum(MESSAGE_OVERHEAD_TOKENS + approx_tokens(text_of(m)) for m in messages)


class CountingLangChainSummarizer:
    """`ExtractiveSummarizer` behind the middleware's `summarizer=` hook, counting its input."""

    def __init__(self, max_summary_tokens: int) -> None:
        self.inner = ExtractiveSummarizer()
        self.max_summary_tokens = max_summary_tokens
        self.input_tokens = 0
        self.largest_request = 0
        self.calls = 0
        self.seen: set[str] = set()  # IDs of the messages it was given (some cut by trimming)

    def __call__(self, messages: list[Any]) -> str:
        previous: str | None = None
        turns = []
        tokens = 0
        for message in messages:
            text = text_of(message)
            tokens += approx_tokens(text)
            if message.additional_kwargs.get("lc_source") == "summarization":
                previous = text.removeprefix(SUMMARY_PREFIX)
                continue
            role = "user" if message.type == "human" else "assistant"
            sequence = int(str(message.id).removeprefix("s"))
            turns.append(lf.TurnItem(str(message.id), role, text, sequence))
            self.seen.add(str(message.id))
        self.input_tokens += tokens
        self.largest_request = max(self.largest_request, tokens)
        self.calls += 1
        request = lf.SummaryRequest(
            "c",
            f"lc-{self.calls}",
            "langchain",
            tuple(turns),
            previous_summary=previous,
            max_summary_tokens=self.max_summary_tokens,
        )
        return self.inner(request)


class LangChainSession:
    """One agent thread under `SummarizationMiddleware`; `exchange` runs one agent call."""

    def __init__(self, *, trigger_tokens: int, keep_messages: int, max_summary_tokens: int):
        from langchain.agents import create_agent
        from langchain.agents.middleware import SummarizationMiddleware

        self.model = _scripted_model()
        self.summarizer = CountingLangChainSummarizer(max_summary_tokens)
        middleware = SummarizationMiddleware(
            self.model,
            trigger=("tokens", trigger_tokens),
            keep=("messages", keep_messages),
            token_counter=count_tokens,
            summarizer=self.summarizer,
        )  # trim_tokens_to_summarize: LangChain's default (4,000), its own input bound
        self.agent = create_agent(self.model, tools=[], middleware=[middleware])
        self.messages: list[Any] = []

    def exchange(self, sequence: int, user: str, assistant: str) -> str:
        """Send `user` (message ID `s<sequence>`); the model answers `assistant`. Returns the
        text of what the model was sent."""
        from langchain_core.messages import AIMessage, HumanMessage

        self.model.replies.append(AIMessage(content=assistant, id=f"s{sequence + 1}"))
        user_message = HumanMessage(content=user, id=f"s{sequence}")
        state = self.agent.invoke({"messages": [*self.messages, user_message]})
        self.messages = state["messages"]
        return "\n".join(text_of(message) for message in self.model.last_input)

    def turn_ids(self) -> set[str]:
        """IDs of the exchanges' messages the agent carries forward (not its summary)."""
        return {
            str(message.id)
            for message in self.messages
            if message.additional_kwargs.get("lc_source") != "summarization"
        }

    def state_text(self) -> str:
        """The text of every message the agent carries forward."""
        return "\n".join(text_of(message) for message in self.messages)


def _scripted_model() -> Any:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field

    class ScriptedModel(BaseChatModel):
        """Answers with the next queued reply; keeps the last input it was sent."""

        replies: list[AIMessage] = Field(default_factory=list)
        last_input: list[BaseMessage] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            self.last_input = list(messages)
            return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])

    return ScriptedModel()
