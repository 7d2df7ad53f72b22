"""`LedgerfoldMiddleware` remembers what a state message said when it logged it as changed
(an ignored state rewrite, SPEC §17.6), so it logs each change once. It kept the message's
own content list (and tool calls) for that: a caller changing that list in place afterwards
changed what the middleware remembered, so the message always said "what was logged" and a
further change went unlogged. It now keeps a digest of what was logged. Real SQLite file,
LangChain's own messages."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import ledgerfold as lf
from ledgerfold.integrations.langchain import LedgerfoldMiddleware


def _changed(caplog: pytest.LogCaptureFixture) -> int:
    return sum("state message changed" in r.getMessage() for r in caplog.records)


def _logged_rewrite(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> tuple[Any, ...]:
    """A middleware that logged `rewritten` (turn "h1") as changed in the state, then a state
    whose first message is a new object (a state reloaded): each message is looked at."""
    middleware = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "k.db"), "c", recall=False)
    first = HumanMessage("Hello.", id="h0")
    said = HumanMessage([{"type": "text", "text": "Book seat 12A."}], id="h1")
    middleware.append_new([first, said])
    rewritten = HumanMessage([{"type": "text", "text": "Book seat 14C."}], id="h1")
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    middleware.append_new([first, rewritten])
    assert _changed(caplog) == 1
    return middleware, first, rewritten


def test_a_further_change_made_in_place_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    middleware, first, rewritten = _logged_rewrite(tmp_path, caplog)
    rewritten.content[0]["text"] = "Book seat 99Z."  # the caller's list, changed in place
    middleware.append_new([first.model_copy(), rewritten])
    assert _changed(caplog) == 2
    (turn,) = middleware.store.get_turns("c", ["h1"])
    assert turn.body == "Book seat 12A."  # the ledger is the record


def test_a_logged_call_s_arguments_changed_in_place_are_looked_at_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    middleware = LedgerfoldMiddleware(lf.SQLiteStore(tmp_path / "a.db"), "c", recall=False)
    first = HumanMessage("Look up R1.", id="h0")
    call = {"name": "lookup", "args": {"code": "R1"}, "id": "c1", "type": "tool_call"}
    middleware.append_new([first, AIMessage("", id="a1", tool_calls=[call])])
    rewritten = AIMessage("", id="a1", tool_calls=[{**call, "args": {"code": "R2"}}])
    caplog.set_level(logging.WARNING, logger="ledgerfold")
    middleware.append_new([first, rewritten])
    assert _changed(caplog) == 1
    rewritten.tool_calls[0]["args"]["code"] = "R3"  # in place
    middleware.append_new([first.model_copy(), rewritten])
    assert _changed(caplog) == 2
