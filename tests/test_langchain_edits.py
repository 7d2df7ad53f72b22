"""A recorded message changed after the middleware recorded it (SPEC §17.6, docs/
integrations.md), with LangGraph's `create_react_agent` and `post_model_hook`, which record
a model call's message when the model makes it. A change made in the ledger (`Store.edit`,
the record: summaries citing the turn go stale) and in the state alike is honoured: the
state's message is the record's, sent to the model as the state holds it and not logged. It
was logged as an ignored state rewrite and the model got the ledger's rendering of it (as a
restarted process did not). A change made in the state alone is still a state rewrite:
ignored and logged by ID. Real graphs, real SQLite files, a scripted model."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import ledgerfold as lf
from langchain_support import LookingUp, Scripted, lookup
from ledgerfold.adapters import from_langchain_messages
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

CONFIG = {"configurable": {"thread_id": "t"}}


def _react(model: Any, middleware: LedgerfoldMiddleware, post: Any = None, **kwargs: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph v1
        return create_react_agent(
            model,
            kwargs.pop("tools", [lookup]),
            pre_model_hook=middleware.pre_model_hook,
            post_model_hook=post or middleware.post_model_hook,
            checkpointer=kwargs.pop("checkpointer", None) or InMemorySaver(),
            **kwargs,
        )


def _changed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "state message changed" in r.getMessage()]


def _edit(store: lf.SQLiteStore, message: Any) -> None:
    """Edit the message's turn to say what `message` says (the ledger's own form of it)."""
    (turn,) = from_langchain_messages([message])
    store.edit("c", message.id, body=turn.body, meta=turn.meta)


def _called(turn: lf.Turn) -> str:
    return (turn.meta or {})["tool_calls"]


def _stopped_at_the_call(tmp_path: Path) -> tuple[Any, LedgerfoldMiddleware, LookingUp, Any]:
    """A run stopped before the tool node, its call already in the ledger."""
    store = lf.SQLiteStore(tmp_path / "e.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    model = LookingUp()
    agent = _react(model, middleware, interrupt_before=["tools"])
    agent.invoke({"messages": [{"role": "user", "content": "Look up R1."}]}, CONFIG)
    call = agent.get_state(CONFIG).values["messages"][-1]
    assert '\\"R1\\"' in _called(store.get_turns("c", [call.id])[0])  # recorded already
    return agent, middleware, model, call


def test_a_call_edited_in_the_ledger_and_the_state_is_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent, middleware, model, call = _stopped_at_the_call(tmp_path)
    edited = AIMessage("", id=call.id, tool_calls=[{**call.tool_calls[0], "args": {"code": "R9"}}])
    _edit(middleware.store, edited)  # type: ignore[arg-type]
    agent.update_state(CONFIG, {"messages": [edited]})
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke(None, CONFIG)  # the tool runs the edited call; the model answers
    assert _changed(caplog) == []
    store = middleware.store
    turns = store.load("c").turns  # type: ignore[attr-defined]
    assert [turn.role for turn in turns] == ["user", "assistant", "tool", "assistant"]
    assert '\\"R9\\"' in _called(turns[1]) and turns[2].body == "reservation R9: economy"
    assert turns[2].group == turns[1].group  # the result joined its call
    sent = model.inputs[-1]
    assert sent[1].id == call.id and sent[1].tool_calls[0]["args"] == {"code": "R9"}
    assert isinstance(sent[2], ToolMessage) and sent[2].content == "reservation R9: economy"


def test_a_post_model_hook_redacting_the_recorded_reply(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The application's `post_model_hook` redacts the reply the middleware recorded, in the
    ledger and in the state: the next model call gets the redacted reply, the state's own,
    and nothing is logged as a rewrite."""
    store = lf.SQLiteStore(tmp_path / "r.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)

    def redacting(state: dict[str, Any]) -> dict[str, Any]:
        middleware.post_model_hook(state)  # recorded as the model made it
        reply = state["messages"][-1]
        if "QZ-704" not in reply.text:
            return {}
        redacted = reply.model_copy(update={"content": reply.text.replace("QZ-704", "[code]")})
        _edit(store, redacted)
        return {"messages": [redacted]}

    model = Scripted(default="Your booking code is QZ-704.")
    agent = _react(model, middleware, redacting)
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke({"messages": [{"role": "user", "content": "My code?"}]}, CONFIG)
    model.default = "Noted."
    agent.invoke({"messages": [{"role": "user", "content": "Thanks."}]}, CONFIG)
    assert _changed(caplog) == []
    reply = model.inputs[-1][1]
    assert reply.text == "Your booking code is [code]." and reply.id is not None
    assert [turn.body for turn in store.load("c").turns] == [
        "My code?",
        "Your booking code is [code].",
        "Thanks.",
        "Noted.",
    ]
    assert "QZ-704" not in str(model.inputs[-1])


def test_a_call_rewritten_in_the_state_alone_is_ignored_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SPEC §17.6: a state rewrite is not an edit. The ledger keeps the call as the model made
    it, the model gets it so, with the result of what ran; the change is logged once, by
    ID."""
    agent, middleware, model, call = _stopped_at_the_call(tmp_path)
    rewritten = [{**call.tool_calls[0], "args": {"code": "R9"}}]
    agent.update_state(CONFIG, {"messages": [AIMessage("", id=call.id, tool_calls=rewritten)]})
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke(None, CONFIG)
    agent.invoke({"messages": [{"role": "user", "content": "And R2?"}]}, CONFIG)
    changed = _changed(caplog)
    assert len(changed) == 1 and call.id in changed[0]
    turns = middleware.store.load("c").turns  # type: ignore[attr-defined]
    assert '\\"R1\\"' in _called(turns[1]) and turns[2].body == "reservation R9: economy"
    assert model.inputs[2][1].tool_calls[0]["args"] == {"code": "R1"}


@tool
def book(code: str, seat: str) -> str:
    """Book a seat."""
    return f"booked {code} seat {seat}"


def _booking_edited_by_hand(
    tmp_path: Path, state_args: dict[str, str]
) -> tuple[Any, LedgerfoldMiddleware, Scripted, str]:
    """A run stopped before the tool node; its call edited in the ledger by hand (`Store.edit`
    with JSON text written so: indented, keys in another order, the arguments compact) to
    book R9 seat 12A, and in the state to `state_args`."""
    store = lf.SQLiteStore(tmp_path / "b.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    call = {"name": "book", "args": {"code": "R1", "seat": "1A"}, "id": "call-b"}
    model = Scripted(replies=[AIMessage("", tool_calls=[call])])
    agent = _react(model, middleware, interrupt_before=["tools"], tools=[book])
    agent.invoke({"messages": [{"role": "user", "content": "Book R1."}]}, CONFIG)
    message_id = agent.get_state(CONFIG).values["messages"][-1].id
    function = {"name": "book", "arguments": '{"seat":"12A","code":"R9"}'}
    by_hand = [{"type": "function", "id": "call-b", "function": function}]
    store.edit("c", message_id, body="", meta={"tool_calls": json.dumps(by_hand, indent=2)})
    edited = AIMessage("", id=message_id, tool_calls=[{**call, "args": state_args}])
    agent.update_state(CONFIG, {"messages": [edited]})
    return agent, middleware, model, message_id


def test_a_call_edited_by_hand_in_other_json_spacing_is_the_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The state's call says what the hand-written edit says, in LangChain's own JSON
    (`{"code": "R9", "seat": "12A"}`): the same call, so no state rewrite is logged, and the
    model gets the state's message. It was logged, the ledger's JSON text compared as text."""
    agent, middleware, model, message_id = _booking_edited_by_hand(
        tmp_path, {"code": "R9", "seat": "12A"}
    )
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke(None, CONFIG)  # the tool books the edited call; the model answers
    assert _changed(caplog) == []
    (turn,) = middleware.store.get_turns("c", [message_id])  # type: ignore[attr-defined]
    assert '{\\"seat\\":\\"12A\\",\\"code\\":\\"R9\\"}' in _called(turn)  # as written
    sent = model.inputs[-1]
    assert sent[1].id == message_id and sent[1].tool_calls[0]["args"] == {
        "code": "R9",
        "seat": "12A",
    }
    assert sent[2].content == "booked R9 seat 12A"


def test_a_call_the_state_changes_otherwise_is_still_a_rewrite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The canonical comparison does not hide a real change: the state books R8, the ledger
    (edited by hand) R9. Logged once, by ID; the model gets the ledger's call."""
    agent, _, model, message_id = _booking_edited_by_hand(tmp_path, {"code": "R8", "seat": "12A"})
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke(None, CONFIG)
    changed = _changed(caplog)
    assert len(changed) == 1 and message_id in changed[0]
    assert model.inputs[-1][1].tool_calls[0]["args"] == {"seat": "12A", "code": "R9"}


def test_a_message_changed_again_in_the_state_is_noticed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A message logged as changed was never looked at again: a second change went unlogged,
    and one back to what the ledger holds stayed ignored (the model got the ledger's
    rendering for good). Each distinct change is logged once, however many calls follow
    it; back to the ledger's text, the state's message is the record's again."""
    store = lf.SQLiteStore(tmp_path / "a.db")
    middleware = LedgerfoldMiddleware(store, "c", recall=False)
    model = Scripted(default="Hello A.")
    agent = _react(model, middleware)
    agent.invoke({"messages": [{"role": "user", "content": "Hi."}]}, CONFIG)
    reply_id = agent.get_state(CONFIG).values["messages"][-1].id
    model.default = "OK."
    caplog.set_level(logging.WARNING, logger="ledgerfold")

    def rewrite(text: str, **extra: Any) -> None:
        agent.update_state(CONFIG, {"messages": [AIMessage(text, id=reply_id, **extra)]})

    def ask(*texts: str) -> int:
        for text in texts:
            agent.invoke({"messages": [{"role": "user", "content": text}]}, CONFIG)
        changed = _changed(caplog)
        assert all(reply_id in line for line in changed)
        return len(changed)

    rewrite("Hello B.")
    assert ask("1", "2") == 1  # once, not on every call
    rewrite("Hello C.")
    assert ask("3", "4") == 2  # changed again: logged again
    assert model.inputs[-1][1].text == "Hello A."  # the ledger's
    rewrite("Hello A.", additional_kwargs={"kept": "from the state"})
    assert ask("5") == 2  # back to what the ledger says: no change
    assert model.inputs[-1][1].additional_kwargs == {"kept": "from the state"}
    rewrite("Hello B.")
    assert ask("6") == 3  # changed once more
    assert model.inputs[-1][1].text == "Hello A."
    assert store.get_turns("c", [reply_id])[0].body == "Hello A."


def test_after_a_restart_a_message_changed_back_is_noticed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A restarted process first sees the message changed (logged), then back as the ledger
    holds it: the state's message is the record's again. A retracted turn's message (no live
    turn to compare) changed and back is logged once, not twice."""
    store = lf.SQLiteStore(tmp_path / "r.db")
    saver = InMemorySaver()
    agent = _react(
        Scripted(default="Hello A."), LedgerfoldMiddleware(store, "c"), checkpointer=saver
    )
    agent.invoke({"messages": [{"role": "user", "content": "Hi."}]}, CONFIG)
    reply_id = agent.get_state(CONFIG).values["messages"][-1].id

    def rewrite(text: str, **extra: Any) -> None:
        agent.update_state(CONFIG, {"messages": [AIMessage(text, id=reply_id, **extra)]})

    rewrite("Hello B.")
    model = Scripted(default="OK.")
    agent = _react(model, LedgerfoldMiddleware(store, "c"), checkpointer=saver)  # restarted
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    agent.invoke({"messages": [{"role": "user", "content": "1"}]}, CONFIG)
    assert len(_changed(caplog)) == 1 and model.inputs[-1][1].text == "Hello A."
    rewrite("Hello A.", additional_kwargs={"kept": "from the state"})
    agent.invoke({"messages": [{"role": "user", "content": "2"}]}, CONFIG)
    assert len(_changed(caplog)) == 1
    assert model.inputs[-1][1].additional_kwargs == {"kept": "from the state"}
    store.retract("c", reply_id)
    for text in ("Hello C.", "Hello A."):
        rewrite(text)
        agent.invoke({"messages": [{"role": "user", "content": text}]}, CONFIG)
    assert len(_changed(caplog)) == 2


def test_a_message_flipping_between_two_changes_is_logged_once_for_each(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state that flips a message between two rewrites (an application's hook rewriting
    it one way or the other on each run) logs each rewrite once, not every flip: a change is
    one the message has not been logged with."""
    store = lf.SQLiteStore(tmp_path / "f.db")
    model = Scripted(default="Hello A.")
    agent = _react(model, LedgerfoldMiddleware(store, "c", recall=False))
    agent.invoke({"messages": [{"role": "user", "content": "Hi."}]}, CONFIG)
    reply_id = agent.get_state(CONFIG).values["messages"][-1].id
    model.default = "OK."
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    for n, text in enumerate(["Hello B.", "Hello C."] * 3):
        agent.update_state(CONFIG, {"messages": [AIMessage(text, id=reply_id)]})
        agent.invoke({"messages": [{"role": "user", "content": str(n)}]}, CONFIG)
    assert len(_changed(caplog)) == 2
    assert model.inputs[-1][1].text == "Hello A."
