"""`get_items`' job (`LedgerfoldSession._items`) against its reference as it was before its
fast path (`agents_get_items_reference.py`: every turn restored anew, every item through
`sendable`'s walk): the same items in the same order, fresh objects at every call, over the
real transcripts (with compactions, so a summary leads the context and the context is read
anew) and over hypothesis sequences of items, pops, compactions and edits. The fast path: a
context with no call, result or reasoning item is served as it is, and a turn read anew
with the same role, text and meta is not restored again. Real SQLite files."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_get_items_reference import reference_items
from ledgerfold import CompactionPolicy, SQLiteStore
from ledgerfold._worker import worker_for
from ledgerfold.integrations.openai_agents import LedgerfoldSession

#: Compacts often: summaries in the context, turns read anew after each.
OFTEN = CompactionPolicy("often", keep_tail=3, trigger_tokens=300, min_new_turns=2)


async def _check(session: LedgerfoldSession, limit: int | None) -> None:
    expected = await worker_for(session.store).run(reference_items, session, limit)
    first = await session.get_items(limit)
    assert first == expected
    for item in first:  # a caller may change what it got: the next call is not affected
        item["content"] = ["changed"]
        item.pop("call_id", None)
    second = await session.get_items(limit)
    assert second == expected
    assert all(a is not b for a, b in zip(first, second, strict=True))


def _agents_items(turns: list[dict[str, Any]]) -> list[Any]:
    """A transcript's turns as Agents items: messages, calls and their results, a reasoning
    item before every third assistant turn, and a reply as output text parts (not flat)."""
    items: list[Any] = []
    for at, turn in enumerate(turns):
        role, body = turn["role"], turn["body"]
        if role == "tool":
            ids = turn["tool_call_ids"]
            result: dict[str, Any] = {"type": "function_call_output", "output": body}
            items.append({**result, "call_id": ids[0]} if ids else result)
        elif role == "assistant":
            if at % 3 == 0:
                items.append({"type": "reasoning", "id": f"rs_{at}", "summary": []})
            if at % 2:
                items.append({"role": "assistant", "content": body})
            else:
                text = {"type": "output_text", "text": body, "annotations": []}
                items.append({"type": "message", "role": "assistant", "content": [text]})
            for call in turn["tool_call_ids"]:
                arguments = json.dumps({"n": at})
                items.append(
                    {"type": "function_call", "call_id": call, "name": "f", "arguments": arguments}
                )
        else:
            items.append({"role": role, "content": body})
    return items


def test_real_transcripts_are_served_as_by_the_reference(
    tmp_path: Path, raw_transcripts: list[dict[str, Any]]
) -> None:
    conversations = [c for c in raw_transcripts if len(c["turns"]) >= 6][:12]
    assert len(conversations) == 12

    async def run() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        try:
            for number, conversation in enumerate(conversations):
                session = LedgerfoldSession(f"c{number}", store=store, policy=OFTEN)
                items = _agents_items(conversation["turns"][:40])
                for start in range(0, len(items), 3):
                    await session.add_items(items[start : start + 3])
                    await session.wait_compaction()
                    await _check(session, None)
                    await _check(session, 2)
                plain = [i for i in items if i.get("role") in ("user", "assistant")]
                chat = LedgerfoldSession(f"p{number}", store=store, policy=OFTEN)
                for start in range(0, len(plain), 2):  # the fast path: messages only
                    await chat.add_items(plain[start : start + 2])
                    await chat.wait_compaction()
                    await _check(chat, None)
        finally:
            store.close()

    asyncio.run(run())


_TEXT = st.text(alphabet="ab c\n", max_size=5)
_CALL_ID = st.sampled_from(["call_1", "call_2"])
_MESSAGE = st.one_of(
    st.builds(lambda r, t: {"role": r, "content": t}, st.sampled_from(["user", "system"]), _TEXT),
    st.builds(lambda t: {"role": "assistant", "content": t}, _TEXT),
    st.builds(
        lambda t: {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        },
        _TEXT,
    ),
    st.builds(lambda t: {"role": "user", "content": [{"type": "input_text", "text": t}]}, _TEXT),
)
_ITEM = st.one_of(
    _MESSAGE,
    _MESSAGE,
    st.builds(
        lambda c: {"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"},
        _CALL_ID,
    ),
    st.builds(
        lambda c, o: {"type": "function_call_output", "call_id": c, "output": o}, _CALL_ID, _TEXT
    ),
    st.builds(lambda: {"type": "reasoning", "id": "rs_1", "summary": []}),
)
_OP = st.one_of(
    st.tuples(st.just("add"), st.lists(_ITEM, min_size=1, max_size=3)),
    st.tuples(st.just("add"), st.lists(_MESSAGE, min_size=1, max_size=3)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("edit"), st.tuples(st.integers(0, 5), _TEXT, st.booleans())),
    st.tuples(st.just("get"), st.one_of(st.none(), st.integers(-1, 3))),
)


def _edit(store: SQLiteStore, at: int, body: str, drop_meta: bool) -> None:
    turns = store.load("c").turns
    if turns:
        turn = turns[at % len(turns)]
        store.edit("c", turn.id, **({"meta": {}} if drop_meta else {"body": body}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OP, max_size=12))
def test_item_sequences_are_served_as_by_the_reference(ops: list[tuple[str, Any]]) -> None:
    async def run(path: Path) -> None:
        store = SQLiteStore(path)
        policy = CompactionPolicy("v1", keep_tail=2, trigger_tokens=None, min_new_turns=2)
        session = LedgerfoldSession("c", store=store, policy=policy)
        try:
            for op, arg in ops:
                if op == "add":
                    await session.add_items(arg)
                    await session.wait_compaction()
                elif op == "pop":
                    await session.pop_item()
                elif op == "compact":
                    await session.compactor.acompact("c", force=True)
                elif op == "edit":  # a turn's text or meta changed: its items change
                    _edit(store, *arg)
                await _check(session, arg if op == "get" else None)
        finally:
            store.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp) / "s.db"))


def test_a_turn_whose_meta_alone_changed_is_restored_anew(tmp_path: Path) -> None:
    """Same role and text, another meta (its verbatim copy gone): the item the turn gives
    changes (a reply's text parts become its text), so the memo's restoration is not kept."""
    reply = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "done", "annotations": []}],
    }

    async def run() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        session = LedgerfoldSession("c", store=store)
        try:
            await session.add_items([{"role": "user", "content": "go"}, reply])
            await _check(session, None)
            (_, turn) = store.load("c").turns
            store.edit("c", turn.id, meta={})
            await _check(session, None)
            assert (await session.get_items())[-1] == {"role": "assistant", "content": "done"}
        finally:
            store.close()

    asyncio.run(run())
