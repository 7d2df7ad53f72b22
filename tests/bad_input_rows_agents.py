"""Rows of the bad-input table (`bad_input_table.py`): the items the Agents SDK session's
`add_items` refuses by their content parts (`bad_input_rows_integrations.py` has the
session's other rows)."""

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
)
