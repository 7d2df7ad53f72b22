"""Rows of the bad-input table (`bad_input_table.py`): the integrations' entry points (SPEC
§17.6) — the Agents SDK session, the LangChain middleware — and the `Compactor`'s async
ones they run on."""

from __future__ import annotations

import asyncio
from typing import Any

import ledgerfold as lf
from bad_input_support import INVALID, POLICY, SECRET_BODY, BadInput, compactor, on_store, row


def _session(store: object, session_id: object = "c", **options: Any) -> Any:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return LedgerfoldSession(session_id, store=store, **options)  # type: ignore[arg-type]


async def _async_hook(event: lf.Event) -> None:
    """An event hook written as a coroutine: called from the store's thread, never awaited."""


def _opened(db_path: object) -> Any:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return LedgerfoldSession("c", db_path)  # type: ignore[arg-type]


def _add_items(store: lf.SQLiteStore, items: object) -> object:
    return asyncio.run(_session(store).add_items(items))


def _get_items(store: lf.SQLiteStore, limit: object) -> object:
    return asyncio.run(_session(store).get_items(limit))


def _append_new(store: lf.SQLiteStore, messages: object) -> object:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store, "c").append_new(messages)  # type: ignore[arg-type]


class _DumpRaises:
    """A message object whose `model_dump` raises, quoting the message (as pydantic may)."""

    def model_dump(self, **_: Any) -> Any:
        raise ValueError(f"cannot serialise {SECRET_BODY}")


class _DumpNotAMapping:
    def model_dump(self, **_: Any) -> Any:
        return [("role", "user"), ("content", SECRET_BODY)]


def _sdk_message() -> Any:
    from openai.types.chat import ChatCompletionMessage

    return ChatCompletionMessage(role="assistant", content=SECRET_BODY)


def _langchain_message() -> Any:
    from langchain_core.messages import HumanMessage

    return HumanMessage(SECRET_BODY)


def _non_finite_call(value: float) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    call = {"name": "f", "args": {"x": value}, "id": "c"}
    return [HumanMessage(SECRET_BODY, id="u"), AIMessage("", id="a", tool_calls=[call])]


def _from_langchain(messages: object) -> object:
    from ledgerfold.adapters import from_langchain_messages

    return from_langchain_messages(messages)  # type: ignore[arg-type]


def _pre_model_hook(store: lf.SQLiteStore, state: object) -> object:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store, "c").pre_model_hook(state)


def _model_call(store: lf.SQLiteStore, *, asynchronous: bool) -> object:
    """A model call of `create_agent` whose state holds a message without an ID."""
    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import HumanMessage

    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    middleware = LedgerfoldMiddleware(store, "c")
    messages: list[Any] = [HumanMessage(SECRET_BODY)]
    model = GenericFakeChatModel(messages=iter(()))
    request = ModelRequest(model=model, messages=messages, state={"messages": messages})
    if not asynchronous:
        return middleware.wrap_model_call(request, lambda prepared: prepared)

    async def handler(prepared: Any) -> Any:
        return prepared

    return asyncio.run(middleware.awrap_model_call(request, handler))


def _item_message(item: Any) -> Any:
    from ledgerfold.integrations.openai_agents import item_message

    return item_message(item)


ROWS: tuple[BadInput, ...] = (
    row(
        "item_message: item not a mapping",
        "item_message('hello')",
        lambda: _item_message("hello"),
        INVALID,
        "item",
    ),
    row(
        "LedgerfoldSession: session_id not a str",
        "LedgerfoldSession(42, store=store)",
        on_store(lambda store: _session(store, 42)),
        INVALID,
        "session_id",
    ),
    row(
        "LedgerfoldSession: blank session_id",
        "LedgerfoldSession(' ', store=store)",
        on_store(lambda store: _session(store, " ")),
        INVALID,
        "session_id",
    ),
    row(
        "LedgerfoldSession: store not a Store",
        "LedgerfoldSession('c', store='agent.db')",
        lambda: _session("agent.db"),
        INVALID,
        "store",
    ),
    row(
        "LedgerfoldSession: db_path not a path",
        "LedgerfoldSession('c', 5)",
        lambda: _opened(5),
        INVALID,
        "db_path",
    ),
    row(
        "LedgerfoldSession: db_path with a NUL character",
        "LedgerfoldSession('c', 'agent\\x00.db')",
        lambda: _opened("agent\x00.db"),
        INVALID,
        "db_path",
    ),
    row(
        "LedgerfoldSession: session_settings the SDK refuses",
        "LedgerfoldSession('c', store=store, session_settings={'limit': 'all'})",
        on_store(lambda store: _session(store, session_settings={"limit": "all"})),
        INVALID,
        "session_settings",
    ),
    row(
        "LedgerfoldSession: session_settings neither SessionSettings nor a mapping",
        "LedgerfoldSession('c', store=store, session_settings=5)",
        on_store(lambda store: _session(store, session_settings=5)),
        INVALID,
        "session_settings",
    ),
    row(
        "LedgerfoldSession: on_event an async function",
        "LedgerfoldSession('c', store=store, on_event=async_hook)",
        on_store(lambda store: _session(store, on_event=_async_hook)),
        INVALID,
        "on_event",
    ),
    row(
        "SQLiteStore: on_event an async function",
        "SQLiteStore(on_event=async_hook)",
        lambda: lf.SQLiteStore(on_event=_async_hook),
        INVALID,
        "on_event",
    ),
    row(
        "LedgerfoldSession.add_items: items not a list",
        "await session.add_items({'role': 'user', 'content': body})",
        on_store(lambda store: _add_items(store, {"role": "user", "content": SECRET_BODY})),
        INVALID,
        "items",
    ),
    row(
        "LedgerfoldSession.add_items: items None",
        "await session.add_items(None)",
        on_store(lambda store: _add_items(store, None)),
        INVALID,
        "items",
    ),
    row(
        "LedgerfoldSession.add_items: an item not a mapping",
        "await session.add_items([body])",
        on_store(lambda store: _add_items(store, [SECRET_BODY])),
        INVALID,
        "items[0]",
    ),
    row(
        "LedgerfoldSession.add_items: an unknown role",
        "await session.add_items([{'role': 'admin', 'content': body}])",
        on_store(lambda store: _add_items(store, [{"role": "admin", "content": SECRET_BODY}])),
        INVALID,
        "items[0].role",
    ),
    row(
        "LedgerfoldSession.add_items: a call without call_id",
        "await session.add_items([{'type': 'function_call', 'name': 'f', 'arguments': '{}'}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "function_call", "name": "f", "arguments": SECRET_BODY}]
            )
        ),
        INVALID,
        "items[0].call_id",
    ),
    row(
        "LedgerfoldSession.add_items: a result without call_id",
        "await session.add_items([{'type': 'function_call_output', 'output': body}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "function_call_output", "output": SECRET_BODY}]
            )
        ),
        INVALID,
        "items[0].call_id",
    ),
    row(
        "LedgerfoldSession.add_items: an item that is not JSON",
        "await session.add_items([{'role': 'user', 'content': body, 'at': object()}])",
        on_store(
            lambda store: _add_items(
                store, [{"role": "user", "content": SECRET_BODY, "at": object()}]
            )
        ),
        INVALID,
        "items[0]",
    ),
    row(
        "LedgerfoldSession.add_items: an item with a key that is not a str",
        "await session.add_items([{'role': 'user', 'content': body, 1: 'x'}])",
        on_store(
            lambda store: _add_items(store, [{"role": "user", "content": SECRET_BODY, 1: "x"}])
        ),
        INVALID,
        "items[0]",
    ),
    row(
        "LedgerfoldSession.add_items: lone surrogate in an item's field",
        "await session.add_items([{'role': 'user', 'content': body, 'id': '\\ud800'}])",
        on_store(
            lambda store: _add_items(
                store, [{"role": "user", "content": SECRET_BODY, "id": "\ud800"}]
            )
        ),
        INVALID,
        "items[0].id",
    ),
    row(
        "LedgerfoldSession.add_items: lone surrogate in a tool output",
        "await session.add_items([{'type': 'function_call_output', 'call_id': 'c',"
        " 'output': body + '\\ud800'}])",
        on_store(
            lambda store: _add_items(
                store,
                [
                    {
                        "type": "function_call_output",
                        "call_id": "c",
                        "output": SECRET_BODY + "\ud800",
                    }
                ],
            )
        ),
        INVALID,
        "items[0].output",
    ),
    row(
        "LedgerfoldSession.add_items: lone surrogate in a message's text part",
        "await session.add_items([{'role': 'user', 'content':"
        " [{'type': 'input_text', 'text': body + '\\ud800'}]}])",
        on_store(
            lambda store: _add_items(
                store,
                [
                    {
                        "role": "user",
                        "content": [{"type": "input_text", "text": SECRET_BODY + "\ud800"}],
                    }
                ],
            )
        ),
        INVALID,
        "items[0].content[0].text",
    ),
    row(
        "LedgerfoldSession.add_items: NaN in an item (not JSON)",
        "await session.add_items([{'role': 'user', 'content': body, 'score': float('nan')}])",
        on_store(
            lambda store: _add_items(
                store, [{"role": "user", "content": SECRET_BODY, "score": float("nan")}]
            )
        ),
        INVALID,
        "items[0].score",
    ),
    row(
        "LedgerfoldSession.add_items: Infinity nested in an item (not JSON)",
        "await session.add_items([{'type': 'function_call_output', 'call_id': 'c',"
        " 'output': [{'type': 'input_text', 'text': body, 'logprob': float('-inf')}]}])",
        on_store(
            lambda store: _add_items(
                store,
                [
                    {
                        "type": "function_call_output",
                        "call_id": "c",
                        "output": [
                            {"type": "input_text", "text": SECRET_BODY, "logprob": -float("inf")}
                        ],
                    }
                ],
            )
        ),
        INVALID,
        "items[0].output[0].logprob",
    ),
    row(
        "LedgerfoldSession.get_items: limit a bool",
        "await session.get_items(True)",
        on_store(lambda store: _get_items(store, True)),
        INVALID,
        "limit",
    ),
    row(
        "LedgerfoldSession.get_items: limit a float",
        "await session.get_items(2.0)",
        on_store(lambda store: _get_items(store, 2.0)),
        INVALID,
        "limit",
    ),
    row(
        "LedgerfoldSession.get_items: limit a str",
        "await session.get_items('2')",
        on_store(lambda store: _get_items(store, "2")),
        INVALID,
        "limit",
    ),
    row(
        "LedgerfoldMiddleware: store not a Store",
        "LedgerfoldMiddleware('agent.db', 'c')",
        lambda: _middleware_on("agent.db"),
        INVALID,
        "store",
    ),
    row(
        "LedgerfoldMiddleware.append_new: messages one str",
        "middleware.append_new(body)",
        on_store(lambda store: _append_new(store, SECRET_BODY)),
        INVALID,
        "messages",
    ),
    row(
        "LedgerfoldMiddleware.append_new: messages None",
        "middleware.append_new(None)",
        on_store(lambda store: _append_new(store, None)),
        INVALID,
        "messages",
    ),
    row(
        "LedgerfoldMiddleware.append_new: NaN in a tool call's args (not JSON)",
        "middleware.append_new([HumanMessage(body, id='u'), AIMessage('', id='a',"
        " tool_calls=[{'name': 'f', 'args': {'x': float('nan')}, 'id': 'c'}])])",
        on_store(lambda store: _append_new(store, _non_finite_call(float("nan")))),
        INVALID,
        "messages[1].tool_calls[0].args.x",
    ),
    row(
        "from_chat_messages: a tool call's arguments a list (not JSON text or a mapping)",
        "from_chat_messages([{'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c',"
        " 'type': 'function', 'function': {'name': 'f', 'arguments': [body]}}]}])",
        lambda: lf.from_chat_messages(
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": [SECRET_BODY]},
                        }
                    ],
                }
            ]
        ),
        INVALID,
        "messages[0].tool_calls[0].function.arguments",
    ),
    row(
        "from_chat_messages: an assistant's audio reply without its id",
        "from_chat_messages([{'role': 'assistant', 'content': None, 'audio': {'transcript':"
        " body}}])",
        lambda: lf.from_chat_messages(
            [{"role": "assistant", "content": None, "audio": {"transcript": SECRET_BODY}}]
        ),
        INVALID,
        "messages[0].audio.id",
    ),
    row(
        "from_chat_messages: the legacy function_call (use tool_calls)",
        "from_chat_messages([{'role': 'assistant', 'content': None, 'function_call': {'name':"
        " 'f', 'arguments': body}}])",
        lambda: lf.from_chat_messages(
            [
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "f", "arguments": SECRET_BODY},
                }
            ]
        ),
        INVALID,
        "messages[0].function_call",
    ),
    row(
        "from_chat_messages: an assistant's refusal not a str",
        "from_chat_messages([{'role': 'assistant', 'content': None, 'refusal': 5}])",
        lambda: lf.from_chat_messages([{"role": "assistant", "content": None, "refusal": 5}]),
        INVALID,
        "messages[0].refusal",
    ),
    row(
        "from_chat_messages: an assistant's annotations not a list",
        "from_chat_messages([{'role': 'assistant', 'content': body, 'annotations': {}}])",
        lambda: lf.from_chat_messages(
            [{"role": "assistant", "content": SECRET_BODY, "annotations": {}}]
        ),
        INVALID,
        "messages[0].annotations",
    ),
    row(
        "from_chat_messages: a message object whose model_dump raises",
        "from_chat_messages([message])  # message.model_dump(mode='json', ...) raises",
        lambda: lf.from_chat_messages([_DumpRaises()]),  # type: ignore[list-item]
        INVALID,
        "messages[0]",
    ),
    row(
        "append_chat_messages: a message object whose model_dump gives no mapping",
        "store.append_chat_messages('c', [message])  # message.model_dump() gives a list",
        on_store(lambda s: s.append_chat_messages("c", [_DumpNotAMapping()])),  # type: ignore[list-item]
        INVALID,
        "messages[0]",
    ),
    row(
        "from_chat_messages: a LangChain message (use from_langchain_messages)",
        "from_chat_messages([HumanMessage(body)])",
        lambda: lf.from_chat_messages([_langchain_message()]),
        INVALID,
        "messages[0]",
    ),
    row(
        "append_chat_messages: a Responses API item (no role, a type)",
        "store.append_chat_messages('c', [{'type': 'function_call_output', 'output': body}])",
        on_store(
            lambda s: s.append_chat_messages(
                "c", [{"type": "function_call_output", "call_id": "c", "output": SECRET_BODY}]
            )
        ),
        INVALID,
        "messages[0].role",
    ),
    row(
        "from_chat_messages: one SDK message, not in a list",
        "from_chat_messages(response.choices[0].message)",
        lambda: lf.from_chat_messages(_sdk_message()),
        INVALID,
        "messages",
    ),
    row(
        "from_langchain_messages: Infinity in a tool call's args (not JSON)",
        "from_langchain_messages([HumanMessage(body, id='u'), AIMessage('', id='a',"
        " tool_calls=[{'name': 'f', 'args': {'x': float('inf')}, 'id': 'c'}])])",
        lambda: _from_langchain(_non_finite_call(float("inf"))),
        INVALID,
        "messages[1].tool_calls[0].args.x",
    ),
    row(
        "LedgerfoldMiddleware.awrap_model_call: a message without id",
        "await middleware.awrap_model_call(ModelRequest(messages=[HumanMessage(body)], ...), h)",
        on_store(lambda store: _model_call(store, asynchronous=True)),
        INVALID,
        "messages[0].id",
    ),
    row(
        "LedgerfoldMiddleware.wrap_model_call: a message without id",
        "middleware.wrap_model_call(ModelRequest(messages=[HumanMessage(body)], ...), h)",
        on_store(lambda store: _model_call(store, asynchronous=False)),
        INVALID,
        "messages[0].id",
    ),
    row(
        "LedgerfoldMiddleware.pre_model_hook: a state without messages",
        "middleware.pre_model_hook({'message': [...]})",
        on_store(lambda store: _pre_model_hook(store, {"message": []})),
        INVALID,
        "state",
    ),
    row(
        "LedgerfoldMiddleware.pre_model_hook: a state that is not one",
        "middleware.pre_model_hook(body)",
        on_store(lambda store: _pre_model_hook(store, SECRET_BODY)),
        INVALID,
        "state",
    ),
    row(
        "Compactor: store not a Store",
        "Compactor('agent.db', policy)",
        lambda: lf.Compactor("agent.db", lf.CompactionPolicy(POLICY)),  # type: ignore[arg-type]
        INVALID,
        "store",
    ),
    row(
        "Compactor: the store class rather than a store",
        "Compactor(SQLiteStore, policy)",
        lambda: lf.Compactor(lf.SQLiteStore, lf.CompactionPolicy(POLICY)),  # type: ignore[arg-type]
        INVALID,
        "store",
    ),
    row(
        "Compactor.acompact: blank conversation_id",
        "await compactor.acompact(' ')",
        on_store(lambda store: asyncio.run(compactor(store).acompact(" "))),
        INVALID,
        "conversation_id",
    ),
    row(
        "Compactor.acompact: force not a bool",
        "await compactor.acompact('c', force='no')",
        on_store(lambda store: asyncio.run(compactor(store).acompact("c", force="no"))),  # type: ignore[arg-type]
        INVALID,
        "force",
    ),
    row(
        "Compactor.compact: force not a bool",
        "compactor.compact('c', force=1)",
        on_store(lambda store: compactor(store).compact("c", force=1)),  # type: ignore[arg-type]
        INVALID,
        "force",
    ),
    row(
        "Compactor.acontext: conversation_id not a str",
        "await compactor.acontext(42)",
        on_store(lambda store: asyncio.run(compactor(store).acontext(42))),  # type: ignore[arg-type]
        INVALID,
        "conversation_id",
    ),
    row(
        "Compactor.acontext: max_tokens a str",
        "await compactor.acontext('c', max_tokens='100')",
        on_store(lambda store: asyncio.run(compactor(store).acontext("c", "100"))),  # type: ignore[arg-type]
        INVALID,
        "max_tokens",
    ),
    row(
        "SQLiteStore.stats: blank conversation_id",
        "store.stats(' ')",
        on_store(lambda store: store.stats(" ")),
        INVALID,
        "conversation_id",
    ),
    row(
        "SQLiteStore.stats: conversation_id a list",
        "store.stats(['c'])",
        on_store(lambda store: store.stats(["c"])),  # type: ignore[arg-type]
        INVALID,
        "conversation_id",
    ),
    row(
        "OpenTelemetryHook: tracer_provider not a provider",
        "OpenTelemetryHook(tracer_provider='otel')",
        lambda: _otel_hook(tracer_provider="otel"),
        INVALID,
        "tracer_provider",
    ),
    row(
        "OpenTelemetryHook: meter_provider not a provider",
        "OpenTelemetryHook(meter_provider=5)",
        lambda: _otel_hook(meter_provider=5),
        INVALID,
        "meter_provider",
    ),
)


def _otel_hook(**providers: object) -> object:
    from ledgerfold.integrations.opentelemetry import OpenTelemetryHook

    return OpenTelemetryHook(**providers)  # type: ignore[arg-type]


def _middleware_on(store: object) -> object:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store, "c")  # type: ignore[arg-type]
