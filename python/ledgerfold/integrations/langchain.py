"""LangChain v1 / LangGraph: the ledger as the model's memory (`ledgerfold[langgraph]`).

`LedgerfoldMiddleware` is an `AgentMiddleware` for `langchain.agents.create_agent`: before
each model call it appends the state messages the ledger has not seen (by `message.id`),
compacts when due, and replaces only the model's input with the ledgerfold context (the
summary as one `SystemMessage`, then every uncovered turn). The graph state is never
changed: every message stays in it, and nothing is deleted. `pre_model_hook` is the same
for LangGraph's `create_react_agent` (it returns `llm_input_messages`).

Messages cross over through `ledgerfold.adapters._langchain`: `langchain_core`'s own
converters, plus what they would lose (a model's unparsable call keeps its record in the
ledger, and its result its group).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from ledgerfold._compactor import Compactor
from ledgerfold._errors import InvalidInput
from ledgerfold._policy import CompactionPolicy
from ledgerfold.adapters._langchain import chat_messages, to_langchain_messages
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.summarizers._base import Summarizer

__all__ = ["DEFAULT_POLICY", "LedgerfoldMiddleware"]

#: The default policy: compact once the context passes 8000 (approximate) tokens.
DEFAULT_POLICY = CompactionPolicy("ledgerfold-langchain-1", keep_tail=8, trigger_tokens=8000)


class LedgerfoldMiddleware(AgentMiddleware):
    """Keep a conversation's messages in `store` under `conversation_id` and send the model
    the ledgerfold context. `policy` defaults to `DEFAULT_POLICY`, `summarizer` to the
    `Compactor`'s default (`ExtractiveSummarizer`). Messages need an `id` (LangGraph's
    `add_messages` gives every state message one)."""

    def __init__(
        self,
        store: SQLiteStore,
        conversation_id: str,
        *,
        policy: CompactionPolicy | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.conversation_id = conversation_id
        self.compactor = Compactor(
            store, policy if policy is not None else DEFAULT_POLICY, summarizer
        )

    def append_new(self, messages: Sequence[Any]) -> int:
        """Append the messages whose IDs the ledger does not hold yet; returns how many."""
        ids = []
        for index, message in enumerate(messages):
            message_id = getattr(message, "id", None)
            if not isinstance(message_id, str) or not message_id:
                raise InvalidInput(
                    f"messages[{index}].id: a message needs an id to be appended once",
                    field=f"messages[{index}].id",
                    problem="empty",
                )
            ids.append(message_id)
        known = {turn.id for turn in self.store.get_turns(self.conversation_id, ids)}
        new = [message for message in messages if message.id not in known]
        if not new:
            return 0
        self.store.append_chat_messages(self.conversation_id, chat_messages(new))
        return len(new)

    def model_messages(self) -> list[Any]:
        """The ledgerfold context as LangChain messages."""
        return to_langchain_messages(self.compactor.context(self.conversation_id))

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.append_new(request.messages)
        self.compactor.compact(self.conversation_id)
        return handler(request.override(messages=self.model_messages()))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        self.append_new(request.messages)
        await self.compactor.acompact(self.conversation_id)
        return await handler(request.override(messages=self.model_messages()))

    def pre_model_hook(self, state: Any) -> dict[str, Any]:
        """A LangGraph `pre_model_hook`: the model's input only (`llm_input_messages`)."""
        messages = state["messages"] if isinstance(state, dict) else state.messages
        self.append_new(messages)
        self.compactor.compact(self.conversation_id)
        return {"llm_input_messages": self.model_messages()}
