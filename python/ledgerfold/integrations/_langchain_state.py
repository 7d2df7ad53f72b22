"""What `LedgerfoldMiddleware` knows of a LangChain state's messages (SPEC §17.6), so that a
model call's work follows its new messages: each conversation's `Known` record, the
signature a message was seen with, and whether the state's own message object still says
what the ledger holds (`as_in_state`), so that it, not the ledger's rendering, goes to the
model."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgerfold._context import TurnItem
from ledgerfold._errors import InvalidInput
from ledgerfold.adapters._chat import ChatTurnSpec, chat_turn_specs, tool_group
from ledgerfold.adapters._chat_parts import strict_json
from ledgerfold.adapters._langchain import chat_messages, ledger_call_ids, unnamed_results
from ledgerfold.store._protocol import Store

__all__ = [
    "KNOWN_CONVERSATIONS",
    "Known",
    "agreeing",
    "as_in_state",
    "group_in_state",
    "notice_edits",
    "same",
    "signature",
    "spec_matches",
    "state_messages",
    "unnamed_answers",
]

_log = logging.getLogger("ledgerfold.integrations.langchain")  # the middleware's


def unnamed_answers(state: Sequence[Any], messages: list[Any]) -> dict[str, str]:
    """Message ID -> call ID for each of `messages` (all in `state`) that is a
    `tool_call_id=""` result of a call without ID (`unnamed_results` over the state, where
    its call may lie before `messages`); empty, without reading the state, when none is."""
    if not any(
        getattr(message, "type", None) == "tool" and getattr(message, "tool_call_id", None) == ""
        for message in messages
    ):
        return {}
    wanted = {message.id for message in messages}
    return {
        state[at].id: call_id
        for at, call_id in unnamed_results(state).items()
        if state[at].id in wanted
    }


def signature(message: Any) -> tuple[Any, Any]:
    calls = message.tool_calls or None if message.type == "ai" else None
    return (message.content, calls)


def _digest(message: Any) -> bytes | None:
    """A digest of what `message` says (its `signature`: content and tool calls), kept for a
    change logged instead of the message's own content list and calls, which the caller may
    change in place afterwards; None when they cannot be written out (never equal)."""
    said = signature(message)
    try:
        text = json.dumps(said, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):  # keys not all str, a cycle, too deep
        try:
            text = repr(said)
        except RecursionError:
            return None
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def same(seen: tuple[Any, Any], message: Any) -> bool:
    content = message.content
    if content is not seen[0] and content != seen[0]:
        return False
    calls = seen[1]
    if message.type != "ai":  # only AI messages call tools (asking others is slow: pydantic)
        return calls is None
    now = message.tool_calls or None
    return now is calls or now == calls


def spec_matches(spec: ChatTurnSpec, turn: Any) -> bool:
    held = turn.meta or {}
    # A turn written before the ledger kept a message's image and file parts, a failed
    # call's status, a reply's citations or reasoning: the same message, whose extras it did
    # not keep then, has not changed.
    meta = {key: value for key, value in spec.meta.items() if key in held or key not in _LATER}
    if (spec.role, spec.body) != (turn.role, turn.body) or meta.keys() != held.keys():
        return False
    # A JSON value says the same in other spacing or key order (a turn edited by hand,
    # `store.edit`, with its calls' arguments written `{"code":"R9"}`, where LangChain's
    # converter writes `{"code": "R9"}`): its parsed form is compared.
    return all(
        value == held[key] or _same_json(key, value, held[key]) for key, value in meta.items()
    )


#: The meta keys `chat_turn_specs` writes as JSON text.
_JSON_KEYS = frozenset(
    {"tool_calls", "content_parts", "omitted_content_parts", "annotations", "artifact"}
)


def _same_json(key: str, value: str, held: str) -> bool:
    """Whether two values of meta key `key` are the same JSON (never for a key that is not
    JSON, nor when either is not JSON)."""
    if key not in _JSON_KEYS:
        return False
    canonical = _canonical(key, value)
    return canonical is not None and canonical == _canonical(key, held)


def _canonical(key: str, text: str) -> str | None:
    """JSON text in one form (compact, keys sorted), for `tool_calls` each call's
    `function.arguments` text too (its spacing is not what a call says); None when it is
    not JSON."""
    try:
        value = strict_json(text)
        if key == "tool_calls" and isinstance(value, list):
            value = [_with_canonical_arguments(call) for call in value]
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


def _with_canonical_arguments(call: Any) -> Any:
    """A stored call with its arguments as `["json", <value>]` (JSON text parsed, or JSON
    itself, as a ledger written by `append_many` may hold them) or `["text", <raw text>]`
    (an unparsable call's)."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or "arguments" not in function:
        return call
    arguments = function["arguments"]
    said: list[Any] = ["json", arguments]
    if isinstance(arguments, str):
        try:
            said = ["json", strict_json(arguments)]
        except (ValueError, RecursionError):
            said = ["text", arguments]
    return {**call, "function": {**function, "arguments": said}}


def agreeing(
    store: Store, conversation_id: str, messages: list[Any], answers: dict[str, str]
) -> dict[str, bool | None]:
    """Whether each message (by ID) says what its live turn says (`spec_matches`); None
    when there is nothing to compare: no live turn (retracted, purged), or a message a write
    refuses now (NaN in its arguments, stored before they were refused). `answers`: the
    unnamed call each `""` result answers (`unnamed_answers`)."""
    stored = {turn.id: turn for turn in store.get_turns(conversation_id, [m.id for m in messages])}
    agree: dict[str, bool | None] = {}
    for message in messages:
        turn = stored.get(message.id)
        if turn is None:
            agree[message.id] = None
            continue
        # One by one: the state may hold call IDs used twice, which a batch refuses.
        results = {0: answers[message.id]} if message.id in answers else {}
        try:
            spec = chat_turn_specs(chat_messages([message], results=results))[0]
        except InvalidInput:
            agree[message.id] = None
            continue
        agree[message.id] = spec_matches(spec, turn)
    return agree


#: The meta keys `chat_turn_specs` writes that a ledger of an earlier version lacks.
_LATER = frozenset({"content_parts", "status", "annotations", "reasoning_content", "artifact"})


def group_in_state(state: Sequence[Any], call_id: str) -> str | None:
    """The group of a call made by a state message never seen here (rare: a result whose
    call left the state's seen part); None when no message makes it."""
    for message in reversed(state):  # the newest call of the ID (SPEC §17.2's pairing)
        call_ids = ledger_call_ids(message)
        if call_id in call_ids:
            return tool_group(call_ids)
    return None


#: How many conversations' `Known` a middleware keeps (the least recently used goes; what
#: it knew is read from the ledger again when its thread comes back).
KNOWN_CONVERSATIONS = 1024


#: How many changes of one message a middleware remembers as logged (the oldest goes).
LOGGED_CHANGES = 8


@dataclass(slots=True)
class Known:
    """What a middleware knows of one conversation, so a call's work follows its new
    messages: message ID -> (content, tool calls) as the ledger has it (or as first seen,
    for a message written before this instance), the state's message object for it, those
    logged as changed in the state (ID -> a `_digest` of what each said when logged, the
    latest last: another change is logged too; a digest, not the message's content list,
    which its caller may change in place), the group of each call, and the last call's
    state."""

    seen: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    objects: dict[str, Any] = field(default_factory=dict)
    changed: dict[str, list[bytes | None]] = field(default_factory=dict)
    group_of_call: dict[str, str] = field(default_factory=dict)
    prefix: list[Any] = field(default_factory=list)
    #: The state's message last seen for each one logged as changed, and the ledger's
    #: (role, text, meta) of its turn last compared with it (`notice_edits`).
    latest: dict[str, Any] = field(default_factory=dict)
    compared: dict[str, Any] = field(default_factory=dict)

    def settle(self, message: Any) -> None:
        """`message` says what its turn says: the state's message is the record's."""
        self.seen[message.id] = signature(message)
        self.objects[message.id] = message
        for logged in (self.changed, self.latest, self.compared):
            logged.pop(message.id, None)

    def logged(self, message: Any) -> bool:
        """Whether `message` says what it said when logged as changed (any of its logged
        changes: one flipping between two is logged twice, not on every flip)."""
        logged = self.changed.get(message.id)
        if not logged:
            return False
        said = _digest(message)
        return said is not None and said in logged

    def log_changed(self, conversation_id: str, message: Any) -> None:
        """Log `message` as changed in the state, ignored (SPEC §17.6), by ID; once per
        change: not again while it says what it said when logged."""
        self.latest[message.id] = message
        said = _digest(message)
        logged = self.changed.setdefault(message.id, [])
        if said is not None and said in logged:
            return
        logged.append(said)
        del logged[:-LOGGED_CHANGES]
        _log.warning(
            "state message changed, ignored (the ledger is the record) conversation_id=%s "
            "message_id=%s",
            conversation_id,
            message.id,
        )


def notice_edits(known: Known, items: Sequence[Any]) -> None:
    """Settle each message logged as changed whose turn was edited since to say what the
    state's message says (`Store.edit` after the rewrite was logged), seen in the context
    items just read (`TurnItem`s): no read of the turns, and each turn is compared once per
    change of its text or meta."""
    if not known.latest:
        return
    for item in items:
        message = known.latest.get(item.id) if isinstance(item, TurnItem) else None
        if message is None or known.compared.get(item.id) == (item.role, item.text, item.meta):
            continue
        known.compared[item.id] = (item.role, item.text, item.meta)
        if message.type == "tool" and message.tool_call_id == "":
            continue  # the call it answers is the state's to say: left to `agreeing`
        try:
            spec = chat_turn_specs(chat_messages([message]))[0]
        except InvalidInput:
            continue
        if spec_matches(spec, _Held(item.role, item.text, item.meta)):
            known.settle(message)


@dataclass(frozen=True, slots=True)
class _Held:
    """A context item as the turn `spec_matches` compares."""

    role: str
    body: str
    meta: Any


def as_in_state(message: Any, turn_id: str, known: Known) -> Any:
    """The state's own message for the ledger's rendering of turn `turn_id`, when the state
    still says what the ledger does (same text; for an AI message the same calls, names and
    arguments; for a tool message the same call answered) and was never seen changed; else
    the ledger's. A call the state gives no ID goes with the ID the ledger gave it: the
    state's message is then copied with that ID (a provider takes no call without one,
    nor a result answering `""`). A message that is not the model's and carries a tool part
    (an Anthropic `tool_result` block) was stored as more than one turn: the ledger's
    rendering goes."""
    original = known.objects.get(turn_id)
    if original is None or turn_id in known.changed or original.type != message.type:
        return message
    if _text_of(original.content) != _text_of(message.content):
        return message
    if message.type == "ai":
        ids = ledger_call_ids(original)
        if _calls_of(original, ids) != _calls_of(message) or ids != ledger_call_ids(message):
            return message
        calls = [*original.tool_calls, *original.invalid_tool_calls]
        if all(call.get("id") == call_id for call, call_id in zip(calls, ids, strict=True)):
            return original
        if _has_tool_part(original.content):  # its blocks name the calls too: the ledger's
            return message
        parsed = len(original.tool_calls)
        return original.model_copy(
            update={
                "tool_calls": _with_ids(original.tool_calls, ids[:parsed]),
                "invalid_tool_calls": _with_ids(original.invalid_tool_calls, ids[parsed:]),
            }
        )
    if _has_tool_part(original.content):
        return message
    if message.type == "tool" and original.tool_call_id != message.tool_call_id:
        if original.tool_call_id == "":  # the result of a call without ID (`ToolNode`'s)
            return original.model_copy(update={"tool_call_id": message.tool_call_id})
        return message
    return original


def _has_tool_part(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(part, dict) and "tool" in str(part.get("type", "")) for part in content
    )


def _with_ids(calls: list[Any], ids: Sequence[str]) -> list[Any]:
    return [{**call, "id": call_id} for call, call_id in zip(calls, ids, strict=True)]


def _calls_of(message: Any, ids: Sequence[str] | None = None) -> list[tuple[Any, Any, Any]]:
    """(ID, name, arguments) of a message's parsed calls; `ids`: the IDs to use instead."""
    calls = message.tool_calls
    if ids is None:
        ids = [call.get("id") for call in calls]
    return [
        (call_id, call.get("name"), call.get("args"))
        for call, call_id in zip(calls, ids, strict=False)
    ]


def _text_of(content: Any) -> Any:
    """A message content's text, as the ledger keeps it (text parts joined)."""
    if not isinstance(content, list):
        return content
    return "".join(
        part if isinstance(part, str) else str(part.get("text", ""))
        for part in content
        if isinstance(part, str) or (isinstance(part, dict) and part.get("type") == "text")
    )


def state_messages(state: Any) -> Any:
    """The messages of a LangGraph state (a dict, or an object with `messages`)."""
    messages = (
        state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    )
    if messages is None:
        raise InvalidInput(
            f"state: must be a LangGraph state with messages, got {type(state).__name__}",
            field="state",
            problem="wrong-type",
        )
    return messages
