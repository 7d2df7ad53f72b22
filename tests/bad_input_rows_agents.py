"""Rows of the bad-input table (`bad_input_table.py`): the items the Agents SDK session's
`add_items` refuses by their content parts and by the link of a call or a call's output
(`bad_input_rows_integrations.py` has the session's other rows)."""

from __future__ import annotations

import asyncio

import ledgerfold as lf
from bad_input_support import INVALID, SECRET_BODY, BadInput, on_store, row


def _add_items(store: lf.SQLiteStore, items: object) -> object:
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    return asyncio.run(LedgerfoldSession("c", store=store).add_items(items))  # type: ignore[arg-type]


ROWS: tuple[BadInput, ...] = (
    row(
        "LedgerfoldSession.add_items: an input_audio part without its format",
        "await session.add_items([{'role': 'user', 'content': [{'type': 'input_audio',"
        " 'input_audio': {'data': body}}]}])",
        on_store(
            lambda store: _add_items(
                store,
                [
                    {
                        "role": "user",
                        "content": [{"type": "input_audio", "input_audio": {"data": SECRET_BODY}}],
                    }
                ],
            )
        ),
        INVALID,
        "items[0].content[0].input_audio.format",
    ),
    row(
        "LedgerfoldSession.add_items: a local_shell_call_output without call_id (or id)",
        "await session.add_items([{'type': 'local_shell_call_output', 'output': body}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "local_shell_call_output", "output": SECRET_BODY}]
            )
        ),
        INVALID,
        "items[0].call_id",
    ),
    row(
        "LedgerfoldSession.add_items: a tool_search_call whose call_id is not a str",
        "await session.add_items([{'type': 'tool_search_call', 'call_id': 7, 'arguments': body}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "tool_search_call", "call_id": 7, "arguments": SECRET_BODY}]
            )
        ),
        INVALID,
        "items[0].call_id",
    ),
    row(
        "LedgerfoldSession.add_items: an mcp_approval_request without id",
        "await session.add_items([{'type': 'mcp_approval_request', 'name': 'f', 'arguments':"
        " body, 'server_label': 's'}])",
        on_store(
            lambda store: _add_items(
                store,
                [
                    {
                        "type": "mcp_approval_request",
                        "name": "f",
                        "arguments": SECRET_BODY,
                        "server_label": "s",
                    }
                ],
            )
        ),
        INVALID,
        "items[0].id",
    ),
    row(
        "LedgerfoldSession.add_items: an mcp_approval_response without approval_request_id",
        "await session.add_items([{'type': 'mcp_approval_response', 'approve': True}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "mcp_approval_response", "approve": True, "reason": SECRET_BODY}]
            )
        ),
        INVALID,
        "items[0].approval_request_id",
    ),
    row(
        "LedgerfoldSession.add_items: an unknown *_call item whose call_id is not a str",
        "await session.add_items([{'type': 'widget_call', 'call_id': 7, 'input': body}])",
        on_store(
            lambda store: _add_items(
                store, [{"type": "widget_call", "call_id": 7, "input": SECRET_BODY}]
            )
        ),
        INVALID,
        "items[0].call_id",
    ),
)
