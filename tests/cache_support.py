"""The random writes the store's caches are checked under (`test_context_cache`,
`test_due_at_once_cache`): two conversations, each compacted once, then a sequence of
appends, edits, retractions, compactions, another connection's writes and raw tampering,
each test comparing what the cached store answers with an uncached oracle after each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ledgerfold import CompactionPolicy, Compactor, SQLiteStore

#: What every write below may be: `fail` needs a compactor whose summarizer raises.
OPS = (
    "append",
    "edit",
    "retract",
    "retract-newest",
    "erase-newest",
    "compact",
    "fail",
    "tamper",
    "other-append",
    "tool-call",
    "tool-result",
    "prune",
)


def ops(names: tuple[str, ...] = OPS) -> st.SearchStrategy[list[tuple[str, str, int]]]:
    """Up to 12 writes: `(op, conversation, pick)`, `pick` choosing a turn or a variant."""
    return st.lists(
        st.tuples(st.sampled_from(names), st.sampled_from(["a", "b"]), st.integers(0, 50)),
        max_size=12,
    )


def turns(prefix: str, count: int) -> list[dict[str, str]]:
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "body": f"{prefix} message {n}"}
        for n in range(count)
    ]


def compacted(path: Path, policy: CompactionPolicy) -> tuple[SQLiteStore, Compactor]:
    """A store at `path` with conversations `a` and `b`, 8 turns each, compacted once."""
    store = SQLiteStore(path)
    compactor = Compactor(store, policy)
    for conversation in ("a", "b"):
        store.append_many(conversation, turns(conversation, 8))
        assert compactor.compact(conversation, force=True).status == "accepted"
    return store, compactor


class Writes:
    """Applies the writes of `ops()` to `store` (`other`: a second store on the same file)."""

    def __init__(
        self,
        store: SQLiteStore,
        other: SQLiteStore,
        compactor: Compactor,
        failing: Compactor | None = None,
    ) -> None:
        self.store, self.other, self.compactor, self.failing = store, other, compactor, failing
        self.calls: dict[str, list[str]] = {"a": [], "b": []}

    def apply(self, step: int, op: str, conversation: str, pick: int) -> None:
        store = self.store
        live = store.load(conversation).turns
        if op == "append":
            store.append_many(conversation, turns(f"{conversation}{pick}", 1 + pick % 3))
        elif op == "edit" and live:
            store.edit(conversation, live[pick % len(live)].id, body=f"edit {pick}")
        elif op == "retract" and len(live) > 1:
            store.retract(conversation, live[pick % len(live)].id)
        elif op in ("retract-newest", "erase-newest") and len(live) > 1:
            store.retract(conversation, live[-1].id, erase=op == "erase-newest")
        elif op == "compact":
            self.compactor.compact(conversation, force=True)
        elif op == "fail" and self.failing is not None:
            self.failing.compact(conversation, force=True)
        elif op == "prune":
            store.prune_versions(conversation, keep=pick % 2, keep_checkpoints=pick % 3)
        elif op == "tamper":
            store._connection().execute(
                "UPDATE summaries SET status = 'stale', reason = 'source-modified'"
                " WHERE conversation_id = ? AND status = 'current'",
                (conversation,),
            )
        elif op == "other-append":
            self.other.append_many(conversation, turns(f"other{pick}", 1))
        elif op == "tool-call":
            self.calls[conversation].append(f"call-{step}")
            call: dict[str, Any] = {
                "id": f"call-{step}",
                "type": "function",
                "function": {"name": "lookup", "arguments": "{}"},
            }
            store.append_chat_messages(
                conversation, [{"role": "assistant", "content": None, "tool_calls": [call]}]
            )
        elif op == "tool-result" and self.calls[conversation]:
            # A result of a call made earlier (perhaps summarised: its unit splits).
            call_id = self.calls[conversation][pick % len(self.calls[conversation])]
            store.append_chat_messages(
                conversation, [{"role": "tool", "tool_call_id": call_id, "content": f"r{pick}"}]
            )
