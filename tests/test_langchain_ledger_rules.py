"""`LedgerfoldMiddleware` under SPEC §17.6, with a real `create_agent` and a fake chat model:
what is "already in the ledger" (purged and retracted IDs too), a state rewrite ignored and
logged, one leading system message, any `Store`, and async hooks off the event loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from integration_stores import RecordingStore
from langchain_support import LookingUp, lookup
from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold._worker import THREAD_NAME
from ledgerfold.integrations.langchain import LedgerfoldMiddleware

POLICY = CompactionPolicy("v1", keep_tail=3, trigger_tokens=100, min_new_turns=2)
CONFIG = {"configurable": {"thread_id": "t1"}}
PROMPT = "You are a careful booking assistant."


def _model(offset: int) -> LookingUp:
    """A fresh scripted model whose call IDs do not repeat an earlier one's."""
    return LookingUp(inputs=[[] for _ in range(offset)])


def _agent(middleware: LedgerfoldMiddleware, model: LookingUp, **kwargs: Any) -> Any:
    return create_agent(
        model, tools=[lookup], middleware=[middleware], checkpointer=InMemorySaver(), **kwargs
    )


def _ask(agent: Any, text: str) -> list[Any]:
    result = agent.invoke({"messages": [{"role": "user", "content": text}]}, CONFIG)
    return list(result["messages"])


def test_no_duplicate_id_after_a_purge_and_a_retraction(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "p.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    agent = _agent(middleware, LookingUp())
    for n in range(4):
        _ask(agent, f"Look up R{n}.")
    turns = store.load("c").turns
    assert store.current_summary("c") is not None
    store.purge_through("c", turns[5].sequence, "retention")  # the summary is sealed
    store.retract("c", turns[-2].id)
    # A fresh middleware too (a restarted process), which has seen nothing yet.
    for offset, current in enumerate((middleware, LedgerfoldMiddleware(store, "c", policy=POLICY))):
        agent = create_agent(
            _model(100 * (offset + 1)),
            tools=[lookup],
            middleware=[current],
            checkpointer=agent.checkpointer,
        )
        state = _ask(agent, "And R9?")  # raised DuplicateId on every call before
        ledger = store.load("c")
        assert turns[-2].id not in {turn.id for turn in ledger.turns}  # not re-appended
        assert state[-1].id in {turn.id for turn in ledger.turns} or isinstance(
            state[-1], AIMessage
        )
    # Every state message is in the ledger exactly once, never twice (the final reply too:
    # appended at the end of the run).
    ever = store.known_ids("c", [message.id for message in state])
    assert ever == {message.id for message in state}


def test_a_rewritten_state_message_is_ignored_and_logged_by_id(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "r.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    agent = _agent(middleware, LookingUp())
    state = _ask(agent, "Look up R1.")
    first = state[0]
    secret = "REWRITTEN-SECRET-TEXT"
    agent.update_state(CONFIG, {"messages": [HumanMessage(content=secret, id=first.id)]})
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    for offset, current in enumerate((middleware, LedgerfoldMiddleware(store, "c", policy=POLICY))):
        caplog.clear()
        agent = create_agent(
            _model(100 * (offset + 1)),
            tools=[lookup],
            middleware=[current],
            checkpointer=agent.checkpointer,
        )
        _ask(agent, "Look up R2.")
        # The ledger is the record: the turn keeps its text; the change is logged by ID only.
        assert store.get_turns("c", [first.id])[0].body == "Look up R1."
        changed = [r for r in caplog.records if "changed" in r.getMessage()]
        assert len(changed) == 1 and first.id in changed[0].getMessage()
        assert all(secret not in record.getMessage() for record in caplog.records)


def test_one_leading_system_message_with_the_agents_prompt(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    model = LookingUp()
    agent = _agent(middleware, model, system_prompt=PROMPT)
    for n in range(5):
        _ask(agent, "Never pay with the Visa card. Look up R1." if n == 0 else f"R{n}?")
    assert store.current_summary("c") is not None
    summarised = 0
    for sent in model.inputs:
        assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith(PROMPT)
        # Never two leading system messages, and the summary only in the first one.
        assert not isinstance(sent[1], SystemMessage)
        assert not any("<ledgerfold-summary>" in str(m.content) for m in sent[1:])
        summarised += "<ledgerfold-summary>" in sent[0].content
    assert summarised > 0
    assert "Visa" in model.inputs[-1][0].content


@pytest.mark.parametrize(
    "prompt",
    [PROMPT, SystemMessage(content=[{"type": "text", "text": PROMPT}])],
    ids=["text", "blocks"],
)
def test_the_agents_prompt_and_a_system_message_in_the_state_are_one(
    tmp_path: Path, prompt: str | SystemMessage
) -> None:
    # The agent has a prompt and the thread starts with a SystemMessage of its own: the model
    # got both as two leading system messages (the summary before the state's one).
    store = SQLiteStore(tmp_path / "two.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    model = LookingUp()
    agent = _agent(middleware, model, system_prompt=prompt)
    state_prompt = "Answer in French."
    opening = [SystemMessage(state_prompt), HumanMessage("Never pay with the Visa card. R1?")]
    agent.invoke({"messages": opening}, CONFIG)
    for n in range(2, 6):
        _ask(agent, f"R{n}?")
    assert store.current_summary("c") is not None
    summarised = 0
    for sent in model.inputs:
        assert [isinstance(m, SystemMessage) for m in sent].count(True) == 1
        text = sent[0].text
        assert isinstance(sent[0], SystemMessage) and text.startswith(PROMPT)
        assert state_prompt in text
        if "<ledgerfold-summary>" in text:  # after both prompts
            assert text.index(state_prompt) < text.index("<ledgerfold-summary>")
            summarised += 1
    assert summarised > 0


@pytest.mark.parametrize("prompt", [None, PROMPT], ids=["no-prompt", "prompt"])
def test_several_system_messages_leading_the_state_are_one_with_the_summary(
    tmp_path: Path, prompt: str | None
) -> None:
    """A thread opening with two system messages (a policy, then a locale rule): with the
    agent's prompt, or once a summary is used, the model gets one leading system message
    holding them all in order (only the first joined it; the second led on its own)."""
    store = SQLiteStore(tmp_path / "many.db")
    model = LookingUp()
    agent = _agent(LedgerfoldMiddleware(store, "c", policy=POLICY), model, system_prompt=prompt)
    rules = ["Follow the airline policy.", "Answer in French."]
    opening = [SystemMessage(rules[0]), SystemMessage(rules[1]), HumanMessage("R1?")]
    agent.invoke({"messages": opening}, CONFIG)
    for n in range(2, 6):
        _ask(agent, f"R{n}?")
    assert store.current_summary("c") is not None
    summarised = 0
    for sent in model.inputs:
        summarised += "<ledgerfold-summary>" in sent[0].text
        if prompt is None and "<ledgerfold-summary>" not in sent[0].text:
            continue  # no summary, no prompt: the state's messages as they are
        assert [isinstance(m, SystemMessage) for m in sent].count(True) == 1
        text = sent[0].text
        assert text.index(rules[0]) < text.index(rules[1])
    assert summarised > 0


def test_the_prompt_in_content_blocks_keeps_its_blocks(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "b.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    model = LookingUp()
    block = {"type": "text", "text": PROMPT, "cache_control": {"type": "ephemeral"}}
    agent = _agent(middleware, model, system_prompt=SystemMessage(content=[block]))
    for n in range(5):
        _ask(agent, f"R{n}?")
    first = model.inputs[-1][0]
    assert first.content[0] == block
    assert "<ledgerfold-summary>" in first.content[1]["text"]
    assert not isinstance(model.inputs[-1][1], SystemMessage)


def test_pre_model_hook_with_the_middlewares_prompt() -> None:
    import warnings

    from langgraph.prebuilt import create_react_agent

    store = SQLiteStore()
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY, system_prompt=PROMPT)
    model = LookingUp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(
            model, [lookup], pre_model_hook=middleware.pre_model_hook, checkpointer=InMemorySaver()
        )
    for n in range(5):
        _ask(agent, f"R{n}?")
    sent = model.inputs[-1]
    assert sent[0].content.startswith(PROMPT) and "<ledgerfold-summary>" in sent[0].content
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1


@pytest.mark.parametrize("known_ids", [True, False], ids=["store-v2", "store-v1.1"])
def test_any_store_through_public_methods(tmp_path: Path, known_ids: bool) -> None:
    store = RecordingStore(tmp_path / "any.db", known_ids=known_ids)
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)  # type: ignore[arg-type]
    agent = _agent(middleware, LookingUp())
    for n in range(3):
        _ask(agent, f"R{n}?")
    turns = store.inner.load("c").turns
    store.inner.retract("c", turns[1].id)  # a v1.1 store finds this one by the refused append
    store.inner.purge_through("c", turns[0].sequence, "x", force=True)
    agent = create_agent(
        _model(100),
        tools=[lookup],
        middleware=[LedgerfoldMiddleware(store, "c", policy=POLICY)],  # type: ignore[arg-type]
        checkpointer=agent.checkpointer,
    )
    state = _ask(agent, "R9?")
    assert store.inner.known_ids("c", [m.id for m in state]) == {m.id for m in state}
    assert ("known_ids" in store.names()) is known_ids
    # Tool results joined their calls' groups without the store's chat append.
    live = store.inner.load("c").turns
    groups = {t.meta["tool_call_id"]: t.group for t in live if t.role == "tool"}
    assert groups and all(group == "tools:" + call for call, group in groups.items())


def test_a_result_joins_a_call_made_before_this_instance(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "g.db")
    call = {"name": "lookup", "args": {}, "id": "k1"}
    second = {"name": "lookup", "args": {}, "id": "k2"}
    asked = AIMessage(content="", tool_calls=[call, second], id="a1")
    LedgerfoldMiddleware(store, "c").append_new([HumanMessage("hi", id="h1"), asked])
    later = LedgerfoldMiddleware(store, "c")  # a new process: remembers nothing
    state = [HumanMessage("hi", id="h1"), asked, ToolMessage("r2", tool_call_id="k2", id="t2")]
    assert later.append_new(state) == 1
    assert store.get_turns("c", ["t2"])[0].group == "tools:k1"


def test_async_hook_runs_store_work_off_the_loop(tmp_path: Path) -> None:
    store = RecordingStore(tmp_path / "a.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)  # type: ignore[arg-type]
    model = LookingUp()
    agent = _agent(middleware, model, system_prompt=PROMPT)

    async def scenario() -> threading.Thread:
        for n in range(4):
            await agent.ainvoke({"messages": [{"role": "user", "content": f"R{n}?"}]}, CONFIG)
        return threading.current_thread()

    loop_thread = asyncio.run(scenario())
    assert {"known_ids", "append_many", "begin_compaction", "context"} <= set(store.names())
    (worker,) = store.threads()
    assert worker is not loop_thread and worker.name.startswith(THREAD_NAME)
    assert store.inner.current_summary("c") is not None
    assert model.inputs[-1][0].content.startswith(PROMPT)


@pytest.mark.parametrize("hook", ["create_agent", "pre_model_hook"])
def test_sync_invoke_inside_a_running_loop_with_an_async_summarizer(
    tmp_path: Path, hook: str
) -> None:
    # A notebook's `agent.invoke`: the sync hook runs on a thread whose event loop is
    # running. `Compactor.compact` refuses an async summarizer there, which stopped every
    # model call; the hook now compacts on a thread of its own.
    import warnings

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langgraph.prebuilt import create_react_agent

    from ledgerfold.summarizers import AsyncChatModelSummarizer

    replies = iter([AIMessage("[seq 1 user] The user asked for lookups.")] * 20)
    summarizer = AsyncChatModelSummarizer(GenericFakeChatModel(messages=replies))
    store = SQLiteStore(tmp_path / "loop.db")
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY, summarizer=summarizer)
    model = LookingUp()
    if hook == "create_agent":
        agent = _agent(middleware, model)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph v1
            agent = create_react_agent(
                model,
                [lookup],
                pre_model_hook=middleware.pre_model_hook,
                checkpointer=InMemorySaver(),
            )

    async def notebook_cell() -> None:
        for n in range(5):
            _ask(agent, f"R{n}?")

    asyncio.run(notebook_cell())
    summary = store.current_summary("c")
    assert summary is not None and "The user asked for lookups." in summary.text
    assert "The user asked for lookups." in str(model.inputs[-1][0].content)


def test_a_result_after_a_user_message_reaches_the_model_as_the_states_own(
    tmp_path: Path,
) -> None:
    """A user spoke while the tool ran (call, user, result, SPEC §17.2): the model gets the
    call and the result right after it, then the user's message, and each is the state's
    own message (its `artifact`, its `additional_kwargs`), not a rendering of another."""
    model = LookingUp()
    with SQLiteStore(tmp_path / "s.db") as store:
        agent = create_agent(
            model,
            tools=[lookup],
            middleware=[LedgerfoldMiddleware(store, "c")],
            checkpointer=InMemorySaver(),
            system_prompt=PROMPT,
        )
        call = {"name": "lookup", "args": {"code": "A"}, "id": "c1"}
        seed = [
            HumanMessage("book", id="h1"),
            AIMessage("", tool_calls=[call], id="a1", additional_kwargs={"k": 1}),
            HumanMessage("and a hotel", id="h2"),
            ToolMessage("reservation A", tool_call_id="c1", id="t1", artifact={"rows": 1}),
            AIMessage("Done.", id="a2"),
            HumanMessage("thanks", id="h3"),
        ]
        agent.invoke({"messages": seed}, CONFIG)
    sent = model.inputs[0]
    assert [message.id for message in sent[1:]] == ["h1", "a1", "t1", "h2", "a2", "h3"]
    assert sent[2].additional_kwargs == {"k": 1}
    assert sent[3].artifact == {"rows": 1}
