"""Rows of the bad-input table (`bad_input_table.py`): a tool call's own fields, given to the
chat adapter or as an Agents SDK item (named as the item's field), and the integrations'
framework hooks called with what the framework does not pass (`HOOK_ROWS`)."""

from __future__ import annotations

import asyncio
from typing import Any

import ledgerfold as lf
from bad_input_support import INVALID, SECRET_BODY, BadInput, on_store, row


def _call(function: Any) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": function}],
        }
    ]


def _add_items(store: lf.SQLiteStore, items: object) -> object:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return asyncio.run(LedgerfoldSession("c", store=store).add_items(items))  # type: ignore[arg-type]


ROWS: tuple[BadInput, ...] = (
    row(
        "append_chat_messages: a tool call's function name not a str",
        "store.append_chat_messages('c', [{'role': 'assistant', 'content': None, 'tool_calls':"
        " [{'id': 'c', 'type': 'function', 'function': {'name': 5, 'arguments': body}}]}])",
        on_store(
            lambda store: store.append_chat_messages(
                "c", _call({"name": 5, "arguments": SECRET_BODY})
            )
        ),
        INVALID,
        "messages[0].tool_calls[0].function.name",
    ),
    row(
        "from_chat_messages: a tool call's function not a mapping",
        "from_chat_messages([{'role': 'assistant', 'content': None, 'tool_calls': [{'id': 'c',"
        " 'type': 'function', 'function': body}]}])",
        lambda: lf.from_chat_messages(_call(SECRET_BODY)),
        INVALID,
        "messages[0].tool_calls[0].function",
    ),
    row(
        "LedgerfoldSession.add_items: a call's name not a str",
        "await session.add_items([{'type': 'function_call', 'call_id': 'c', 'name': 5,"
        " 'arguments': body}])",
        on_store(
            lambda store: _add_items(
                store,
                [{"type": "function_call", "call_id": "c", "name": 5, "arguments": SECRET_BODY}],
            )
        ),
        INVALID,
        "items[0].name",
    ),
    row(
        "LedgerfoldSession.add_items: a call's arguments neither JSON text nor a mapping",
        "await session.add_items([{'type': 'function_call', 'call_id': 'c', 'name': 'f',"
        " 'arguments': 5}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "function_call", "call_id": "c", "name": "f", "arguments": 5}]
            )
        ),
        INVALID,
        "items[0].arguments",
    ),
    row(
        "append_chat_messages: lone surrogate in an image part (kept as meta)",
        "store.append_chat_messages('c', [{'role': 'user', 'content': [{'type': 'image_url',"
        " 'image_url': {'url': body + '\\ud800'}}]}])",
        on_store(
            lambda store: store.append_chat_messages(
                "c",
                [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": SECRET_BODY + "\ud800"}}
                        ],
                    }
                ],
            )
        ),
        INVALID,
        "messages[0].content[0].image_url.url",
    ),
    row(
        "from_chat_messages: an assistant's reasoning_content not a str",
        "from_chat_messages([{'role': 'assistant', 'content': body, 'reasoning_content': 5}])",
        lambda: lf.from_chat_messages(
            [{"role": "assistant", "content": SECRET_BODY, "reasoning_content": 5}]
        ),
        INVALID,
        "messages[0].reasoning_content",
    ),
    row(
        "from_chat_messages: a tool message's artifact not JSON",
        "from_chat_messages([..., {'role': 'tool', 'tool_call_id': 'c', 'content': body,"
        " 'artifact': object()}])",
        lambda: lf.from_chat_messages(
            [
                _call({"name": "f", "arguments": "{}"})[0],
                {"role": "tool", "tool_call_id": "c", "content": SECRET_BODY, "artifact": object()},
            ]
        ),
        INVALID,
        "messages[1].artifact",
    ),
)


def _input_filter(data: object) -> object:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return LedgerfoldSession("c").call_model_input_filter(data)


def _wrap_model_call(store: lf.SQLiteStore, request: object) -> object:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store, "c").wrap_model_call(request, lambda made: made)


def _awrap_model_call(store: lf.SQLiteStore, request: object) -> object:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    async def handler(made: object) -> object:
        return made

    middleware = LedgerfoldMiddleware(store, "c")
    return asyncio.run(middleware.awrap_model_call(request, handler))


def _model_input_data() -> object:
    from agents.run_config import ModelInputData

    return ModelInputData(input=[{"role": "user", "content": SECRET_BODY}], instructions="x")


HOOK_ROWS: tuple[BadInput, ...] = (
    row(
        "LedgerfoldSession.call_model_input_filter: not the SDK's CallModelData",
        "session.call_model_input_filter(ModelInputData(input=[...], instructions='x'))",
        lambda: _input_filter(_model_input_data()),
        INVALID,
        "data",
    ),
    row(
        "LedgerfoldMiddleware.wrap_model_call: a request that is not a ModelRequest",
        "middleware.wrap_model_call({'messages': [...]}, handler)",
        on_store(lambda store: _wrap_model_call(store, {"messages": [SECRET_BODY]})),
        INVALID,
        "request",
    ),
    row(
        "LedgerfoldMiddleware.awrap_model_call: a request that is not a ModelRequest",
        "await middleware.awrap_model_call(None, handler)",
        on_store(lambda store: _awrap_model_call(store, None)),
        INVALID,
        "request",
    ),
    row(
        "LedgerfoldMiddleware.post_model_hook: a state without messages",
        "middleware.post_model_hook({'msgs': [...]})",
        on_store(lambda store: _middleware(store).post_model_hook({"msgs": [SECRET_BODY]})),
        INVALID,
        "state",
    ),
)


def _middleware(store: lf.SQLiteStore) -> Any:
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    return LedgerfoldMiddleware(store, "c")
