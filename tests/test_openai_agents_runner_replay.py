"""`LedgerfoldSession` as an agent developer uses it: a real `agents.Agent` and `Runner` with
the SDK's own `ScriptedModel`, on a file database, replaying real transcripts (their tool
calls and results, read line by line) through compactions; the `recall_history` tool called
by the model with bad arguments; an `add_items` cancelled mid-way; two sessions of one store
under `asyncio.gather` (SPEC §15.6, §16.2, §17.6)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner
from agents.testing.model import ModelStep, ScriptedModel
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold.integrations.openai_agents import LedgerfoldSession

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
SMALL = CompactionPolicy("replay", keep_tail=4, trigger_tokens=1500)


def _conversation(name: str, index: int) -> dict[str, Any]:
    with (DATA / name).open(encoding="utf-8") as lines:
        for at, line in enumerate(lines):
            if at == index:
                return json.loads(line)  # type: ignore[no-any-return]
    raise AssertionError(f"{name} has no line {index}")


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _call(call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call",
        call_id=call_id,
        name=name,
        arguments=arguments,
        id="fc_" + call_id[:24],
        status="completed",
    )


def _runs(conversation: dict[str, Any]) -> tuple[list[tuple[str, list[Any]]], dict[str, str]]:
    """Per user turn: its text and the model's responses up to its answer; and each call's
    recorded output (call IDs made unique: the `#n` suffix kept)."""
    runs: list[tuple[str, list[Any]]] = []
    outputs: dict[str, str] = {}
    for turn in conversation["turns"]:
        if turn["role"] == "user":
            runs.append((turn["body"], []))
        elif turn["role"] == "tool" and turn["tool_call_ids"]:
            outputs[turn["tool_call_ids"][0]] = turn["body"]
        elif turn["role"] == "assistant" and runs:
            lines = turn["body"].split("\n")
            calls = [json.loads(line)["tool_call"] for line in lines if line.startswith('{"tool')]
            text = "\n".join(line for line in lines if not line.startswith('{"tool'))
            output: list[Any] = [_message(text)] if text.strip() and not calls else []
            for call, call_id in zip(calls, turn["tool_call_ids"], strict=True):
                output.append(_call(call_id, call["name"], json.dumps(call["arguments"])))
            if output:
                runs[-1][1].append(output)
    return runs, outputs


def _assert_sendable(items: list[Any]) -> None:
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    results = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
    assert set(results) <= set(calls), "a result without its call"
    assert not [item for item in items if item.get("role") in ("system", "developer")]


@pytest.mark.parametrize(("name", "index"), [("tau_bench.jsonl", 0), ("swe_agent.jsonl", 3)])
def test_a_real_transcript_replayed_through_the_runner(
    tmp_path: Path, name: str, index: int
) -> None:
    runs, outputs = _runs(_conversation(name, index))
    store = SQLiteStore(tmp_path / "agent.db")
    session = LedgerfoldSession("replay", store=store, policy=SMALL)
    names = sorted(
        {o.name for _, steps in runs for out in steps for o in out if o.type != "message"}
    )

    def tool(tool_name: str) -> FunctionTool:
        async def invoke(context: Any, _arguments: str) -> str:
            return outputs[context.tool_call_id]

        schema = {"type": "object", "properties": {}, "additionalProperties": True}
        return FunctionTool(tool_name, tool_name, schema, invoke, strict_json_schema=False)

    agent = Agent(name="replay", instructions="You help.", tools=[*map(tool, names)])
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)

    async def replay() -> list[Any]:
        statuses = []
        for text, steps in runs[:12]:
            script: list[Any] = []
            for output in steps:
                script.append(ModelStep(output=output))
                if output[-1].type == "message":
                    break
            if not script or script[-1].output[-1].type != "message":
                script.append(ModelStep(output=[_message("Done.")]))
            model = ScriptedModel(script)
            clone = agent.clone(model=model)
            await Runner.run(clone, text, session=session, run_config=config, max_turns=60)
            for call in model.calls:  # every model call: pairs whole, one system message
                _assert_sendable(call.input)
                assert call.system_instructions is not None
            outcome = await session.wait_compaction()
            statuses.append(outcome.status if outcome is not None else None)
        return statuses

    statuses = asyncio.run(replay())
    assert "failed" not in statuses and store.current_summary("replay") is not None
    served = asyncio.run(session.get_items())
    assert served[0]["role"] == "system" and "<ledgerfold-summary>" in served[0]["content"]
    for item in served:  # a result comes back with the output the tool gave
        if item.get("type") == "function_call_output":
            assert item["output"] == outputs[item["call_id"]]
    store.close()


def test_recall_history_called_with_bad_arguments_answers_the_model(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "agent.db")
    session = LedgerfoldSession("r", store=store)
    recall = session.recall_tool()
    bad = ["{not json", "", "[]", '{"query": 5}', '{"query": "x", "limit": 99}']
    found = ['{"query": "nothing matches this"}']
    model = ScriptedModel(
        [
            ModelStep(
                output=[_call(f"r{n}", "recall_history", a) for n, a in enumerate(bad + found)]
            ),
            ModelStep(output=[_message("ok")]),
        ]
    )
    agent = Agent(name="a", model=model, tools=[recall])
    result = asyncio.run(Runner.run(agent, "What did I say?", session=session))
    answers = {
        item.raw_item["call_id"]: json.loads(item.raw_item["output"])
        for item in result.new_items
        if item.type == "tool_call_output_item"
    }
    assert [set(answers[f"r{n}"]) for n in range(len(bad))] == [{"error"}] * len(bad)
    assert answers[f"r{len(bad)}"]["hits"] == []
    store.close()


def test_an_add_items_cancelled_mid_way_lands_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled before its job starts, an `add_items` stores nothing; cancelled while its
    job runs (held there until the cancellation is made, so no timing decides which), it
    stores all its items."""
    store = SQLiteStore(tmp_path / "agent.db")
    body = " ".join(_conversation("tau_bench.jsonl", 0)["turns"][1]["body"].split()[:60])
    items = [{"role": "user", "content": f"{n} {body}"} for n in range(200)]
    started, release = threading.Event(), threading.Event()
    append = LedgerfoldSession._append

    def held(self: LedgerfoldSession, batch: list[Any]) -> int:
        started.set()
        assert release.wait(60)
        return append(self, batch)

    monkeypatch.setattr(LedgerfoldSession, "_append", held)

    async def cancelled(mid_way: bool) -> int:
        session = LedgerfoldSession(f"c{mid_way}", store=store)
        started.clear()
        release.clear()
        task = asyncio.ensure_future(session.add_items(items))
        if mid_way:
            assert await asyncio.to_thread(started.wait, 60)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await session.wait_compaction()
        return len(store.load(session.session_id).turns)

    assert asyncio.run(cancelled(mid_way=False)) == 0
    assert not started.is_set()  # its job never ran
    assert asyncio.run(cancelled(mid_way=True)) == len(items)
    store.close()


def test_two_sessions_of_one_store_under_gather(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "agent.db")
    policy = CompactionPolicy("g", keep_tail=2, trigger_tokens=60)
    sessions = [LedgerfoldSession(name, store=store, policy=policy) for name in ("A", "B")]

    async def converse(session: LedgerfoldSession) -> None:
        for n in range(5):
            model = ScriptedModel(
                [ModelStep(output=[_message(f"{session.session_id}-answer {n}")])]
            )
            agent = Agent(name="a", model=model)
            await Runner.run(
                agent, f"{session.session_id}-question {n} " + "w " * 20, session=session
            )

    async def both() -> list[Any]:
        await asyncio.gather(*(converse(session) for session in sessions))
        return [await session.wait_compaction() for session in sessions]

    outcomes = asyncio.run(both())
    assert all(outcome is not None for outcome in outcomes)
    for session, other in (sessions, sessions[::-1]):
        text = json.dumps(asyncio.run(session.get_items()))
        assert f"{other.session_id}-" not in text and f"{session.session_id}-answer 4" in text
        assert store.current_summary(session.session_id) is not None
    store.close()
