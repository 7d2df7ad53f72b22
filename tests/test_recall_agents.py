"""`LedgerfoldSession.recall_tool()` (SPEC §16.2, §17.6) under a real `agents.Runner.run` with
a fake `Model` that calls `recall_history` and then answers (no network): the passage the
summary dropped reaches the next model call, the call runs on the store's worker thread, and
the summary's framing says recall is offered."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    Runner,
    Usage,
    set_tracing_disabled,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from tests.integration_stores import RecordingStore

import ledgerfold as lf
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from ledgerfold.tools import RECALL_TOOL

set_tracing_disabled(True)

SESSION = "s1"
POLICY = lf.CompactionPolicy("recall-agents-v1", keep_tail=4, min_new_turns=1)
FACT = "My locker code for the Geneva office is 5100."
#: What the summary's framing says when recall is offered.
FRAMING = "can be fetched with the recall_history tool"


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        content=[ResponseOutputText(annotations=[], text=text, type="output_text")],
        role="assistant",
        status="completed",
        type="message",
    )


class RecallingModel(Model):
    """Calls `recall_history` for the user's question, then answers with what came back."""

    def __init__(self, arguments: str) -> None:
        self.arguments = arguments
        self.inputs: list[list[dict[str, Any]]] = []
        self.instructions: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        items = [dict(item) for item in input] if isinstance(input, list) else []
        self.inputs.append(items)
        self.instructions.append(system_instructions)
        last = items[-1] if items else {}
        if last.get("type") == "function_call_output":
            output: Any = _message("Your locker code is in the recalled passage.")
        else:
            output = ResponseFunctionToolCall(
                arguments=self.arguments,
                call_id=f"call-{len(self.inputs)}",
                name="recall_history",
                type="function_call",
                id=f"fc-{len(self.inputs)}",
                status="completed",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def _compacted(path: Path) -> RecordingStore:
    """A session's ledger whose summary dropped `FACT` (the items added through a session)."""
    store = RecordingStore(path)
    session = LedgerfoldSession(
        SESSION, store=store, policy=POLICY, summarizer=lf.ExtractiveSummarizer(max_turns=2)
    )
    items: list[Any] = [{"role": "user", "content": FACT}]
    for n in range(12):
        items.append({"role": "assistant" if n % 2 else "user", "content": f"Small talk {n}."})
    asyncio.run(session.add_items(items))
    session.compactor.compact(SESSION, force=True)
    summary = store.inner.current_summary(SESSION)
    assert summary is not None and "5100" not in summary.text  # the summary dropped it
    store.calls.clear()
    return store


def test_recall_tool_is_a_function_tool_with_the_recall_schema(tmp_path: Path) -> None:
    session = LedgerfoldSession(SESSION, store=_compacted(tmp_path / "a.db"), policy=POLICY)
    tool = session.recall_tool()
    assert isinstance(tool, FunctionTool)
    assert tool.name == "recall_history"
    assert tool.params_json_schema == RECALL_TOOL["function"]["parameters"]
    assert tool.strict_json_schema is False


def test_runner_calls_recall_history_and_the_passage_reaches_the_model(tmp_path: Path) -> None:
    store = _compacted(tmp_path / "b.db")
    session = LedgerfoldSession(SESSION, store=store, policy=POLICY)
    model = RecallingModel(json.dumps({"query": "Geneva locker code"}))
    agent = Agent(name="agent", model=model, tools=[session.recall_tool()])
    result = asyncio.run(Runner.run(agent, "What is my locker code?", session=session))
    assert result.final_output == "Your locker code is in the recalled passage."
    first, second = model.inputs
    # The slot says that recall_history returns the originals (the tool is offered).
    (slot,) = [i for i in first if i.get("role") == "system"]
    assert "<ledgerfold-summary>" in slot["content"]
    assert "can be fetched with the recall_history tool" in slot["content"]
    # The tool's output is the next model call's last item, with the recalled passage.
    output = second[-1]
    assert output["type"] == "function_call_output"
    hits = json.loads(output["output"])["hits"]
    assert hits and hits[0]["text"] == FACT
    assert hits[0]["sequence"] == 1
    # The search ran on the store's worker thread, never on the event loop's.
    (search_thread,) = [thread for name, thread in store.calls if name == "search"]
    assert search_thread is not threading.main_thread()
    assert search_thread.name.startswith("ledgerfold-store")


def test_bad_model_arguments_are_an_error_the_model_reads(tmp_path: Path) -> None:
    session = LedgerfoldSession(SESSION, store=_compacted(tmp_path / "c.db"), policy=POLICY)
    model = RecallingModel('{"query": 5}')
    agent = Agent(name="agent", model=model, tools=[session.recall_tool()])
    asyncio.run(Runner.run(agent, "What is my locker code?", session=session))
    assert "error" in json.loads(model.inputs[1][-1]["output"])


def test_without_the_tool_the_slot_does_not_mention_recall(tmp_path: Path) -> None:
    session = LedgerfoldSession(SESSION, store=_compacted(tmp_path / "d.db"), policy=POLICY)
    (slot,) = [i for i in asyncio.run(session.get_items()) if i.get("role") == "system"]
    assert "recall_history tool" not in slot["content"]
    session.recall_tool()
    (slot,) = [i for i in asyncio.run(session.get_items()) if i.get("role") == "system"]
    assert "can be fetched with the recall_history tool" in slot["content"]


def test_instructions_join_the_recall_slot(tmp_path: Path) -> None:
    session = LedgerfoldSession(SESSION, store=_compacted(tmp_path / "e.db"), policy=POLICY)
    model = RecallingModel(json.dumps({"query": "Geneva locker"}))
    agent = Agent(
        name="agent", instructions="Be brief.", model=model, tools=[session.recall_tool()]
    )
    config = lf_run_config(session)
    asyncio.run(Runner.run(agent, "Locker?", session=session, run_config=config))
    assert model.instructions[0].startswith("Be brief.\n\n")
    assert "can be fetched with the recall_history tool" in model.instructions[0]
    assert not [i for i in model.inputs[0] if i.get("role") == "system"]


def lf_run_config(session: LedgerfoldSession) -> Any:
    from agents import RunConfig

    return RunConfig(call_model_input_filter=session.call_model_input_filter)


def test_a_store_without_search_offers_no_recall(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "f.db", search=False)
    session = LedgerfoldSession(SESSION, store=store, policy=POLICY)
    with pytest.raises(lf.InvalidInput) as raised:
        session.recall_tool()
    assert raised.value.field == "store"
    assert "search" in str(raised.value)


class AnsweringModel(Model):
    """Answers every call with one message (no tool call)."""

    def __init__(self) -> None:
        self.instructions: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any):  # type: ignore[no-untyped-def]
        self.instructions.append(system_instructions)
        return ModelResponse(output=[_message("Noted.")], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_an_agent_without_the_tool_is_not_told_of_recall(tmp_path: Path) -> None:
    """With the filter, the summary joined to the instructions says `recall_history`
    returns the originals only to an agent that has the tool: one the run was handed to
    without it would call a tool it does not have."""
    session = LedgerfoldSession(SESSION, store=_compacted(tmp_path / "g.db"), policy=POLICY)
    tool = session.recall_tool()
    without, with_tool = AnsweringModel(), AnsweringModel()
    config = lf_run_config(session)
    plain = Agent(name="plain", instructions="Be brief.", model=without)
    asyncio.run(Runner.run(plain, "Hello?", session=session, run_config=config))
    helper = Agent(name="helper", instructions="Be brief.", model=with_tool, tools=[tool])
    asyncio.run(Runner.run(helper, "Hello again?", session=session, run_config=config))
    assert "Be brief." in without.instructions[0] and FRAMING not in without.instructions[0]
    assert FRAMING in with_tool.instructions[0]
