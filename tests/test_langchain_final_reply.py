"""The model's final reply is in the ledger when the run returns (`after_agent`;
`post_model_hook` for `create_react_agent`): it was appended only at the thread's next model
call, so a thread that ended, or a state lost with its process (no checkpointer, an
in-memory one), left the model's last answer out of the ledger for good. Real SQLite files,
real graphs, a fake model."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

ANSWER = "Your booking code is QZ-704."


def _bodies(path: Path) -> list[tuple[str, str]]:
    return [(turn.role, turn.body) for turn in lf.SQLiteStore(path).load("c").turns]


def test_the_final_reply_is_in_the_ledger_when_invoke_returns(tmp_path: Path) -> None:
    middleware = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "a.db"), "c")
    agent = create_agent(
        Scripted(default=ANSWER), tools=[], middleware=[middleware]
    )  # no checkpointer
    state = agent.invoke({"messages": [{"role": "user", "content": "My code?"}]})
    assert _bodies(tmp_path / "a.db") == [("user", "My code?"), ("assistant", ANSWER)]
    ids = [turn.id for turn in lf.SQLiteStore(tmp_path / "a.db").load("c").turns]
    assert ids == [message.id for message in state["messages"]]
    # The next run (its own state: no checkpointer) gets the earlier answer from the ledger.
    agent.invoke({"messages": [{"role": "user", "content": "Again?"}]})
    assert _bodies(tmp_path / "a.db")[1:] == [
        ("assistant", ANSWER),
        ("user", "Again?"),
        ("assistant", ANSWER),
    ]


def test_ainvoke_appends_it_too(tmp_path: Path) -> None:
    middleware = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "b.db"), None)
    agent = create_agent(
        Scripted(default=ANSWER), tools=[], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "c"}}
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "My code?"}]}, config))
    assert _bodies(tmp_path / "b.db") == [("user", "My code?"), ("assistant", ANSWER)]


def test_create_react_agent_s_post_model_hook(tmp_path: Path) -> None:
    from langgraph.prebuilt import create_react_agent

    middleware = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "c.db"), "c")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            Scripted(default=ANSWER),
            [],
            pre_model_hook=middleware.pre_model_hook,
            post_model_hook=middleware.post_model_hook,
        )
    state = agent.invoke({"messages": [{"role": "user", "content": "My code?"}]})
    assert _bodies(tmp_path / "c.db") == [("user", "My code?"), ("assistant", ANSWER)]
    assert state["messages"][-1].content == ANSWER  # the state is unchanged
