"""A state rewrite logged as ignored (SPEC §17.6), then `Store.edit` of its turn to say the
same: the ledger and the state now agree, and the state's message is the record again (the
model gets the state's own object, with what the ledger does not keep), with no further
log. Nothing noticed it while the state's message stayed as logged: the model kept getting
the ledger's rendering. Noticed from the context the call reads anyway (no read of the
turns). Real LangGraph, a real SQLite file, a scripted model."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

import ledgerfold as lf
from langchain_support import Scripted
from ledgerfold.adapters import from_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CONFIG = {"configurable": {"thread_id": "t"}}


def _agent(model: Any, middleware: LedgerfoldMiddleware) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph v1
        return create_react_agent(
            model,
            [],
            pre_model_hook=middleware.pre_model_hook,
            post_model_hook=middleware.post_model_hook,
            checkpointer=InMemorySaver(),
        )


def _changed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "state message changed" in r.getMessage()]


def test_a_logged_rewrite_the_ledger_is_edited_to_match_is_the_record_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = lf.SQLiteStore(tmp_path / "late.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    model = Scripted(replies=[AIMessage("Your code is QZ-704.")], default="Noted.")
    agent = _agent(model, middleware)
    agent.invoke({"messages": [{"role": "user", "content": "My code?"}]}, CONFIG)
    reply = agent.get_state(CONFIG).values["messages"][-1]
    # The application rewrites the reply in the state alone, with metadata the ledger does
    # not keep: a state rewrite, ignored and logged once.
    redacted = reply.model_copy(
        update={"content": "Your code is [code].", "response_metadata": {"note": "redacted"}}
    )
    agent.update_state(CONFIG, {"messages": [redacted]})
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke({"messages": [{"role": "user", "content": "Thanks."}]}, CONFIG)
    assert len(_changed(caplog)) == 1
    sent = model.inputs[-1][1]
    assert sent.text == "Your code is QZ-704." and sent.response_metadata == {}
    # Then the ledger is edited to say what the state says: they agree now.
    (turn,) = from_langchain_messages([redacted])
    store.edit("c", reply.id, body=turn.body, meta=turn.meta)
    agent.invoke({"messages": [{"role": "user", "content": "Bye."}]}, CONFIG)
    sent = model.inputs[-1][1]
    assert sent.id == reply.id and sent.text == "Your code is [code]."
    assert sent.response_metadata == {"note": "redacted"}  # the state's own message
    assert len(_changed(caplog)) == 1  # nothing logged again
    # A later rewrite in the state alone is a rewrite again: ignored and logged.
    again = redacted.model_copy(update={"content": "Your code is [hidden]."})
    agent.update_state(CONFIG, {"messages": [again]})
    agent.invoke({"messages": [{"role": "user", "content": "Hm."}]}, CONFIG)
    assert len(_changed(caplog)) == 2
    assert model.inputs[-1][1].text == "Your code is [code]."
    store.close()
