"""One system message with the Agents SDK session (SPEC §17.6), when the system prompt is a
system item of the session (a transcript carried over, an agent without `instructions`):
its summary joins that item rather than following it as a second leading system message,
which several providers refuse; with `instructions` and the session's
`call_model_input_filter`, the instructions, the system item and the summary are one, and
before the first summary the instructions and the system item."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner

from ledgerfold import CompactionPolicy
from ledgerfold.integrations.openai_agents import LedgerfoldSession
from loop_support import transcripts
from test_openai_agents import ScriptedModel, lookup

POLICY = CompactionPolicy("v1", keep_tail=3, trigger_tokens=400, min_new_turns=2)


def _real_session() -> tuple[str, list[str]]:
    """A real tau-bench conversation's system prompt and its user messages."""
    transcript = next(t for t in transcripts("tau_bench.jsonl") if t.turns[0].role == "system")
    users = [turn.body for turn in transcript.turns if turn.role == "user" and turn.body.strip()]
    return transcript.turns[0].body, users[:8]


def _run(
    tmp_path: Path, instructions: str | None, role: str = "system"
) -> tuple[str, list[Any], list[Any]]:
    prompt, users = _real_session()
    model = ScriptedModel()
    sent: list[str | None] = []
    original = model.get_response

    async def recording(system_instructions: Any, input: Any, *args: Any, **kw: Any) -> Any:
        sent.append(system_instructions)
        return await original(system_instructions, input, *args, **kw)

    model.get_response = recording  # type: ignore[method-assign]
    agent = Agent(name="agent", instructions=instructions, model=model, tools=[lookup])
    session = LedgerfoldSession("s", tmp_path / "s.db", policy=POLICY)
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)

    async def run_all() -> None:
        await session.add_items([{"role": role, "content": prompt}])
        for text in users:
            await Runner.run(agent, text, session=session, run_config=config)

    try:
        asyncio.run(run_all())
        assert session.store.current_summary("s") is not None
    finally:
        session.close()
    return prompt, sent, model.inputs


def _system_items(items: list[dict[str, Any]]) -> list[int]:
    return [at for at, item in enumerate(items) if item.get("role") in ("system", "developer")]


def test_without_instructions_the_summary_joins_the_sessions_system_item(
    tmp_path: Path,
) -> None:
    prompt, sent, inputs = _run(tmp_path, None)
    summarised = 0
    for system, items in zip(sent, inputs, strict=True):
        assert system is None
        assert _system_items(items) == [0]  # one system message, leading
        assert items[0]["content"].startswith(prompt)
        summarised += "<ledgerfold-summary>" in items[0]["content"]
    assert summarised > 0


def test_with_instructions_the_prompt_item_and_summary_join_them(tmp_path: Path) -> None:
    instructions = "You are careful. Confirm before booking."
    prompt, sent, inputs = _run(tmp_path, instructions)
    summarised = 0
    for system, items in zip(sent, inputs, strict=True):
        assert system is not None and system.startswith(instructions)
        if "<ledgerfold-summary>" in system:
            summarised += 1
            assert system.startswith(f"{instructions}\n\n{prompt}\n\n")
            assert _system_items(items) == []  # the model gets one system message
    assert summarised > 0


def test_with_instructions_the_prompt_item_joins_them_before_any_summary(
    tmp_path: Path,
) -> None:
    instructions = "You are careful. Confirm before booking."
    prompt, sent, inputs = _run(tmp_path, instructions)
    before = 0
    for system, items in zip(sent, inputs, strict=True):
        assert _system_items(items) == []  # the instructions are the one system message
        assert system is not None and system.startswith(f"{instructions}\n\n{prompt}")
        before += "<ledgerfold-summary>" not in system
    assert before > 0


@pytest.mark.parametrize("instructions", [None, "You are careful."])
def test_a_leading_developer_item_carries_the_summary_too(
    tmp_path: Path, instructions: str | None
) -> None:
    """The system prompt as a `developer` item (OpenAI's newer name for it): the summary
    joins it, keeping its role, so the model gets one leading instruction message; with
    `instructions` and the filter, both join the instructions and none is left in the input."""
    prompt, sent, inputs = _run(tmp_path, instructions, role="developer")
    summarised = 0
    for system, items in zip(sent, inputs, strict=True):
        if instructions is None:
            assert _system_items(items) == [0]
            assert items[0]["role"] == "developer"
            assert items[0]["content"].startswith(prompt)
            summarised += "<ledgerfold-summary>" in items[0]["content"]
        elif "<ledgerfold-summary>" in system:
            summarised += 1
            assert system.startswith(f"{instructions}\n\n{prompt}\n\n")
            assert _system_items(items) == []
    assert summarised > 0


def test_a_leading_system_item_of_text_parts_carries_the_summary(tmp_path: Path) -> None:
    """A system item whose content is a list of `input_text` parts (as the SDK's input items
    may be) is one system message with the summary too, not followed by a second one."""
    prompt, users = _real_session()
    policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)
    session = LedgerfoldSession("s", tmp_path / "p.db", policy=policy)
    half = len(prompt) // 2
    parts = [
        {"type": "input_text", "text": prompt[:half]},
        {"type": "input_text", "text": prompt[half:]},
    ]

    async def run_all() -> list[Any]:
        await session.add_items([{"role": "system", "content": parts}])
        for n, text in enumerate(users):
            await session.add_items([{"role": "user", "content": text}])
            await session.add_items([{"role": "assistant", "content": f"answer {n}"}])
        return await session.get_items()

    try:
        items = asyncio.run(run_all())
        assert session.store.current_summary("s") is not None
    finally:
        session.close()
    assert _system_items(items) == [0]
    assert items[0]["content"].startswith(f"{prompt}\n\n")
    assert "<ledgerfold-summary>" in items[0]["content"]
