"""LangChain v1 / LangGraph: the ledger as the model's memory (`ledgerfold[langgraph]`).

`LedgerfoldMiddleware` is an `AgentMiddleware` for `langchain.agents.create_agent`: before
each model call it appends the state messages the ledger has not seen (by `message.id`),
compacts when due, and replaces only the model's input with the ledgerfold context (the
summary as one `SystemMessage`, then every uncovered turn). The graph state is never
changed: every message stays in it, and nothing is deleted. `pre_model_hook` is the same
for LangGraph's `create_react_agent` (it returns `llm_input_messages`).

- "Already in the ledger" is any ID ever written to the conversation, live, retracted or
  purged (SPEC §17.6, `known_ids`): a purge or a retraction never makes a state message
  new again. A known message whose content changed in the state is ignored (the ledger is
  the record; a state rewrite is not an edit) and logged by ID, once per change (again if
  it changes again; back to what its turn says, it is the record's again), unless its turn
  was edited to say the same (`store.edit`): then it is the record's. A message removed
  from the state (`RemoveMessage`, a fork from an earlier checkpoint) stays in the ledger
  and the model's input: `store.retract` takes it out.
- With the agent's system prompt (`create_agent(system_prompt=...)`), the summary joins it
  in one leading system message (`to_chat_messages(..., system_prompt=...)`), and so does a
  `SystemMessage` leading the state (after the agent's prompt, before the summary).
- Per call the work follows the new messages, not the state: the IDs seen are remembered,
  so only unseen ones go to the store.
- `awrap_model_call` runs all store work on the store's worker thread (`ledgerfold._worker`),
  never on the event loop's; the sync hooks run it on the calling thread (their compaction
  on a thread of its own when that thread's event loop is running: a notebook's `invoke`).
- Any `Store` will do, through its public methods.
- One middleware, many threads: with `conversation_id=None` each run's conversation is its
  LangGraph `thread_id` (`config["configurable"]["thread_id"]`), so one agent graph serves
  many users without their messages meeting; a fixed `conversation_id` is one conversation
  for every thread (logged once, by thread ID, when a second thread uses it).
- The model's final reply is appended at the end of the run (`after_agent`; for
  `create_react_agent`, `post_model_hook`), not left for the thread's next model call.
- The model sees each raw turn as the state holds it (image parts, thinking blocks, a tool
  result's status and artifact), when the state's message still says what the ledger
  holds; otherwise, and for turns the state no longer has, as the ledger renders it.
- Recall (SPEC §16.2): with `recall=True` (the default when the store can search) the
  middleware registers `recall_history` with the agent (`middleware.tools`, which
  `create_agent` adds to the model's tools and its tool node) and the summary's framing says
  that `recall_history` returns the originals (those a purge has not deleted).
  `middleware.recall_tool` is the tool (a LangChain `StructuredTool`:
  `ledgerfold.tools.run_recall` over this conversation; its async form on the store's
  worker thread), for LangGraph's `create_react_agent` too.

Messages cross over through `ledgerfold.adapters._langchain`: `langchain_core`'s own
converters, plus what they would lose (a model's unparsable call keeps its record in the
ledger, and its result its group). A call LangChain gives no ID (`None` or `""`) is kept
under `unnamed_call_id(<message id>, <index>)`; a `tool_call_id=""` result `ToolNode` gave
it answers it (found in the state when the call came in an earlier batch), and a call
nothing answers is left out of the model's input by the chat rule, as any unanswered call.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import operator
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest
    from langchain_core.tools import BaseTool
except ImportError as error:  # `ledgerfold[langchain]` is langchain-core alone
    raise ImportError(
        "ledgerfold.integrations.langchain needs langchain (v1) and langgraph:"
        " pip install 'ledgerfold[langgraph]'"
    ) from error

from ledgerfold import _native, _validate
from ledgerfold._compactor import Compactor
from ledgerfold._context import SummaryItem, TurnItem
from ledgerfold._errors import DuplicateId, InvalidInput
from ledgerfold._events import EventHook
from ledgerfold._policy import CompactionPolicy
from ledgerfold._worker import worker_for
from ledgerfold.adapters._chat import tool_group
from ledgerfold.adapters._langchain import (
    langchain_context_messages,
    langchain_turn_specs,
    ledger_call_ids,
)
from ledgerfold.adapters._summary_contents import SummaryContents
from ledgerfold.integrations._langchain_recall import recall_tool as _recall_tool
from ledgerfold.integrations._langchain_state import (
    KNOWN_CONVERSATIONS,
    Known,
    agreeing,
    as_in_state,
    group_in_state,
    notice_edits,
    same,
    signature,
    state_messages,
    unnamed_answers,
)
from ledgerfold.integrations._turns import append_specs
from ledgerfold.store._protocol import Store
from ledgerfold.summarizers._base import Summarizer, in_running_loop
from ledgerfold.tokens import LangChainCounter
from ledgerfold.tools import check_recall_store

__all__ = ["DEFAULT_POLICY", "LedgerfoldMiddleware"]

_log = logging.getLogger("ledgerfold.integrations.langchain")

#: The default policy: compact once the context passes 8000 (approximate) tokens.
DEFAULT_POLICY = CompactionPolicy("ledgerfold-langchain-1", keep_tail=8, trigger_tokens=8000)


class LedgerfoldMiddleware(AgentMiddleware):
    """Keep a conversation's messages in `store` (any `Store`) under `conversation_id` (None:
    each run's LangGraph `thread_id`, so one agent serves many threads apart) and send the
    model the ledgerfold context. `policy` defaults to `DEFAULT_POLICY` (its token counter
    counts as the model gets it: a tool's image, no line naming it; `LangChainCounter`),
    `summarizer` to the `Compactor`'s default (`ExtractiveSummarizer`). Messages need an
    `id` (LangGraph's `add_messages` gives every state message one). `system_prompt` is for
    `pre_model_hook` (give LangGraph's agent no `prompt=` then) and for an agent without
    one of its own: `create_agent`'s system prompt is taken from the request. `recall`:
    offer the `recall_history` tool (default: when the store has `search`; `True` with a
    store that cannot search raises `InvalidInput`); `middleware.recall_tool` is None
    without it. `on_event` receives the compactor's events (`Compactor(..., on_event=)`:
    compactions and contexts served raw; the store's own come from its hook)."""

    def __init__(
        self,
        store: Store,
        conversation_id: str | None = None,
        *,
        policy: CompactionPolicy | None = None,
        summarizer: Summarizer | None = None,
        system_prompt: str | None = None,
        recall: bool | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        super().__init__()
        self.store = store
        self.conversation_id = (
            None if conversation_id is None else _validate.text("conversation_id", conversation_id)
        )
        if recall is None:
            recall = callable(getattr(store, "search", None))
        elif not isinstance(recall, bool):
            raise InvalidInput(
                f"recall: must be bool or None, got {type(recall).__name__}",
                field="recall",
                problem="wrong-type",
            )
        elif recall:
            check_recall_store(store)
        self.recall = recall
        self.recall_tool: BaseTool | None = _recall_tool(store, self.current) if recall else None
        # `create_agent` gives the model (and its tool node) every middleware's `tools`.
        self.tools = [self.recall_tool] if self.recall_tool is not None else []
        if system_prompt is not None:
            _validate.text("system_prompt", system_prompt, blank_ok=True)
        self.system_prompt = system_prompt
        policy = policy if policy is not None else DEFAULT_POLICY
        if not isinstance(policy.token_counter, LangChainCounter):  # counted as sent
            policy = dataclasses.replace(policy, token_counter=LangChainCounter(policy.counter))
        self.compactor = Compactor(store, policy, summarizer, on_event=on_event)
        self._lock = threading.Lock()
        # What this instance knows of each conversation (`Known`), the latest used last.
        self._known_of: OrderedDict[str, Known] = OrderedDict()
        self._threads: set[Any] = set()  # the threads a fixed conversation served
        # The message content of the summary items served, while each item lives.
        self._contents = SummaryContents()

    def current(self) -> str:
        """The conversation of the run being served: `conversation_id`, or the run's
        LangGraph `thread_id` when it is None (`InvalidInput` naming `conversation_id` when
        the run has none)."""
        thread = _thread_id()
        if self.conversation_id is not None:
            if thread is not None and len(self._threads) < 2 and thread not in self._threads:
                self._threads.add(thread)
                if len(self._threads) == 2:
                    _log.warning(
                        "one conversation for several LangGraph threads: conversation_id=%s"
                        " thread_id=%s (pass conversation_id=None to follow the thread)",
                        self.conversation_id,
                        thread,
                    )
            return self.conversation_id
        if thread is None:
            raise InvalidInput(
                "conversation_id: None follows the LangGraph thread, and this run has no"
                " configurable thread_id",
                field="conversation_id",
                problem="empty",
            )
        return _validate.text("thread_id", str(thread))

    def _known(self, conversation_id: str) -> Known:
        known = self._known_of.get(conversation_id)
        if known is None:
            known = self._known_of[conversation_id] = Known()
            while len(self._known_of) > KNOWN_CONVERSATIONS:
                self._known_of.popitem(last=False)  # rebuilt from the ledger when back
        else:
            self._known_of.move_to_end(conversation_id)
        return known

    # -- appending ------------------------------------------------------------------------

    def append_new(self, messages: Sequence[Any], conversation_id: str | None = None) -> int:
        """Append the messages whose IDs the ledger has never held to `conversation_id`
        (default: `current()`); returns how many. A known message whose content changed in
        `messages` is left alone and logged (by ID), unless its turn was edited to match."""
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
            raise InvalidInput(
                f"messages: must be a sequence of messages, got {type(messages).__name__}",
                field="messages",
                problem="wrong-type",
            )
        conversation_id = self.current() if conversation_id is None else conversation_id
        return self._append_new(conversation_id, messages)

    def _append_new(self, conversation_id: str, messages: Sequence[Any]) -> int:
        # The state of the last call, object for object, then new messages only (one model
        # call after another within a run): C-speed identity checks, and only the rest is
        # looked at. Otherwise (a state reloaded from a checkpoint, a message replaced) the
        # whole state is compared with what was seen, message by message.
        # The lock guards this instance's memory only, never a store call: the async hook's
        # store work runs in a batch of the store's worker, which holds the store meanwhile
        # (SPEC §17.6), so a sync caller waiting for the store with the lock held would
        # deadlock with it. Two runs of one conversation at once may then both find a
        # message new: the second append's `DuplicateId` skips it (`_append`).
        with self._lock:
            known = self._known(conversation_id)
        prefix = known.prefix
        start = 0
        if len(messages) >= len(prefix) and all(map(operator.is_, prefix, messages)):
            start = len(prefix)
        appended = self._append_from(conversation_id, known, messages, start)
        known.prefix = list(messages)
        return appended

    def _append_from(
        self, conversation_id: str, known: Known, messages: Sequence[Any], start: int
    ) -> int:
        unseen: list[Any] = []
        rewritten: list[Any] = []  # known messages now saying something else in the state
        position: dict[str, int] = {}  # each unseen message's place in `messages`
        seen_before = known.seen.get
        # A dict lookup and an identity (or string) comparison per message; nothing that
        # reads the store.
        for index in range(start, len(messages)):
            message = messages[index]
            message_id: Any = getattr(message, "id", None)
            seen = seen_before(message_id) if isinstance(message_id, str) else None
            if seen is None:
                if not isinstance(message_id, str) or not message_id:
                    raise InvalidInput(
                        f"messages[{index}].id: a message needs an id to be appended once",
                        field=f"messages[{index}].id",
                        problem="empty",
                    )
                unseen.append(message)
                position.setdefault(message_id, index)
            elif message_id in known.changed:  # logged: looked at again once it changes again
                if not known.logged(message):
                    rewritten.append(message)
                known.latest[message_id] = message
            elif same(seen, message):
                known.objects[message_id] = message
            else:
                rewritten.append(message)
        if rewritten:
            self._check_rewritten(conversation_id, known, rewritten, messages)
        if not unseen:
            return 0
        in_ledger = self._in_ledger(conversation_id, [message.id for message in unseen])
        new = [message for message in unseen if message.id not in in_ledger]
        old = [message for message in unseen if message.id in in_ledger]
        answers = unnamed_answers(messages, unseen)
        if old:
            self._learn_calls(conversation_id, known, old)
            self._check_known(conversation_id, known, old, answers)
        appended = (
            self._append(conversation_id, known, new, messages, answers, position) if new else 0
        )
        for message in unseen:
            known.seen[message.id] = signature(message)
            known.objects[message.id] = message
        return appended

    def _in_ledger(self, conversation_id: str, ids: list[str]) -> set[str]:
        known_ids = getattr(self.store, "known_ids", None)
        if known_ids is not None:
            return set(known_ids(conversation_id, ids))
        # A v1.1 store: live turns here; retracted and purged ones are found by `_append`.
        return {turn.id for turn in self.store.get_turns(conversation_id, ids)}

    def _append(
        self,
        conversation_id: str,
        known: Known,
        new: list[Any],
        state: Sequence[Any],
        answers: dict[str, str],
        position: dict[str, int],
    ) -> int:
        results = {at: answers[m.id] for at, m in enumerate(new) if m.id in answers}
        # Bad input (NaN in a call's arguments, …) is named by its place in the state.
        places = [position[message.id] for message in new]
        specs = langchain_turn_specs(new, results=results, positions=places)
        ids = [spec.id if spec.id is not None else "t-" + uuid.uuid4().hex for spec in specs]
        groups = dict(known.group_of_call)
        turns = append_specs(specs, ids, groups, lambda call_id: group_in_state(state, call_id))
        skipped: set[str] = set()
        # A turn the store already holds (a store without `known_ids`: the ID was retracted
        # or purged; or another run of this conversation appended it meanwhile) raises
        # `DuplicateId` naming one ID: the rest of that batch is tried again in two halves,
        # in order, so a state of many such IDs costs O(n log n) turns handed to the store,
        # not O(n) batches of O(n) turns each.
        pending = [turns]  # a stack: the next batch to try last
        while pending:
            batch = pending.pop()
            try:
                self.store.append_many(conversation_id, batch)
            except DuplicateId as error:
                at = next((n for n, turn in enumerate(batch) if turn["id"] == error.id), None)
                if at is None or error.id in skipped:
                    raise
                skipped.add(error.id)
                rest = batch[:at] + batch[at + 1 :]
                half = len(rest) // 2
                pending += [part for part in (rest[half:], rest[:half]) if part]
        known.group_of_call.update(groups)  # what another run learnt meanwhile stays
        return sum(message.id not in skipped for message in new)

    def _learn_calls(self, conversation_id: str, known: Known, messages: list[Any]) -> None:
        """The groups of calls made by messages the ledger already holds (first seen here),
        read from their turns, so a result arriving later joins its call's group."""
        calling = {message.id: ledger_call_ids(message) for message in messages}
        calling = {turn_id: call_ids for turn_id, call_ids in calling.items() if call_ids}
        if not calling:
            return
        stored = self.store.get_turns(conversation_id, list(calling))
        for turn in stored:  # in sequence order: the newest call of an ID wins
            group = turn.group or tool_group(calling[turn.id])
            known.group_of_call.update(dict.fromkeys(calling[turn.id], group))

    def _check_known(
        self, conversation_id: str, known: Known, messages: list[Any], answers: dict[str, str]
    ) -> None:
        """Log the known messages (first seen here) that differ from their live turn (none
        retracted or purged); `answers`: each `""` result's call (`unnamed_answers`)."""
        agree = agreeing(self.store, conversation_id, messages, answers)
        for message in messages:
            if agree[message.id] is False:
                known.log_changed(conversation_id, message)

    def _check_rewritten(
        self, conversation_id: str, known: Known, messages: list[Any], state: Sequence[Any]
    ) -> None:
        """Known messages that say something else in the state than when seen: an edit of
        the ledger (`Store.edit`) that the state now says too is the record, and the state's
        message is taken as it (the model gets it); any other change is a state rewrite,
        ignored and logged (SPEC §17.6). Read once per change: a message logged is read again
        when it changes again (logged again), or back to what the ledger says (no more)."""
        answers = unnamed_answers(state, messages)
        agree = agreeing(self.store, conversation_id, messages, answers)
        for message in messages:
            agrees = agree.get(message.id)
            if agrees or (agrees is None and same(known.seen[message.id], message)):
                known.settle(message)  # (None: no live turn to compare, back to as seen)
            else:
                known.log_changed(conversation_id, message)

    # -- the model's input ----------------------------------------------------------------

    def model_messages(
        self, system_prompt: str | None = None, conversation_id: str | None = None
    ) -> list[Any]:
        """The ledgerfold context of `conversation_id` (default: `current()`) as LangChain
        messages; with `system_prompt`, the first is one `SystemMessage` holding it, then the
        system turns that lead the context (prompts kept in the state), then the summary.
        Without one, those leading turns are the prompt: one system message either way (SPEC
        §17.6). A raw
        turn is the state's own message when the state still says what the ledger holds (its
        image parts, thinking blocks, status and artifact kept)."""
        conversation_id = self.current() if conversation_id is None else conversation_id
        context = self.compactor.context(conversation_id)
        leading: list[str] = []  # the system turns leading the context (the state's prompts)
        for item in context.items:
            if not isinstance(item, TurnItem) or item.role != "system":
                break
            leading.append(item.text)
        if leading and (system_prompt is not None or context.summary is not None):
            # The agent's prompt and the state's own leading ones are one system message
            # too: a second leading system message is refused by some providers.
            for text in leading:
                system_prompt = _joined(system_prompt, text)
            context = dataclasses.replace(context, items=context.items[len(leading) :])
        messages = langchain_context_messages(
            context,
            system_prompt=system_prompt,
            recall=self.recall,
            content=self._contents.content,
        )
        known = self._known_of.get(conversation_id)
        if known is None or not known.objects:
            return messages
        notice_edits(known, context.items)  # a logged rewrite the ledger now says too
        # The turn each message renders, as `to_chat_messages` emits them: a leading system
        # message with the prompt, the summary (in place without one), the sendable turns
        # in the order they are sent (a tool result with its call).
        order = _native.chat_order(context.items)
        # (An empty prompt with no summary leads no message.)
        led = bool(system_prompt) or (system_prompt is not None and context.summary is not None)
        turn_ids: list[str | None] = [None] if led else []
        for at in range(len(context.items)) if order is None else order:
            item = context.items[at]
            if isinstance(item, SummaryItem):
                if system_prompt is None:
                    turn_ids.append(None)
                continue
            turn_ids.append(item.id)
        if len(turn_ids) != len(messages):  # not as expected: the ledger's rendering
            return messages
        return [
            message if turn_id is None else as_in_state(message, turn_id, known)
            for message, turn_id in zip(messages, turn_ids, strict=True)
        ]

    def _model_request(self, request: Any, conversation_id: str) -> Any:
        """The request with the ledgerfold context as its messages; the agent's system
        message, when it has one, carries the summary (one leading system message). A
        prompt that adds no text (content blocks, `""`) before the first summary leads no
        message: the agent's system message is then left as it is."""
        system = request.system_message
        if system is None and self.system_prompt is None:
            return request.override(messages=self.model_messages(None, conversation_id))
        content: Any = None if system is None else system.content
        prompt = self.system_prompt if system is None else content
        messages = self.model_messages(prompt if isinstance(prompt, str) else "", conversation_id)
        if not messages or messages[0].type != "system":  # no prompt text, no summary
            return request.override(messages=messages)
        first, *rest = messages
        if system is None:
            return request.override(messages=rest, system_message=first)
        if isinstance(content, str):
            update = {"content": first.content}
        else:  # content blocks (e.g. with cache control) stay as they are; the summary follows
            update = {"content": [*content, {"type": "text", "text": first.content}]}
        return request.override(messages=rest, system_message=system.model_copy(update=update))

    def _prepare(self, request: Any) -> Any:
        _check_request(request)
        conversation_id = self.current()
        self.append_new(request.messages, conversation_id)
        self._compact(conversation_id)
        return self._model_request(request, conversation_id)

    def _compact(self, conversation_id: str) -> None:
        """`compact` for a sync hook. Called on a thread whose event loop is running (a
        notebook's `agent.invoke`), it runs on a thread of its own, which this one waits
        for: there an async summarizer gets the event loop `compact` gives it, where here
        `compact` would refuse it on every model call."""
        if not in_running_loop():
            self.compactor.compact(conversation_id)
            return
        context = contextvars.copy_context()  # the run's config, for the summarizer's model
        failure: list[BaseException] = []

        def run() -> None:
            try:
                context.run(self.compactor.compact, conversation_id)
            except BaseException as error:  # re-raised on the hook's thread
                failure.append(error)

        thread = threading.Thread(target=run, name="ledgerfold-langchain-compact")
        thread.start()
        thread.join()
        if failure:
            raise failure[0]

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(self._prepare(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        # Store work on the store's worker thread, never on the event loop's: one job when
        # nothing is due (append, due check, context), two around a summarizer call.
        _check_request(request)
        conversation_id = self.current()
        _, prepared = await self.compactor._acompact(
            conversation_id,
            False,
            lambda: self.append_new(request.messages, conversation_id),
            lambda: self._model_request(request, conversation_id),
        )
        return await handler(prepared)

    def after_agent(self, state: Any, runtime: Any) -> None:
        """At the end of a `create_agent` run: append the model's final reply now (the
        thread's next call may never come)."""
        self.post_model_hook(state)

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        """`after_agent`, its store work on the store's worker thread."""
        messages = state_messages(state)
        conversation_id = self.current()
        await worker_for(self.store).run(self._append_new, conversation_id, messages)

    def post_model_hook(self, state: Any) -> dict[str, Any]:
        """A LangGraph `post_model_hook` (`create_react_agent`): `after_agent`'s append,
        after each model call. Changes nothing in the state."""
        self.append_new(state_messages(state), self.current())
        return {}

    def pre_model_hook(self, state: Any) -> dict[str, Any]:
        """A LangGraph `pre_model_hook`: the model's input only (`llm_input_messages`),
        led by `system_prompt` (and the summary) when the middleware has one."""
        messages = state_messages(state)
        conversation_id = self.current()
        self.append_new(messages, conversation_id)
        self._compact(conversation_id)
        return {"llm_input_messages": self.model_messages(self.system_prompt, conversation_id)}


def _check_request(request: Any) -> None:
    """A model call hook's `request` is `create_agent`'s `ModelRequest` (its messages, its
    system message and `override` are what the hook reads)."""
    if not isinstance(request, ModelRequest):
        raise InvalidInput(
            f"request: must be a langchain ModelRequest, got {type(request).__name__}",
            field="request",
            problem="wrong-type",
        )


def _joined(prompt: str | None, state_prompt: str) -> str:
    """The agent's system prompt, then the state's leading system message."""
    return f"{prompt}\n\n{state_prompt}" if prompt else state_prompt


def _thread_id() -> Any:
    """The LangGraph `thread_id` of the run this call is part of, or None."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except (ImportError, RuntimeError):  # not inside a LangGraph run
        return None
    return (config.get("configurable") or {}).get("thread_id")
