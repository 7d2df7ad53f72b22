"""`LedgerfoldSession`: an OpenAI Agents SDK `Session` backed by the ledger (`openai-agents`).

Every item the SDK adds becomes one turn, with the item kept verbatim in
`meta["agents_item"]` (JSON) so it comes back exactly as it came (a str text field, and a
message's text parts' texts, are kept once, as the turn body or the call's arguments, so
their tokens are not counted twice): a
`message` is a turn of its role (`developer` → `system`), a call (`function_call` or any
other `*_call` item) an assistant turn with `tool_calls` and its `*_call_output` a tool turn
answering it (one compaction unit, also across `add_items` calls), parallel calls one
group, a `reasoning` item an assistant turn holding its summary text (else its reasoning
text) in the group of the item after it, a hosted MCP call an assistant turn holding its
output, and any other item type an assistant turn with no text
(`ledgerfold.integrations._agents_items`). `get_items` returns the ledgerfold context: the
current summary as one `system` item, then every turn it does not cover, as its item (a
result whose call is not among them left out, as the SDK leaves out a call without its
result, and so is a reasoning item whose answer or call `pop_item` took). After each
`add_items`, compaction runs when the policy says it is due: with the built-in summarizer as
the store's next job, not awaited (`wait_compaction`).

Nothing runs on the event loop's thread but the awaiting: every method's store work (and the
items' conversion) runs on the store's worker thread (SPEC §17.6, `ledgerfold._worker`), so
calls of one store complete in call order, and a cancelled call lands whole or not at all.
The session works over any `Store` (`ledgerfold.Store`), through its public methods.

`recall_tool()` gives the agent `recall_history` (SPEC §16.2) as an SDK `FunctionTool`
whose calls run `ledgerfold.tools.run_recall` on the same worker thread; once it has been
offered, the summary's framing says that `recall_history` returns the originals (those a
purge has not deleted). A store without `search` (a v1.1 `Store`, SPEC §17.9) offers no
recall: `recall_tool()` raises.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from ledgerfold import _validate
from ledgerfold._compactor import Compactor
from ledgerfold._context import AssembledContext, SummaryItem, with_purge
from ledgerfold._errors import InvalidInput
from ledgerfold._events import EventHook
from ledgerfold._outcome import CompactionOutcome
from ledgerfold._policy import CompactionPolicy
from ledgerfold._worker import pause, running_on, worker_for
from ledgerfold.adapters._chat import context_messages
from ledgerfold.adapters._summary_contents import SummaryContents
from ledgerfold.integrations._agents_append import item_turns
from ledgerfold.integrations._agents_items import (
    ITEM_KEY,
    RestoredTurn,
    RestoredTurns,
    item_message,
    restored,
)
from ledgerfold.integrations._agents_served import Linked, popped, sendable
from ledgerfold.store._protocol import Store
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.summarizers._base import Summarizer
from ledgerfold.tools import RECALL_TOOL, check_recall_store, run_recall

__all__ = ["ITEM_KEY", "LedgerfoldSession", "item_message"]

#: The default policy: compact once the context passes 8000 (approximate) tokens.
DEFAULT_POLICY = CompactionPolicy("ledgerfold-agents-1", keep_tail=8, trigger_tokens=8000)


class LedgerfoldSession:
    """A `Session` (`agents.memory.Session` protocol) over a ledgerfold store.

    Constructed like the SDK's `SQLiteSession(session_id, db_path=":memory:")` (then the
    session opens a `SQLiteStore` and `close()` closes it), or over an existing store of any
    kind with `store=` (then `db_path` is ignored and the store is not closed here).
    `policy` defaults to `DEFAULT_POLICY`; `summarizer` to the `Compactor`'s default
    (`ExtractiveSummarizer`). The session ID is the ledger's conversation ID. `on_event`
    receives the compactor's events (`Compactor(..., on_event=)`: compactions and contexts
    served raw) and, from a store the session opens, the store's (`SQLiteStore(...,
    on_event=)`: stale marks, purges, erasures, deletions); a store given with `store=`
    reports through its own hook.

    With agent instructions, pass `RunConfig(call_model_input_filter=
    session.call_model_input_filter)` to `Runner.run`: the summary then joins the
    instructions, so the model gets one system message (SPEC §17.6).
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        *,
        store: Store | None = None,
        policy: CompactionPolicy | None = None,
        summarizer: Summarizer | None = None,
        session_settings: Any = None,
        on_event: EventHook | None = None,
    ) -> None:
        _validate.hook("on_event", on_event)  # before a store is opened
        self.session_id = _validate.identifier("session_id", session_id)
        if store is not None:
            _validate.instance("store", store, Store)
        self.session_settings = _settings(session_settings)
        self._owned = store is None
        # A store the session opens has no other hook: its events (purges, erasures, the
        # deletion of `clear_session`, stale marks) go to `on_event` too.
        opened: SQLiteStore | None = None
        if store is None:
            store = opened = _opened(db_path, on_event)
        self.store: Store = store
        try:
            self.compactor = Compactor(
                self.store,
                policy if policy is not None else DEFAULT_POLICY,
                summarizer,
                on_event=on_event,
            )
        except BaseException:  # bad policy or summarizer: the store it opened is closed
            if opened is not None:
                opened.close()
            raise
        # True once `recall_tool()` has offered the tool: the slot then says so.
        self._recall = False
        # Summary items `get_items` served lately, by their content: how
        # `call_model_input_filter` knows them in the model's input.
        # Kept by a digest of the content, a weak reference to the item and the length of
        # the leading system items' text the message begins with (`_items`): no summary or
        # prompt text is held here, and an item the store dropped (an erasure) is not
        # recognised.
        self._served: OrderedDict[bytes, tuple[weakref.ref[SummaryItem], int]] = OrderedDict()
        # The message content of the summary items served, while each item lives.
        self._contents = SummaryContents()
        # The turns of the context `get_items` served last, restored (`RestoredTurns`).
        self._restored = RestoredTurns()
        # The latest `add_items`' compaction: its outcome, or its deferred job's future.
        self._compaction: CompactionOutcome | Future[CompactionOutcome] | None = None
        # The latest `add_items` call (a token): an earlier one ending later leaves its own
        # outcome out of `_compaction` (a summarizer of one's own is awaited in the call).
        self._latest = object()

    def __repr__(self) -> str:
        return f"LedgerfoldSession(session_id={self.session_id!r}, store={self.store!r})"

    def close(self) -> None:
        """Close the store when this session opened it (after its queued calls)."""
        if self._owned:
            close = getattr(self.store, "close", None)
            if close is not None:
                close()

    def context(self) -> AssembledContext:
        """The ledgerfold context (synchronously, on the calling thread)."""
        return self.compactor.context(self.session_id)

    def recall_tool(self) -> Any:
        """The `recall_history` tool (SPEC §16.2) as an Agents SDK `FunctionTool`, for
        `Agent(tools=[...])`: each call runs `run_recall` over this session's conversation on
        the store's worker thread (never on the event loop's), and its result is the JSON the
        model reads (bad arguments included). From now on the summary's framing says that
        `recall_history` returns the original messages (those a purge has not deleted).
        Raises `InvalidInput` (`field="store"`) when the store cannot search (a v1.1 `Store`).
        The tool is this session's: an agent shared by several sessions needs each run's
        session's tool (`agent.clone(tools=[...])`), or it reads another conversation."""
        check_recall_store(self.store)
        from agents import FunctionTool  # the SDK is this module's caller's dependency

        store, session_id = self.store, self.session_id

        async def invoke(_context: Any, arguments: str) -> str:
            return await worker_for(store).run(run_recall, store, session_id, arguments)

        function = RECALL_TOOL["function"]
        self._recall = True
        return FunctionTool(
            name=function["name"],
            description=function["description"],
            params_json_schema=json.loads(json.dumps(function["parameters"])),
            on_invoke_tool=invoke,
            # `limit` is optional: a strict schema would make the model always send it.
            strict_json_schema=False,
        )

    # -- the Session protocol: store work on the store's worker thread --------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The context as items: the summary (one `system` item) and the uncovered turns'
        items as they came (system or developer items leading the context, such as the
        system prompt of an agent without instructions, are the summary's item, of the first
        one's role: their text, a blank line, then the summary's, so the model gets one
        system message); with `limit` (default:
        `session_settings`' limit, as the SDK's sessions have it), the latest `limit` of
        them (0: none; negative: all, as the SDK's `SQLiteSession` gives them)."""
        if limit is None:
            limit = _settings_limit(self.session_settings)
        elif not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidInput(
                f"limit: must be int or None, got {type(limit).__name__}",
                field="limit",
                problem="wrong-type",
            )
        return await worker_for(self.store).run(self._items, limit)

    async def add_items(self, items: list[Any]) -> None:
        """Append the items as turns (one revision) and check whether a compaction is due, in
        one job of the store's worker. A due compaction with the built-in summarizer is not
        waited for: it runs as the store's next job, once the callers of this call's batch
        have heard back, so any call made after this one returns (`get_items`, the next
        `add_items`) sees its summary; `wait_compaction()` waits for it and gives its
        outcome. A summarizer of your own (a model) is awaited here, its store work on the
        worker."""
        self._compaction = None  # this call's, once its append has run (none: no items)
        self._latest = call = object()
        if not isinstance(items, (list, tuple)):
            raise InvalidInput(
                f"items: must be a list of items, got {type(items).__name__}",
                field="items",
                problem="wrong-type",
            )
        if not items:
            return

        def landed(check: Future[Any]) -> None:  # cancelled: what its check came to, later
            if self._latest is call:
                self._compaction = check

        outcome, _ = await self.compactor._acompact(
            self.session_id, False, lambda: self._append(items), defer=True, landed=landed
        )
        if self._latest is call:
            self._compaction = outcome

    async def wait_compaction(self) -> CompactionOutcome | None:
        """The outcome of the compaction check the latest `add_items` made, once that
        compaction has ended: `accepted`, `failed` or `skipped` (nothing due). None before
        any `add_items` (or when the latest one added nothing or raised; one cancelled once
        its items were stored gives the outcome of its check), and after `clear_session`
        (which erases its summary). Its events have
        been sent when it returns. Raises what an unexpected error (a closed store) raised in
        the deferred compaction. Cancelling the wait leaves the compaction to run. Awaited in
        an event hook on the store's worker, before that compaction has run, it raises
        `InvalidInput`: the compaction cannot start before the hook returns."""
        outcome = self._compaction
        if (
            isinstance(outcome, Future)
            and not outcome.done()
            and running_on(worker_for(self.store))
        ):
            raise InvalidInput(
                "wait_compaction: awaited on the store's worker (an event hook): the compaction"
                " it waits for runs after the hook returns",
                field="wait_compaction",
                problem="not-allowed",
            )
        while isinstance(outcome, Future):  # a cancelled call's check gives one more
            # Shielded: a cancelled wrapper would cancel the compaction's job if not started.
            outcome = await asyncio.shield(asyncio.wrap_future(outcome))
        return outcome

    async def pop_item(self, *, erase: bool = False) -> Any | None:
        """Retract the turn of the item `get_items()` serves last and return that item (None
        when it serves none, or when it is the summary and the turns it covers were purged),
        so `get_items(limit=n)` is what the next `n` pops give, as the SDK's rewind expects;
        the turns after it that `get_items` leaves out (a reasoning item a run stopped after)
        go with it. Reads the context, not the ledger. The ledger keeps a retracted turn's
        text; `erase=True` erases it, as the SDK's own sessions delete the item."""
        _validate.flag("erase", erase)
        return await worker_for(self.store).run(self._pop, erase)

    async def clear_session(self) -> None:
        """Erase the session, in one transaction (`Store.delete_conversation`): as the SDK's
        own sessions delete their items, the ledger keeps none of them either (turns, their
        earlier versions, summaries sealed or not). `get_items()` is then empty."""
        await worker_for(self.store).run(self.store.delete_conversation, self.session_id)
        self._compaction = None  # its summary (text) was erased with the rest
        self._served.clear()
        self._restored.clear()
        self._contents.clear()

    # -- one summary system message --------------------------------------------------------

    def call_model_input_filter(self, data: Any) -> Any:
        """A `RunConfig.call_model_input_filter`: when the agent has instructions, the
        summary item this session served leaves the input and joins the instructions
        (`to_chat_messages(..., system_prompt=instructions)`): one system message, whose
        framing says `recall_history` returns the originals only when the agent called has
        that tool (a handoff's agent may not). Before
        any summary, system items leading the input (the session's system prompt item) join
        them the same way. Touches no store. `data` is the SDK's `CallModelData` (else
        `InvalidInput` naming `data`)."""
        model_data: Any = getattr(data, "model_data", None)
        if not (hasattr(model_data, "input") and hasattr(model_data, "instructions")):
            raise InvalidInput(
                "data: must be the Agents SDK's CallModelData (what RunConfig's"
                f" call_model_input_filter is given), got {type(data).__name__}",
                field="data",
                problem="wrong-type",
            )
        instructions = model_data.instructions
        if instructions is None:
            return model_data
        kept: list[Any] = []
        served: str | None = None
        summary: SummaryItem | None = None
        lead = 0
        for item in model_data.input:
            content = item.get("content") if isinstance(item, Mapping) else None
            if served is None and isinstance(content, str) and item.get("role") in _SYSTEM_ROLES:
                known = self._served.get(_digest(content))
                if known is not None:
                    served, summary, lead = content, known[0](), known[1]
                    continue
            kept.append(item)
        if served is None:
            # No summary served (none yet): system items leading the input (a prompt kept
            # as the session's system item) still join the instructions, as they do with a
            # summary, so the model gets one system message before the first compaction too.
            lead = _leading_system_count(kept)
            if not lead:
                return model_data
            texts = [instructions] if instructions else []
            texts.append(_leading_system_text(kept[:lead]) or "")
            return type(model_data)(input=kept[lead:], instructions="\n\n".join(texts))
        if summary is None:  # the store has dropped the item since: joined as it was served
            parts = [instructions] if instructions else []
            return type(model_data)(input=kept, instructions="\n\n".join([*parts, served]))
        # The system items the summary's message began with follow the instructions.
        prompt = "\n\n".join(part for part in (instructions, served[:lead]) if part)
        (joined,) = context_messages(
            AssembledContext((summary,), None),
            system_prompt=prompt,
            recall=self._recall and _offers_recall(getattr(data, "agent", None)),
            content=self._contents.content,
        )
        return type(model_data)(input=kept, instructions=joined["content"])

    # -- the jobs -------------------------------------------------------------------------

    def _items(self, limit: int | None) -> list[Any]:
        context = self.compactor.context(self.session_id)
        made: list[Any] = []  # the items, and per item the call it makes and answers
        links: list[tuple[str | None, str | None]] = []
        plain = True  # no turn has a call, a result or a reasoning item (`RestoredTurn.plain`)
        memo = self._restored
        shown: dict[str, RestoredTurn] = {}
        for item in context.items:
            if isinstance(item, SummaryItem):
                # The summary's framed, escaped message; a turn comes back as its own item,
                # but for system items leading the context, which lead this message instead:
                # a second leading system message is refused by some providers.
                item = with_purge(item, context.history_boundary)  # the store's, for most
                content = self._framed(item)
                lead = _leading_system_text(made)
                # The leading items' role (`developer` when the first is one) is the message's.
                role = made[0]["role"] if lead is not None else "system"
                if lead is not None:
                    made.clear()
                    links.clear()
                    content = f"{lead}\n\n{content}"
                made.append({"role": role, "content": content})
                links.append((None, None))
                self._remember(content, item, 0 if lead is None else len(lead))
                continue
            turn = shown[item.id] = memo.get(item)
            # Fresh objects each call (a caller may change them): flat ones are copied.
            made += map(dict, turn.templates) if turn.flat else turn.decoded()
            links += turn.links
            plain = plain and turn.plain
        memo.keep_only(shown)
        # A result whose call is not sent is left out, and one after other items (a user
        # interjecting) goes with its call (SPEC §17.2); with none of those, nor a reasoning
        # item, every item is served as it is.
        served = made if plain else sendable(_linked(made, links))
        if limit is not None and limit >= 0:  # a negative limit is none (SQLite's LIMIT -1)
            served = served[-limit:] if limit > 0 else []
        return served

    def _framed(self, item: SummaryItem) -> str:
        """The summary's message content, made again only for another summary item (or
        once `recall_tool()` has changed the framing): the context read serves the same
        (immutable) item object while nothing changed."""
        pause()  # on the store's worker: its escape, the first time, scans the whole text
        return self._contents.content(item, self._recall)

    def _remember(self, content: str, item: SummaryItem, lead: int) -> None:
        key = _digest(content)
        served = self._served.get(key)
        if served is None or served[0]() is not item:
            self._served[key] = (weakref.ref(item), lead)
        self._served.move_to_end(key)
        while len(self._served) > _SERVED_KEPT:
            self._served.popitem(last=False)

    def _append(self, items: list[Any]) -> int:
        version = self.compactor.policy.version
        turns = item_turns(self.store, self.session_id, version, items)
        return len(self.store.append_many(self.session_id, turns)) if turns else 0

    def _pop(self, erase: bool) -> Any | None:
        """The item `get_items` serves last (`_agents_served.popped`), read before its turn is
        retracted (or erased): a turn that cannot be read is not retracted either."""
        # The store's read: no model is served this context, so no `context.fallback` event.
        items = self.store.context(self.session_id, self.compactor.policy.version).items
        taken = popped(items, self._restored)
        if taken is None:
            return None
        at, item, left_out = taken
        last = items[at]
        if isinstance(last, SummaryItem):  # every turn after the summary's slot popped
            # The newest turn the summary covers (its last source, read alone), if live; a
            # prompt served before the summary is not the newest; purged: nothing to pop.
            found = self.store.get_turns(self.session_id, last.source_ids[-1:])
            if not found:
                return None
            newest = found[0]
            item = restored(newest.role, newest.body, newest.meta)[-1]
            turn_id = newest.id
        else:
            turn_id = last.id
        for gone in reversed(left_out):  # newest first: none of them is served
            self.store.retract(self.session_id, items[gone].id, erase=erase)
        self.store.retract(self.session_id, turn_id, erase=erase)
        return item


#: How many served summary items `call_model_input_filter` recognises (concurrent runs).
_SERVED_KEPT = 4


def _opened(db_path: str | os.PathLike[str], on_event: EventHook | None) -> SQLiteStore:
    """The session's own store at `db_path`, reporting to `on_event` (bad input: `db_path`)."""
    try:
        return SQLiteStore(db_path, on_event=on_event)
    except InvalidInput as error:
        if error.field != "path":
            raise
        message = "db_path" + str(error)[len("path") :]
        raise InvalidInput(message, field="db_path", problem=error.problem) from None


def _settings(session_settings: Any) -> Any:
    """`session_settings` as the SDK's sessions keep it: the SDK's `SessionSettings`, from a
    mapping too (`Runner.run` reads `session.session_settings.limit` and `.resolve`)."""
    if session_settings is None:
        return None
    try:
        from agents.memory.session_settings import coerce_session_settings
    except ImportError:  # an SDK from before session settings: kept as given
        return session_settings
    try:
        if isinstance(session_settings, Mapping):
            session_settings = dict(session_settings)
        return coerce_session_settings(session_settings)
    except (TypeError, ValueError):  # pydantic's ValidationError is a ValueError
        raise InvalidInput(
            "session_settings: not valid SessionSettings",
            field="session_settings",
            problem="wrong-type",
        ) from None


def _settings_limit(session_settings: Any) -> int | None:
    """The `limit` of the SDK's `SessionSettings` (or of a mapping of it), if any."""
    if isinstance(session_settings, Mapping):
        limit = session_settings.get("limit")
    else:
        limit = getattr(session_settings, "limit", None)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


#: The roles of the instructions' messages: a `developer` one is a system one to the model.
_SYSTEM_ROLES = ("system", "developer")


def _leading_system_count(items: list[Any]) -> int:
    """How many of `items` lead them as plain `system` or `developer` messages (str content)."""
    count = 0
    for item in items:
        if _leading_system_text([item]) is None:
            break
        count += 1
    return count


def _linked(made: list[Any], links: list[tuple[str | None, str | None]]) -> list[Linked]:
    """The items with their links, as `sendable` takes them."""
    return [(item, call, output) for item, (call, output) in zip(made, links, strict=True)]


def _leading_system_text(items: list[Any]) -> str | None:
    """The text of `items` when every one is a plain `system` or `developer` message (str
    content, or text parts only: joined as the ledger joins them), joined by blank lines;
    else None (nothing, or other items: the summary then follows them)."""
    if not items:
        return None
    texts: list[str] = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("role") not in _SYSTEM_ROLES:
            return None
        text = _plain_text(item.get("content"))
        if text is None or item.get("type", "message") != "message":
            return None
        texts.append(text)
    return "\n\n".join(texts)


def _plain_text(content: Any) -> str | None:
    """A message's content as text: a str, or a list of text parts (`input_text`, `text`)
    joined without separators; None when it holds anything else (an image, a file)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") not in ("input_text", "text"):
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def _digest(content: str) -> bytes:
    """What `_served` knows a served summary message by: not its text."""
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _offers_recall(agent: Any) -> bool:
    """Whether the agent a model call is for has the `recall_history` tool (True when the
    SDK did not say which agent: the session's own setting then decides)."""
    tools = getattr(agent, "tools", None)
    if not isinstance(tools, list):
        return True
    return any(getattr(tool, "name", None) == RECALL_TOOL["function"]["name"] for tool in tools)
