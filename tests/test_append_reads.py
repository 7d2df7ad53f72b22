"""An append costs its new turns, not the ledger (SPEC §15.8 cost): a turn that answers no
tool call does not look for a caller among the ledger's assistant turns, and one that does
finds it through the calls index, also when no call was made; and a context read
beside a call nothing answers does not read the summary's sources for its results."""

from __future__ import annotations

import json
from pathlib import Path

from ledgerfold import SQLiteStore
from steps_support import answered_calls, chat_call, compact_all, vm_steps

#: Text of the statement looking for a call of an ID (`_call_pairs.nearest_call`).
_CALLER_LOOKUP = "json_each(json_extract(t.meta, '$.tool_calls'))"


def test_a_plain_append_does_not_look_for_callers(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        store.append_many(
            "c",
            [{"role": "user" if n % 2 else "assistant", "body": f"turn {n}"} for n in range(300)],
        )
        statements: list[str] = []
        store._connection().set_trace_callback(statements.append)
        try:
            store.append("c", "user", "one more")
            store.append_chat_messages("c", [{"role": "assistant", "content": "and a reply"}])
        finally:
            store._connection().set_trace_callback(None)
        assert statements  # the trace saw the appends
        assert not [s for s in statements if _CALLER_LOOKUP in s]


def test_a_tool_result_still_finds_its_caller(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        store.append_chat_messages(
            "c",
            [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
            ],
        )
        statements: list[str] = []
        store._connection().set_trace_callback(statements.append)
        try:
            store.append_chat_messages(
                "c", [{"role": "tool", "tool_call_id": "c1", "content": "r"}]
            )
        finally:
            store._connection().set_trace_callback(None)
        assert [s for s in statements if _CALLER_LOOKUP in s]


def _cold_context_steps(
    path: Path, messages: list[dict[str, object]], keep_tail: int, raw_call: str
) -> int:
    """SQLite VM steps (in tens) of a context read not served from the cache, after
    `messages` are appended and compacted down to a tail of `keep_tail`, the call of ID
    `raw_call` among the raw items."""
    with SQLiteStore(path, durability="normal") as store:
        store.append_chat_messages("c", messages)
        compact_all(store, keep_tail)
        store._contexts.clear()  # a read after a commit: not served from the cache
        steps, context = vm_steps(store, lambda: store.context("c", "v1"))
        assert context.fallback is None and context.summary is not None
        assert raw_call in json.dumps([getattr(item, "meta", None) for item in context.items])
        return steps


def _covered(calls: int, first: str = "k0") -> list[dict[str, object]]:
    ids = [first, *(f"k{n}" for n in range(1, calls))]
    return [{"role": "user", "content": "q"}, *answered_calls(ids)]


def test_a_context_read_beside_an_unanswered_call_does_not_read_the_sources(
    tmp_path: Path,
) -> None:
    """A call nothing answers left raw below the summary (real transcripts end runs so)."""

    def messages(calls: int) -> list[dict[str, object]]:
        lost: dict[str, object] = {"role": "assistant", "content": None}
        lost["tool_calls"] = [chat_call("lost")]
        # The lost call early, the answered ones after it, a tail of four raw.
        return [{"role": "user", "content": "q"}, lost, *_covered(calls)[1:]]

    small = _cold_context_steps(tmp_path / "small.db", messages(50), 4, "lost")
    large = _cold_context_steps(tmp_path / "large.db", messages(1000), 4, "lost")
    assert large <= 2 * small


def test_a_context_read_beside_a_call_made_again_does_not_read_the_sources(
    tmp_path: Path,
) -> None:
    """The first covered call has ID ``dup``; a raw call of ``dup`` is made again and not
    yet answered (a framework numbering its calls per turn)."""

    def messages(calls: int) -> list[dict[str, object]]:
        again: dict[str, object] = {"role": "assistant", "content": None}
        again["tool_calls"] = [chat_call("dup")]
        return [*_covered(calls, first="dup"), {"role": "user", "content": "again"}, again]

    small = _cold_context_steps(tmp_path / "small.db", messages(50), 2, "dup")
    large = _cold_context_steps(tmp_path / "large.db", messages(1000), 2, "dup")
    assert large <= 2 * small


def _callless_read_steps(path: Path, covered_calls: int) -> int:
    """A context read over `covered_calls` answered calls, with a raw result whose call was
    never made (appended after the compaction)."""
    with SQLiteStore(path, durability="normal") as store:
        store.append_chat_messages("c", _covered(covered_calls))
        compact_all(store, 2)
        store.append("c", "tool", "late", meta={"tool_call_id": "never-made"})
        store._contexts.clear()
        steps, context = vm_steps(store, lambda: store.context("c", "v1"))
        assert context.fallback is None and context.summary is not None
        assert "never-made" in json.dumps(getattr(context.items[-1], "meta", None))
        return steps


def test_a_context_read_beside_a_result_without_a_call_does_not_read_the_sources(
    tmp_path: Path,
) -> None:
    small = _callless_read_steps(tmp_path / "small.db", 50)
    large = _callless_read_steps(tmp_path / "large.db", 1000)
    assert large <= 2 * small


def _late_result_steps(path: Path, exchanges: int) -> int:
    """SQLite VM steps (in tens) of appending a result whose call was never made, after
    `exchanges` call-and-result pairs."""
    with SQLiteStore(path, durability="normal") as store:
        rows: list[dict[str, object]] = []
        for n in range(exchanges):
            call = {"id": f"k{n}", "type": "function", "function": {"name": "f"}}
            rows += [
                {"role": "assistant", "body": "", "meta": {"tool_calls": json.dumps([call])}},
                {"role": "tool", "body": f"result {n}", "meta": {"tool_call_id": f"k{n}"}},
            ]
        store.append_many("c", rows)
        steps, _ = vm_steps(
            store, lambda: store.append("c", "tool", "late", meta={"tool_call_id": "never-made"})
        )
        return steps


def test_a_result_whose_call_was_never_made_does_not_read_the_assistant_turns(
    tmp_path: Path,
) -> None:
    small = _late_result_steps(tmp_path / "small.db", 100)
    large = _late_result_steps(tmp_path / "large.db", 2000)
    assert large <= 2 * small
