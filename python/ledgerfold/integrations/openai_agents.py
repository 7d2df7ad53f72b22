"""`LedgerfoldSession`: an OpenAI Agents SDK `Session` backed by the ledger (`openai-agents`).

Every item the SDK adds becomes one turn, with the item kept verbatim in
`meta["agents_item"]` (JSON) so it comes back exactly as it came (a str text field is kept
once, as the turn body or the call's arguments, so its tokens are not counted twice): a
`message` is a turn of its role (`developer` → `system`), a `function_call` an assistant
turn with `tool_calls` and its `function_call_output` a tool turn in the same group (also
across `add_items` calls), a `reasoning` item an assistant turn holding its summary text,
and any other item type an assistant turn with no text. `get_items` returns the ledgerfold
context: the current summary as one `system` item, then every turn it does not cover, as
its item. After each `add_items`, compaction runs when the policy says it is due.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ledgerfold._compactor import Compactor
from ledgerfold._context import AssembledContext, SummaryItem
from ledgerfold._errors import InvalidInput
from ledgerfold._policy import CompactionPolicy
from ledgerfold.adapters._chat import ChatTurnSpec, chat_turn_specs, to_chat_messages
from ledgerfold.store._sqlite import SQLiteStore
from ledgerfold.summarizers._base import Summarizer

__all__ = ["ITEM_KEY", "LedgerfoldSession", "item_message"]

#: The meta key holding each item's original JSON.
ITEM_KEY = "agents_item"

# The str field of an item that the turn already holds, so the verbatim copy leaves it out.
_MOVED = {"message": "content", "function_call_output": "output", "function_call": "arguments"}
_MOVED_KEY = "__ledgerfold_moved__"

#: The default policy: compact once the context passes 8000 (approximate) tokens.
DEFAULT_POLICY = CompactionPolicy("ledgerfold-agents-1", keep_tail=8, trigger_tokens=8000)


def _plain(item: Any, index: int) -> dict[str, Any]:
    if hasattr(item, "model_dump"):  # an SDK/pydantic item rather than a dict
        item = item.model_dump(exclude_unset=True, mode="json")
    if not isinstance(item, Mapping):
        raise InvalidInput(
            f"items[{index}]: must be a mapping, got {type(item).__name__}",
            field=f"items[{index}]",
            problem="wrong-type",
        )
    return dict(item)


def _text_of(content: Any) -> str:
    """Text of a message's content: a str, or the text of its parts (input/output text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _kind(item: Mapping[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


def _stored(item: Mapping[str, Any]) -> str:
    """The item's verbatim JSON, less the str field the turn holds anyway."""
    moved = _MOVED.get(_kind(item))
    if moved is not None and isinstance(item.get(moved), str) and _MOVED_KEY not in item:
        item = {**{k: v for k, v in item.items() if k != moved}, _MOVED_KEY: moved}
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def _restored(text: str, meta: Mapping[str, str] | None) -> Any:
    """The item as it came, from a turn's text and meta."""
    meta = meta or {}
    item = json.loads(meta[ITEM_KEY])
    moved = item.pop(_MOVED_KEY, None) if isinstance(item, dict) else None
    if moved == "arguments":
        item[moved] = json.loads(meta["tool_calls"])[0]["function"]["arguments"]
    elif moved is not None:
        item[moved] = text
    return item


def item_message(item: Mapping[str, Any]) -> dict[str, Any]:
    """The chat message an item is stored as (before its verbatim copy is added)."""
    kind = _kind(item)
    if kind == "message":
        role = item.get("role")
        return {"role": role, "content": _text_of(item.get("content"))}
    if kind == "function_call":
        call = {
            "id": item.get("call_id"),
            "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
        }
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output) or json.dumps(output)
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": text}
    if kind == "reasoning":
        return {"role": "assistant", "content": _text_of(item.get("summary"))}
    return {"role": "assistant", "content": ""}


class LedgerfoldSession:
    """A `Session` (`agents.memory.Session` protocol) over a `SQLiteStore`.

    Constructed like the SDK's `SQLiteSession(session_id, db_path=":memory:")`, or over an
    existing store with `store=` (then `db_path` is ignored and the store is not closed
    here). `policy` defaults to `DEFAULT_POLICY`; `summarizer` to the `Compactor`'s default
    (`ExtractiveSummarizer`). The session ID is the ledger's conversation ID.
    """

    def __init__(
        self,
        session_id: str,
        db_path: str | os.PathLike[str] = ":memory:",
        *,
        store: SQLiteStore | None = None,
        policy: CompactionPolicy | None = None,
        summarizer: Summarizer | None = None,
        session_settings: Any = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self._owned = store is None
        self.store = store if store is not None else SQLiteStore(db_path)
        self.compactor = Compactor(
            self.store, policy if policy is not None else DEFAULT_POLICY, summarizer
        )

    def __repr__(self) -> str:
        return f"LedgerfoldSession(session_id={self.session_id!r}, store={self.store!r})"

    def close(self) -> None:
        """Close the store when this session opened it."""
        if self._owned:
            self.store.close()

    def context(self) -> AssembledContext:
        return self.compactor.context(self.session_id)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The context as items: the summary (one `system` item) and the uncovered turns'
        items as they came; with `limit`, the latest `limit` of them."""
        context = self.context()
        items: list[Any] = []
        for item in context.items:
            if isinstance(item, SummaryItem):
                # Only the summary goes through the chat adapter (its framed slot): the
                # items API pairs calls and outputs by call_id, so nothing is left out here.
                (message,) = to_chat_messages(AssembledContext((item,)))
                items.append({"role": "system", "content": message["content"]})
            else:
                items.append(_restored(item.text, item.meta))
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Any]) -> None:
        """Append the items as turns (one revision), then compact when due."""
        plain = [_plain(item, index) for index, item in enumerate(items)]
        if not plain:
            return
        specs = chat_turn_specs(item_message(item) for item in plain)
        with_items = [
            ChatTurnSpec(
                spec.id,
                spec.role,
                spec.body,
                {**spec.meta, ITEM_KEY: _stored(item)},
                spec.call_ids,
                spec.answers,
            )
            for spec, item in zip(specs, plain, strict=True)
        ]
        self.store._append_chat(self.session_id, with_items)
        await self.compactor.acompact(self.session_id)

    async def pop_item(self) -> Any | None:
        """Retract the newest turn and return its original item (None when empty)."""
        turns = self.store.load(self.session_id).turns
        if not turns:
            return None
        last = turns[-1]
        self.store.retract(self.session_id, last.id)
        return _restored(last.body, last.meta)

    async def clear_session(self) -> None:
        """Retract every turn: the items are gone from the session (the ledger keeps them
        as retracted), and any summary of them is no longer used."""
        for turn in self.store.load(self.session_id).turns:
            self.store.retract(self.session_id, turn.id)
