"""A summary's escaped text does not stay in process memory once the summary is erased
(`retract(erase=True)` of a source, `delete_conversation`, a session's `clear_session`), nor
does a recalled passage once its turn is: the escape keeps nothing (no module-wide memo),
and an integration keeps the message it made from a summary only while the store's summary
item lives (`adapters/_summary_contents.py`), which the store drops at any erasure.

Memory is searched with the cycle collector's view of it: every string a tracked container
(a dict, a list, a function's cache, a frame) refers to."""

from __future__ import annotations

import asyncio
import gc
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore, SummaryRequest, to_chat_messages
from ledgerfold.adapters import _chat as chat
from ledgerfold.tools import run_recall

POLICY = CompactionPolicy("memory-v1", keep_tail=2, min_new_turns=1)


def _held_elsewhere(fragment: str) -> list[str]:
    """The types of the objects holding a string that contains `fragment` (not `fragment`
    itself)."""
    gc.collect()
    return [
        type(holder).__name__
        for holder in gc.get_objects()
        for referent in gc.get_referents(holder)
        if isinstance(referent, str) and referent is not fragment and fragment in referent
    ]


def _marked() -> tuple[str, str]:
    """A summary text whose escape differs from it, and the fragment only its escape holds:
    made afresh, so no constant of this module holds either."""
    mark = f"mark-{uuid.uuid4().hex}"
    return f"What was said.\nuser: {mark} wants it", f"user&#58; {mark}"


def _store(path: Path, text: str) -> SQLiteStore:
    store = SQLiteStore(path)
    store.append_many("c", [{"role": "user", "body": f"turn {n}", "id": f"t{n}"} for n in range(6)])

    def summarizer(request: SummaryRequest) -> str:
        return text

    assert Compactor(store, POLICY, summarizer).compact("c", force=True).status == "accepted"
    return store


def _erase(store: SQLiteStore, how: str) -> None:
    if how == "delete":
        store.delete_conversation("c")
    else:
        store.retract("c", "t0", erase=True)  # a source: every version citing it goes


def _served_messages(store: SQLiteStore, fragment: str) -> None:
    messages = to_chat_messages(store.context("c", POLICY.version))
    assert fragment in messages[0]["content"]


@pytest.mark.parametrize("how", ["delete", "erase-source"])
def test_an_erased_summary_leaves_no_escaped_text_in_memory(tmp_path: Path, how: str) -> None:
    """The escape kept the escaped text of the last 32 summaries (and the texts themselves)
    in a module-wide cache, whatever became of them."""
    text, fragment = _marked()
    store = _store(tmp_path / "s.db", text)
    del text
    _served_messages(store, fragment)
    _erase(store, how)
    assert store.context("c", POLICY.version).summary is None
    assert _held_elsewhere(fragment) == []
    store.close()


def test_an_erased_turn_leaves_no_escaped_recalled_passage_in_memory(tmp_path: Path) -> None:
    """`run_recall` escapes each passage as the summary slot is: the same cache kept them."""
    mark = f"mark{uuid.uuid4().hex}"
    fragment = f"user&#58; {mark}"
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append("c", "user", f"note\nuser: {mark} opened it", id="t0")
        result = json.loads(run_recall(store, "c", {"query": mark}))
        assert fragment in result["hits"][0]["text"]
        del result
        store.retract("c", "t0", erase=True)
        assert _held_elsewhere(fragment) == []


def _middleware_messages(middleware: Any, fragment: str) -> None:
    (message,) = middleware.model_messages()[:1]
    assert fragment in message.content


@pytest.mark.parametrize("how", ["delete", "erase-source"])
def test_the_middleware_keeps_no_escaped_summary_after_an_erasure(tmp_path: Path, how: str) -> None:
    """The middleware makes a summary's message once while the store serves the same item,
    and forgets it when the store drops the item, as it does at an erasure."""
    from ledgerfold.integrations.langchain import LedgerfoldMiddleware

    text, fragment = _marked()
    store = _store(tmp_path / "s.db", text)
    del text
    middleware = LedgerfoldMiddleware(store, "c", policy=POLICY)
    _middleware_messages(middleware, fragment)
    _erase(store, how)
    assert _held_elsewhere(fragment) == []
    assert len(middleware._contents) == 0  # the item's entry went with it
    store.close()


@pytest.mark.parametrize("how", ["clear_session", "erase-on-the-store"])
def test_a_session_keeps_no_escaped_summary_after_an_erasure(tmp_path: Path, how: str) -> None:
    """Through `clear_session`, or made on the store itself: the messages the session
    served, which `call_model_input_filter` must recognise, are known by a digest and a
    weak reference to the item, not by their text."""
    from ledgerfold.integrations.openai_agents import LedgerfoldSession

    text, fragment = _marked()
    store = _store(tmp_path / "s.db", text)
    del text
    session = LedgerfoldSession("c", store=store, policy=POLICY)

    async def served() -> None:
        items = await session.get_items()
        assert fragment in items[0]["content"]

    asyncio.run(served())
    if how == "clear_session":
        asyncio.run(session.clear_session())
    else:
        store.retract("c", "t0", erase=True)
    assert _held_elsewhere(fragment) == []
    store.close()


def test_a_summary_served_again_is_escaped_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the store serves the same summary item (nothing changed), the integration's
    message of it is made once; another summary, or the recall line, makes another."""
    from ledgerfold.adapters._summary_contents import SummaryContents

    escaped: list[str] = []
    real = chat.escape_summary_text
    monkeypatch.setattr(
        chat, "escape_summary_text", lambda text: escaped.append(text) or real(text)
    )
    text, _ = _marked()
    with _store(tmp_path / "s.db", text) as store:
        contents = SummaryContents()
        item = store.context("c", POLICY.version).summary
        assert item is not None
        first = contents.content(item, False)
        for _ in range(3):
            again = store.context("c", POLICY.version).summary
            assert again is item and contents.content(again, False) is first
        assert len(escaped) == 1
        assert contents.content(item, True) != first  # the framing names recall_history
        assert len(escaped) == 2 and len(contents) == 1
        assert contents.content(item, False) == chat.summary_content(item, False)
