"""An agent whose system prompt adds no text (content blocks, `""`) and no summary yet: the
model's input is the conversation as it is (SPEC §17.6 puts a leading system message there
only when it holds something). The middleware took the first message of the context for
the system message it expected: the user's first message went into the system prompt and
out of the conversation."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_support import LookingUp, lookup
from ledgerfold import SQLiteStore
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

BLOCKS = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def _first_input(agent_prompt: Any, middleware_prompt: str | None = None) -> list[Any]:
    model = LookingUp()
    middleware = LedgerfoldMiddleware(
        SQLiteStore(), "c", recall=False, system_prompt=middleware_prompt
    )
    agent = create_agent(model, tools=[lookup], middleware=[middleware], system_prompt=agent_prompt)
    question = HumanMessage([{"type": "text", "text": "Look up R1."}, IMAGE])
    agent.invoke({"messages": [question]})
    return model.inputs[0]


def test_a_prompt_of_content_blocks_keeps_the_users_message() -> None:
    system, user = _first_input(SystemMessage(content=BLOCKS))
    assert system.content == BLOCKS  # unchanged: nothing to add yet
    assert user.type == "human"
    assert user.content == [{"type": "text", "text": "Look up R1."}, IMAGE]  # the state's own


@pytest.mark.parametrize(("agent_prompt", "middleware_prompt"), [("", None), (None, "")])
def test_an_empty_prompt_keeps_the_users_message(
    agent_prompt: str | None, middleware_prompt: str | None
) -> None:
    messages = _first_input(agent_prompt, middleware_prompt)
    users = [message for message in messages if message.type == "human"]
    assert len(users) == 1
    assert users[0].content == [{"type": "text", "text": "Look up R1."}, IMAGE]
    assert all("Look up R1." not in str(m.content) for m in messages if m.type == "system")
